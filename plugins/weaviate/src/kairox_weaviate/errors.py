"""What goes wrong with a ``weaviate`` knowledge base: its errors, the client loaded on first
use, reading the gRPC or HTTP status out of whatever the client raised, and
:func:`translate`, which turns a client failure into an error that says what to check."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from kairox import BackendError, BackendTimeoutError, LazyImport, QueryError

if TYPE_CHECKING:
    from kairox_weaviate.config import WeaviateConfig

INSTALL_HINT = "pip install kairox-weaviate (or pip install 'weaviate-client>=4.9,<5')"


#: gRPC statuses and HTTP statuses worth another try.
RETRYABLE_GRPC = frozenset({"UNAVAILABLE", "RESOURCE_EXHAUSTED"})


RETRYABLE_HTTP = frozenset({429, 500, 502, 503, 504})


AUTH_GRPC = frozenset({"UNAUTHENTICATED", "PERMISSION_DENIED"})


_CONNECTION_ERRORS = frozenset({"WeaviateStartUpError", "WeaviateConnectionError", "ConnectError"})


class WeaviateSourceError(BackendError):
    """Weaviate could not answer; the message says what to check."""


class WeaviateAuthError(WeaviateSourceError):
    """Weaviate refused the credentials (401/403, UNAUTHENTICATED/PERMISSION_DENIED)."""


class WeaviateNotFoundError(WeaviateSourceError):
    """The configured collection or tenant does not exist."""


class WeaviateTimeoutError(WeaviateSourceError, BackendTimeoutError):
    """Weaviate did not answer within the knowledge base's ``timeout_ms``."""


#: The old name of :class:`WeaviateTimeoutError`, kept for one release.
WeaviateDeadlineError = WeaviateTimeoutError


class WeaviateReplyError(WeaviateSourceError):
    """Weaviate's reply lacks something a hit needs (the text property, a score)."""


# weaviate.classes: the v4 API the source uses
CLIENT = LazyImport(
    "weaviate",
    "weaviate.classes",
    needed_by="the 'weaviate' knowledge-base kind",
    install=INSTALL_HINT,
    distributions={"weaviate": "weaviate-client"},
)


def require_client() -> None:
    """Raise an ``ImportError`` with the install hint unless weaviate-client is installed
    (``find_spec``: nothing is imported)."""
    CLIENT.check()


def load_client() -> Any:
    """The ``weaviate`` package, imported on first use (with the install hint if missing).

    The import takes about half a second, so the kind's factory calls this when a knowledge
    base is built rather than leaving it to the first query, whose deadline is meant for
    the network."""
    return CLIENT.load()


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        if current.__cause__ is not None or current.__suppress_context__:
            current = current.__cause__
        else:
            current = current.__context__


def grpc_status(exc: BaseException) -> str | None:
    """The gRPC status name (``"UNAVAILABLE"``) behind a client error, if any."""
    for error in _chain(exc):
        name = getattr(_called(error, "code"), "name", None)
        if isinstance(name, str):
            return name
    return None


def _called(error: BaseException, method: str) -> Any:
    """What ``error.method()`` returns (gRPC errors carry ``code()`` and ``details()``);
    ``None`` when there is no such method or it fails."""
    found = getattr(error, method, None)
    if not callable(found):
        return None
    try:
        return found()
    except Exception:
        return None


def http_status(exc: BaseException) -> int | None:
    """The HTTP error status (4xx, 5xx) behind a client error (REST calls only), if any."""
    if grpc_status(exc) is not None:
        return None  # UnexpectedStatusCodeError also wraps gRPC calls, with gRPC codes
    for error in _chain(exc):
        status = getattr(error, "status_code", None)
        if not isinstance(status, int):
            status = getattr(getattr(error, "response", None), "status_code", None)
        if isinstance(status, int) and 400 <= status <= 599:
            return status
    return None


def is_retryable(exc: Exception) -> bool:
    """Throttling (RESOURCE_EXHAUSTED, 429) and unavailability (UNAVAILABLE, 5xx)."""
    return grpc_status(exc) in RETRYABLE_GRPC or http_status(exc) in RETRYABLE_HTTP


