"""The built-in ``openai-compatible`` model backend: streaming chat over HTTP.

Talks the OpenAI Chat Completions protocol (``POST {base_url}/chat/completions`` with
``"stream": true``), which OpenAI, vLLM, Ollama (``/v1``), llama.cpp's server, LM Studio
and most gateways speak. The reply arrives as server-sent events; :class:`SSEDecoder`
parses them incrementally from raw bytes, so events, lines and UTF-8 sequences may be
split anywhere by the network.

Failure handling follows one rule: a request is retried only while retrying cannot
duplicate text. Throttling (429) and server errors (5xx) answer before any token is
sent, so they are retried with bounded exponential backoff (honouring ``Retry-After``);
once tokens have streamed, a failure ends the reply with a :class:`~kairox.models.ModelError`
saying it was cut off. Every error names what to check: the URL, the API key variable,
the model name.

``httpx`` is imported on first use, not when the plugin loads, so ``import kairox`` and
commands that never talk to a model stay light.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import re
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import Field, StrictStr

from kairox.config import PluginSettings
from kairox.models import ChatMessage, ModelError
from kairox.registry import ModelBackendContext, ModelBackendSpec, registers
from kairox.retry import RetryPolicy, async_call_with_retries

if TYPE_CHECKING:
    import httpx

DEFAULT_BASE_URL = "https://api.openai.com/v1"

#: Model calls are slow and throttling windows long, so the defaults wait longer than
#: a retrieval source's would; still bounded so a chat turn never hangs on retries.
DEFAULT_RETRY = RetryPolicy(attempts=4, base_delay=0.5, max_delay=10.0, budget=30.0)

# 408/429/5xx: the server did not start the reply, so asking again is safe.
_RETRYABLE_STATUS = frozenset({408, 429})

_EOL = re.compile(rb"\r\n|\r|\n")


def _import_httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:  # pragma: no cover - httpx is a core dependency
        raise ModelError("the openai-compatible backend needs httpx: pip install httpx") from exc
    return httpx


# -----------------------------------------------------------------------------
# Server-sent events
# -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event: its ``data`` (``data:`` lines joined by newlines) and type."""

    data: str
    event: str = "message"


class SSEDecoder:
    """An incremental parser of a ``text/event-stream`` body, fed raw bytes.

    Follows the WHATWG rules: lines end in CRLF, LF or CR; ``:`` lines are comments
    (keep-alives); ``field: value`` with one optional space after the colon; several
    ``data:`` lines in one event are joined with ``\\n``; a blank line dispatches the
    event. Lines are decoded only once complete, so a UTF-8 sequence split between
    two network reads is reassembled first. One leniency: :meth:`close` dispatches an
    event that the stream ended without its blank line, so a final ``data: [DONE]``
    counts.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer known to hold no line end
        self._data: list[str] = []
        self._event = ""
        self._started = False

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Add bytes; return the events they complete."""
        self._buffer += chunk
        return self._drain(final=False)

    def close(self) -> list[ServerSentEvent]:
        """The stream ended: flush the last line and any event left undispatched."""
        events = self._drain(final=True)
        if self._buffer:
            self._line(bytes(self._buffer), events)
            self._buffer.clear()
        self._dispatch(events)
        return events

    def _drain(self, *, final: bool) -> list[ServerSentEvent]:
        events: list[ServerSentEvent] = []
        start = 0
        while True:
            match = _EOL.search(self._buffer, max(start, self._scanned))
            if match is None:
                self._scanned = len(self._buffer)
                break
            if match.group() == b"\r" and match.end() == len(self._buffer) and not final:
                # A CR at the very end may be the first half of a CRLF: wait for more.
                self._scanned = match.start()
                break
            self._line(bytes(self._buffer[start : match.start()]), events)
            start = match.end()
            self._scanned = start
        if start:
            del self._buffer[:start]
            self._scanned -= start
        return events

    def _line(self, raw: bytes, events: list[ServerSentEvent]) -> None:
        line = raw.decode("utf-8", errors="replace")
        if not self._started:
            self._started = True
            line = line.removeprefix("\ufeff")  # the spec allows one leading BOM
        if not line:
            self._dispatch(events)
            return
        if line.startswith(":"):
            return  # a comment: keep-alive, "OPENROUTER PROCESSING", ...
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        # "id" and "retry" matter for reconnecting EventSource clients, not for us.

    def _dispatch(self, events: list[ServerSentEvent]) -> None:
        if self._data:
            events.append(ServerSentEvent("\n".join(self._data), self._event or "message"))
        self._data = []
        self._event = ""


