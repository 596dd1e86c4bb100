"""What goes wrong with a ``pinecone`` knowledge base: its errors, the SDK loaded (and its
version checked) on first use, and reading the SDK's errors without importing it."""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import math
from typing import TYPE_CHECKING, Any

from kairox import BackendError, BackendTimeoutError, LazyImport

if TYPE_CHECKING:
    from types import ModuleType


# The source's logger: what the SDK loading says is the source's business.
logger = logging.getLogger("kairox_pinecone.source")

#: The oldest pinecone SDK this plugin works with: 9.0, the httpx-based rewrite of the SDK
#: (8.x and older are a different, OpenAPI-generated client).
MIN_SDK_VERSION: tuple[int, ...] = (9, 0)


INSTALL_HINT = "pip install kairox-pinecone (or pip install 'pinecone>=9')"


class PineconeSourceError(BackendError):
    """A Pinecone knowledge base could not answer; the message says why and what to do."""


class PineconeConfigurationError(PineconeSourceError):
    """The knowledge base is set up wrongly: a missing API-key variable, a host that is
    not a URL, or an index whose dimension or metric does not fit the embedding backend."""


class PineconeAuthError(PineconeSourceError):
    """Pinecone refused the API key (401) or what it may do (403). Never retried."""


class PineconeServiceError(PineconeSourceError):
    """Pinecone answered with an error (throttled or failing past the retry budget, a
    rejected request) or with a response the SDK could not read."""


class PineconeTimeoutError(PineconeSourceError, BackendTimeoutError):
    """No answer from the index within the knowledge base's deadline."""


class PineconeUnreachableError(PineconeSourceError, ConnectionError):
    """The index host could not be reached at all (DNS, refused connection, TLS)."""