def _body_message(body: Any) -> str | None:
    """The message in a Weaviate REST error body (``{"message": ...}`` or
    ``{"error": [{"message": ...}]}``)."""
    if isinstance(body, Mapping):
        if isinstance(body.get("message"), str):
            return body["message"]
        errors = body.get("error")
        if isinstance(errors, list) and errors and isinstance(errors[0], Mapping):
            message = errors[0].get("message")
            return message if isinstance(message, str) else None
    return None


def _detail(exc: BaseException) -> str:
    """The most telling text about a client error: the gRPC status details, the REST
    error body's message, the innermost error's text for a connection failure (the
    client's own wrapper says little), else the error's own message."""
    for error in _chain(exc):
        text = _called(error, "details")
        if isinstance(text, str) and text:
            return text.rstrip(". ")
    for error in _chain(exc):
        message = _body_message(getattr(error, "error", None))
        if message:
            return message.rstrip(". ")
    texts = [str(getattr(e, "message", "") or e).strip() for e in _chain(exc)]
    texts = [text for text in texts if text]
    if type(exc).__name__ in _CONNECTION_ERRORS and texts:
        return texts[-1].rstrip(". ")
    return (texts[0] if texts else type(exc).__name__).rstrip(". ")


def translate(exc: Exception, name: str, where: str, config: WeaviateConfig) -> Exception:
    """A client failure of knowledge base ``name`` (``where`` names the server and the
    knowledge base for messages) as a Kairox error that says what to check."""
    status, http = grpc_status(exc), http_status(exc)
    detail = _detail(exc)
    lowered = detail.lower()
    type_name = type(exc).__name__
    if status in AUTH_GRPC or http in {401, 403} or type_name == "InsufficientPermissionsError":
        denied = status == "PERMISSION_DENIED" or http == 403 or (status, http) == (None, None)
        what = (
            "denied the request (403 / PERMISSION_DENIED)"
            if denied
            else "rejected the credentials (401 / UNAUTHENTICATED)"
        )
        if config.api_key_env:
            fix = (
                f"check the API key in the environment variable {config.api_key_env} "
                f"(api_key_env) and its permissions on collection {config.collection!r}"
            )
        else:
            fix = (
                'this Weaviate needs an API key: set api_key_env = "NAME" in '
                f"[knowledge_bases.{name}] and export NAME=<key>"
            )
        return WeaviateAuthError(f"{where} {what}: {detail}. Fix: {fix}")
    if (
        status == "DEADLINE_EXCEEDED"
        or type_name in {"WeaviateTimeoutError", "ReadTimeout", "TimeoutException"}
        or isinstance(exc, TimeoutError)
    ):
        return WeaviateTimeoutError(
            f"{where} did not answer within timeout_ms = {config.timeout_ms} ms "
            f"({detail}); raise timeout_ms if the collection is large or the network slow"
        )
    if "could not find class" in lowered:
        return WeaviateNotFoundError(
            f"{where} has no collection {config.collection!r} ({detail}): create "
            "it, or correct `collection`"
        )
    if "tenant not found" in lowered:
        return WeaviateNotFoundError(
            f"{where}: collection {config.collection!r} has no tenant "
            f"{config.tenant!r} ({detail}); create the tenant or correct `tenant`"
        )
    if "multi-tenancy enabled" in lowered:
        return WeaviateSourceError(
            f"{where}: collection {config.collection!r} is multi-tenant; set "
            "`tenant` to the tenant to search"
        )
    if "multi-tenancy disabled" in lowered:
        return WeaviateSourceError(
            f"{where}: collection {config.collection!r} is not multi-tenant; "
            f"remove `tenant` ({config.tenant!r})"
        )
    if any(
        marker in lowered
        for marker in ("no such prop", "data type filter cannot", "filtering for integer")
    ):
        return QueryError(f"{where} cannot apply the filters: {detail}")
    if "vector lengths don't match" in lowered or "vector length" in lowered:
        return WeaviateSourceError(
            f"{where}: the query vector does not fit the collection's vectors "
            f"({detail}); embedding_backend = {config.embedding_backend!r} must be the "
            "model that embedded the collection"
        )
    if type_name in _CONNECTION_ERRORS:
        return WeaviateSourceError(
            f"cannot reach {where}: {detail}. Is Weaviate running, and are url and grpc_port right?"
        )
    if status is not None or http is not None:
        code = status or http
        return WeaviateSourceError(f"{where} failed ({code}): {detail}")
    return WeaviateSourceError(f"{where} failed: {type_name}: {detail}")