# -----------------------------------------------------------------------------
# Errors
# -----------------------------------------------------------------------------


class ModelHTTPError(ModelError):
    """The server answered with an HTTP error status instead of a reply.

    :param status: the HTTP status code.
    :param retry_after: seconds the server asked to wait (``Retry-After``), if any.
    """

    def __init__(self, message: str, status: int, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        """Whether asking again may work: throttling, timeouts and server errors."""
        return self.status in _RETRYABLE_STATUS or self.status >= 500


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait according to ``retry-after-ms`` or ``Retry-After`` (seconds or date)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _error_text(error: Any) -> str:
    """The human message of an error object, whatever shape the server gave it."""
    if isinstance(error, str):
        return error
    if isinstance(error, Mapping):
        for key in ("message", "error", "detail", "msg"):
            if error.get(key):
                return _error_text(error[key])
        return json.dumps(error, ensure_ascii=False)[:300]
    if isinstance(error, list) and error:
        return _error_text(error[0])
    return str(error)


def _server_message(raw: bytes) -> str:
    """The message in an error body: OpenAI's ``{"error": {"message"}}``, Ollama's
    ``{"error": "..."}``, FastAPI's ``{"detail": ...}``, or the text itself."""
    text = raw.decode("utf-8", errors="replace").strip()
    if not text:
        return ""
    try:
        payload = json.loads(text)
    except ValueError:
        return text[:300]
    return _error_text(payload)[:500]


# -----------------------------------------------------------------------------
# The backend
# -----------------------------------------------------------------------------


@dataclass
class _StreamState:
    received: int = 0  # characters of text yielded so far
    finish_reason: str | None = None
    done: bool = False


def _message_json(message: ChatMessage) -> dict[str, Any]:
    data: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.name:
        data["name"] = message.name
    return data


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


class OpenAICompatibleModel:
    """A chat model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    :param base_url: the API root, ending in ``/v1`` (``https://api.openai.com/v1``,
        ``http://localhost:11434/v1`` for Ollama, ``http://localhost:8000/v1`` for vLLM).
    :param api_key_env: the environment variable holding the API key, read at each
        request. When it is unset (or ``None``) no ``Authorization`` header is sent, which
        is what local servers expect.
    :param timeout_s: seconds to wait to connect, for the first byte, and between two
        reads of the stream.
    :param retry: the backoff for 429/5xx answers; :data:`DEFAULT_RETRY` by default.
    :param extra_headers: sent with every request (gateway keys, ``OpenAI-Organization``);
        they override the defaults, ``Authorization`` included.
    """

    name = "openai-compatible"

    def __init__(
        self,
        base_url: str,
        *,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout_s: float = 60,
        retry: RetryPolicy | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ModelError(
                f"base_url must be an http:// or https:// URL such as "
                f"{DEFAULT_BASE_URL} or http://localhost:11434/v1, got {base_url!r}"
            )
        if not timeout_s > 0:
            raise ModelError(f"timeout_s must be > 0, got {timeout_s!r}")
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env or None
        self.timeout_s = float(timeout_s)
        self.retry = retry if retry is not None else DEFAULT_RETRY
        self.extra_headers = dict(extra_headers or {})
        # The pause between retries; tests swap in a recorder to see the delays chosen.
        self._sleep = asyncio.sleep
        self._ssl_context: Any = None

    def __repr__(self) -> str:
        return f"OpenAICompatibleModel({self.base_url!r}, api_key_env={self.api_key_env!r})"

    @property
    def url(self) -> str:
        """The chat completions endpoint."""
        return f"{self.base_url}/chat/completions"

    # -- request ---------------------------------------------------------------------

    def request_body(
        self, messages: Sequence[ChatMessage], *, model: str, max_tokens: int | None = None
    ) -> dict[str, Any]:
        """The JSON body ``stream`` sends."""
        body: dict[str, Any] = {
            "model": model,
            "messages": [_message_json(message) for message in messages],
            "stream": True,
        }
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        return body

    def _api_key(self) -> str | None:
        if self.api_key_env is None:
            return None
        return os.environ.get(self.api_key_env, "").strip() or None

    def _client(self, httpx: Any) -> httpx.AsyncClient:
        # Building the TLS context (loading the CA bundle) costs tens of milliseconds, so
        # it is made once per backend and shared by the per-reply clients.
        if self._ssl_context is None:
            self._ssl_context = httpx.create_ssl_context()
        return httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s), verify=self._ssl_context)

    def _headers(self) -> dict[str, str]:
        from kairox import __version__

        headers = {"Accept": "text/event-stream", "User-Agent": f"kairox/{__version__}"}
        key = self._api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        headers.update(self.extra_headers)
        return headers

    # -- errors ----------------------------------------------------------------------

    def _status_error(
        self, status: int, headers: Mapping[str, str], raw: bytes, model: str | None
    ) -> ModelHTTPError:
        detail = _server_message(raw)
        said = f"HTTP {status}: {detail}" if detail else f"HTTP {status}"
        where = f"the model server at {self.base_url}"
        if status in (401, 403):
            if self.api_key_env is None:
                hint = (
                    "this profile sends no API key; set api_key_env to the environment "
                    "variable that holds one"
                )
            elif self._api_key() is None:
                hint = f"set the environment variable {self.api_key_env} to your API key"
            elif status == 401:
                hint = f"the key in the environment variable {self.api_key_env} was rejected"
            else:
                hint = (
                    f"the key in the environment variable {self.api_key_env} has no access "
                    f"to this model or endpoint"
                )
            message = f"{where} refused the request ({said}); {hint}"
        elif status == 404:
            what = f"model {model!r}" if model else "this endpoint"
            message = (
                f"{where} found no {what} at {self.url} ({said}); check base_url ends with "
                f"/v1 (e.g. http://localhost:11434/v1) and the model name is one the server "
                f"serves"
            )
        elif status == 429:
            message = f"{where} is rate-limiting requests ({said})"
        elif status >= 500:
            message = f"{where} failed with a server error ({said})"
        elif 300 <= status < 400:
            target = headers.get("location", "another address")
            message = f"{where} redirected the request to {target}; set base_url to that address"
        else:
            message = f"{where} rejected the request ({said})"
        return ModelHTTPError(message, status, parse_retry_after(headers))

    def _cut_off(self, state: _StreamState, reason: str) -> ModelError:
        if state.received:
            return ModelError(
                f"the reply was cut off after {state.received} characters: {reason}. It was "
                f"not retried, since the text already shown would be repeated"
            )
        return ModelError(f"the reply was cut off before any text arrived: {reason}")

    # -- streaming -------------------------------------------------------------------

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str,
        max_tokens: int | None = None,
    ) -> AsyncIterator[str]:
        """Stream the reply's text pieces; raise :class:`ModelError` on any failure."""
        httpx = _import_httpx()
        body = self.request_body(messages, model=model, max_tokens=max_tokens)
        headers = self._headers()
        attempts = 0
        # One client per reply: no connection pool outlives the event loop that made it
        # (tests and the CLI run a fresh loop per call), and a reply dwarfs a handshake.
        async with self._client(httpx) as client:

            async def attempt() -> httpx.Response:
                nonlocal attempts
                attempts += 1
                return await self._open(client, body, headers, model)

            try:
                response = await async_call_with_retries(
                    attempt,
                    retryable=lambda exc: isinstance(exc, ModelHTTPError) and exc.retryable,
                    policy=self.retry,
                    retry_after=lambda exc: getattr(exc, "retry_after", None),
                    sleep=self._sleep,
                )
            except ModelHTTPError as exc:
                if not exc.retryable:
                    raise
                plural = "" if attempts == 1 else "s"
                raise ModelHTTPError(
                    f"{exc}; gave up after {attempts} attempt{plural}", exc.status, exc.retry_after
                ) from exc
            try:
                async for piece in self._read(response):
                    yield piece
            finally:
                await response.aclose()

    async def _open(
        self,
        client: httpx.AsyncClient,
        body: dict[str, Any],
        headers: dict[str, str],
        model: str | None,
        *,
        method: str = "POST",
        url: str | None = None,
    ) -> httpx.Response:
        """Send the request and return the streaming response once its status is 2xx."""
        httpx = _import_httpx()
        request = client.build_request(
            method, url or self.url, json=body if method == "POST" else None, headers=headers
        )
        try:
            response = await client.send(request, stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ModelError(
                f"cannot connect to the model server at {self.base_url} ({_reason(exc)}); "
                f"is the server running?"
            ) from exc
        except httpx.TimeoutException as exc:
            raise ModelError(
                f"the model server at {self.base_url} did not answer within "
                f"{self.timeout_s:g} s; is it overloaded or still loading the model? "
                f"(raise timeout_s for slow local models)"
            ) from exc
        except httpx.HTTPError as exc:
            raise ModelError(
                f"the request to the model server at {self.base_url} failed: {_reason(exc)}"
            ) from exc
        if 200 <= response.status_code < 300:
            return response
        try:
            raw = await response.aread()
        except httpx.HTTPError:
            raw = b""  # the status says enough
        finally:
            await response.aclose()
        raise self._status_error(response.status_code, response.headers, raw, model)

    async def _read(self, response: httpx.Response) -> AsyncIterator[str]:
        httpx = _import_httpx()
        state = _StreamState()
        content_type = response.headers.get("content-type", "")
        if "application/json" in content_type:
            # The server ignored "stream": true and sent one whole completion.
            async for piece in self._read_whole(response, state):
                yield piece
            return
        decoder = SSEDecoder()
        try:
            async for chunk in response.aiter_bytes():
                for event in decoder.feed(chunk):
                    piece = self._handle(event, state)
                    if state.done:
                        return
                    if piece:
                        state.received += len(piece)
                        yield piece
            for event in decoder.close():
                piece = self._handle(event, state)
                if state.done:
                    return
                if piece:
                    state.received += len(piece)
                    yield piece
        except httpx.TimeoutException as exc:
            if state.finish_reason is not None:
                return  # the reply was complete; only the [DONE] went missing
            raise self._cut_off(
                state, f"{self.base_url} sent nothing for {self.timeout_s:g} s (timeout_s)"
            ) from exc
        except httpx.HTTPError as exc:
            if state.finish_reason is not None:
                return
            raise self._cut_off(
                state, f"the connection to {self.base_url} failed ({_reason(exc)})"
            ) from exc
        if state.finish_reason is None:
            raise self._cut_off(state, f"the stream from {self.base_url} ended without [DONE]")

    async def _read_whole(
        self, response: httpx.Response, state: _StreamState
    ) -> AsyncIterator[str]:
        httpx = _import_httpx()
        try:
            raw = await response.aread()
        except httpx.HTTPError as exc:
            raise self._cut_off(
                state, f"the connection to {self.base_url} failed ({_reason(exc)})"
            ) from exc
        try:
            payload = json.loads(raw)
        except ValueError:
            raise ModelError(
                f"the model server at {self.base_url} sent a body that is not JSON: {raw[:200]!r}"
            ) from None
        self._raise_for_error_payload(payload, state)
        try:
            content = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise ModelError(
                f"the model server at {self.base_url} sent JSON without "
                f"choices[0].message.content: {json.dumps(payload)[:200]}"
            ) from None
        if isinstance(content, str) and content:
            yield content

    def _raise_for_error_payload(self, payload: Any, state: _StreamState) -> None:
        if not isinstance(payload, Mapping):
            return
        if payload.get("error"):
            message = _error_text(payload["error"])
        elif payload.get("object") == "error":  # older vLLM: the error is the payload
            message = _error_text(payload)
        else:
            return
        if state.received:
            raise ModelError(
                f"the model server at {self.base_url} reported an error after "
                f"{state.received} characters, so the reply was cut off: {message}"
            )
        raise ModelError(f"the model server at {self.base_url} reported an error: {message}")

    def _handle(self, event: ServerSentEvent, state: _StreamState) -> str | None:
        """Apply one event to ``state``; return its text, if any."""
        data = event.data.strip()
        if data == "[DONE]":
            state.done = True
            return None
        if not data:
            return None
        try:
            payload = json.loads(data)
        except ValueError:
            if event.event == "error":
                self._raise_for_error_payload({"error": data}, state)
            raise ModelError(
                f"the model server at {self.base_url} sent a stream event that is not JSON: "
                f"{data[:200]!r}"
            ) from None
        if event.event == "error" and isinstance(payload, Mapping) and "error" not in payload:
            payload = {"error": payload}
        self._raise_for_error_payload(payload, state)
        choices = payload.get("choices") if isinstance(payload, Mapping) else None
        if not isinstance(choices, list):
            return None  # e.g. a usage-only chunk
        for choice in choices:
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue  # we ask for one choice; ignore others should a server send them
            if choice.get("finish_reason"):
                state.finish_reason = str(choice["finish_reason"])
            delta = choice.get("delta")
            content = delta.get("content") if isinstance(delta, Mapping) else None
            # Role-only and empty deltas carry no text; reasoning_content is not the reply.
            if isinstance(content, str) and content:
                return content
        return None

    # -- discovery -------------------------------------------------------------------

    async def list_models(self) -> list[str]:
        """The model ids the server serves (``GET {base_url}/models``); a connection check."""
        httpx = _import_httpx()
        async with self._client(httpx) as client:
            headers = {**self._headers(), "Accept": "application/json"}
            response = await self._open(
                client, {}, headers, None, method="GET", url=f"{self.base_url}/models"
            )
            try:
                raw = await response.aread()
            finally:
                await response.aclose()
        try:
            data = json.loads(raw)["data"]
            return [str(entry["id"]) for entry in data]
        except (ValueError, KeyError, TypeError):
            raise ModelError(
                f"the model server at {self.base_url} sent an unexpected model list: {raw[:200]!r}"
            ) from None


def build_openai_compatible_model(**options: Any) -> OpenAICompatibleModel:
    """The registry factory: ``base_url`` (default OpenAI's), ``api_key_env``,
    ``timeout_s``, ``retry`` (a :class:`RetryPolicy` or a mapping of its fields),
    ``extra_headers``."""
    accepted = {"base_url", "api_key_env", "timeout_s", "retry", "extra_headers"}
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise TypeError(
            f"the openai-compatible backend does not take {', '.join(unknown)}; "
            f"its options are {', '.join(sorted(accepted))}"
        )
    retry = options.get("retry")
    if isinstance(retry, Mapping):
        options["retry"] = RetryPolicy(**retry)
    base_url = options.pop("base_url", None) or DEFAULT_BASE_URL
    return OpenAICompatibleModel(base_url, **options)


class OpenAICompatibleSettings(PluginSettings):
    """The keys of ``[profiles.<name>]`` this backend owns."""

    base_url: StrictStr = DEFAULT_BASE_URL
    api_key_env: StrictStr | None = "OPENAI_API_KEY"
    timeout_s: float = Field(default=60.0, gt=0, allow_inf_nan=False)


def _from_profile(ctx: ModelBackendContext) -> OpenAICompatibleModel:
    settings = ctx.settings if ctx.settings is not None else OpenAICompatibleSettings()
    return build_openai_compatible_model(**{**settings.model_dump(), **ctx.options})


kairox_register_model_backends = registers(
    ModelBackendSpec(
        name="openai-compatible",
        factory=_from_profile,
        description=(
            "Streaming chat over the OpenAI Chat Completions API "
            "(OpenAI, vLLM, Ollama, llama.cpp, LM Studio)."
        ),
        config_model=OpenAICompatibleSettings,
    )
)