def _version_tuple(version: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in version.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


PINECONE = LazyImport(
    "pinecone", needed_by="the 'pinecone' knowledge-base kind", install=INSTALL_HINT
)


def load_pinecone() -> ModuleType:
    """Import the pinecone SDK, or raise an ImportError that says what to install."""
    pinecone = PINECONE.load()
    version = str(getattr(pinecone, "__version__", "0"))
    if _version_tuple(version) < MIN_SDK_VERSION or not hasattr(pinecone, "Index"):
        wanted = ".".join(map(str, MIN_SDK_VERSION))
        raise ImportError(
            f"the 'pinecone' knowledge-base kind needs pinecone>={wanted}, but pinecone "
            f"{version} is installed (the old `pinecone-client` package also installs a "
            f"`pinecone` module): pip uninstall pinecone-client; {INSTALL_HINT}",
            name="pinecone",
        )
    return pinecone


def _sdk_problem() -> str | None:
    """Why the SDK cannot be used, found without importing it; ``None`` if it looks fine."""
    try:
        PINECONE.check()
    except ImportError as exc:
        return str(exc)
    try:
        version = importlib.metadata.version("pinecone")
    except importlib.metadata.PackageNotFoundError:
        return None  # installed some other way; load_pinecone() checks it on first use
    if _version_tuple(version) < MIN_SDK_VERSION:
        wanted = ".".join(map(str, MIN_SDK_VERSION))
        return f"pinecone {version} is installed, but kairox-pinecone needs pinecone>={wanted}: {INSTALL_HINT}"
    return None


def _switch_off_sdk_retries(index: Any) -> bool:
    """Make the SDK's REST transport send each request once.

    The SDK's data-plane REST client retries 408/429/5xx and dropped connections by
    itself (three times, sleeping as long as ``Retry-After`` asks, up to a minute), and
    ``pinecone.Index`` takes no retry setting: its ``retry_config`` reaches the control
    plane and gRPC only. Kairox retries itself, inside the knowledge base's deadline, so
    this client's retry wrapper is taken out and its httpx transport used directly.
    If an SDK lays its client out differently this does nothing and the SDK's own
    retries stay on (still correct, just not bounded by the deadline); the plugin's
    tests notice (they count requests).
    """
    try:
        import httpx

        client = index._http._client
        wrapper = client._transport
        inner = wrapper._transport
    except (ImportError, AttributeError):
        logger.debug("pinecone SDK transport not recognised; its own retries stay on")
        return False
    if "Retry" not in type(wrapper).__name__ or not isinstance(inner, httpx.BaseTransport):
        logger.debug("pinecone SDK transport not recognised; its own retries stay on")
        return False
    client._transport = inner
    return True


def _is_sdk_error(exc: BaseException, name: str) -> bool:
    return any(
        cls.__name__ == name and cls.__module__.startswith("pinecone") for cls in type(exc).__mro__
    )


def _status(exc: BaseException) -> int | None:
    """The HTTP status of an SDK error (``status_code``; ``status`` in older SDKs)."""
    if not type(exc).__module__.startswith("pinecone"):
        return None
    for attribute in ("status_code", "status"):
        value = getattr(exc, attribute, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _retry_after(exc: Exception) -> float | None:
    value = getattr(exc, "retry_after", None)
    if value is None:
        headers = getattr(exc, "headers", None) or {}
        with contextlib.suppress(AttributeError):
            value = {str(k).lower(): v for k, v in headers.items()}.get("retry-after")
    try:
        seconds = float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
    return seconds if seconds is not None and math.isfinite(seconds) and seconds >= 0 else None


def _message(exc: BaseException) -> str:
    message = getattr(exc, "message", None)
    text = message if isinstance(message, str) and message else str(exc)
    text = " ".join(text.split())
    return text[:500] + "..." if len(text) > 500 else text or type(exc).__name__


def translate(
    exc: Exception,
    kb: str,
    *,
    where: str,
    host: str,
    api_key_env: str,
    what: str,
    attempts: int,
) -> Exception | None:
    """An SDK failure of ``what`` (a query, an upsert...) by knowledge base ``kb`` as a
    :class:`PineconeSourceError` subclass saying what to do; ``None`` for an error that
    is no SDK error (a bug: let it through). ``where`` names the index for messages."""
    tries = f" ({attempts} attempts)" if attempts > 1 else ""
    status = _status(exc)
    detail = _message(exc)
    if status in (401, 403):
        refused = (
            "rejected the API key" if status == 401 else "does not allow this API key to do that"
        )
        return PineconeAuthError(
            f"{kb}: {where} {refused} ({status}: {detail}). Check that the "
            f"environment variable {api_key_env} (api_key_env) holds a valid API "
            "key of the project that owns this index."
        )
    if status == 429:
        return PineconeServiceError(
            f"{kb}: {where} is throttling requests (429 Too Many Requests) and "
            f"did not let the {what} through in time{tries}: {detail}"
        )
    if status is not None and 500 <= status <= 599:
        return PineconeServiceError(
            f"{kb}: {where} failed the {what} with {status}{tries}: {detail}"
        )
    if status == 404:
        return PineconeServiceError(
            f"{kb}: nothing answers the {what} at {host} (404: {detail}). Check "
            "host: it is the index's host from the Pinecone console, "
            "e.g. https://NAME-PROJECT.svc.REGION.pinecone.io"
        )
    if status is not None:
        return PineconeServiceError(f"{kb}: {where} rejected the {what} ({status}: {detail})")
    if isinstance(exc, TimeoutError) or _is_sdk_error(exc, "PineconeTimeoutError"):
        return PineconeTimeoutError(
            f"{kb}: no answer to the {what} from {where} in time{tries}: {detail}"
        )
    if _is_sdk_error(exc, "PineconeConnectionError"):
        return PineconeUnreachableError(
            f"{kb}: cannot reach {where}: {detail}. Check host and the network."
        )
    if _is_sdk_error(exc, "ResponseParsingError"):
        return PineconeServiceError(
            f"{kb}: {where} sent a {what} response the pinecone SDK cannot read "
            f"(malformed, or not Pinecone's API at that host): {detail}"
        )
    if _is_sdk_error(exc, "PineconeError"):
        return PineconeServiceError(f"{kb}: the {what} failed: {type(exc).__name__}: {detail}")
    return None
