"""The ``openai-compatible`` backend's model: one chat completion request per reply.

Talks the OpenAI Chat Completions protocol (``POST {base_url}/chat/completions`` with
``"stream": true``), which OpenAI, vLLM, Ollama (``/v1``), llama.cpp's server, LM Studio
and most gateways speak; :mod:`.reply` reads what comes back.

Failure handling follows one rule: a request is retried only while retrying cannot
duplicate text. Throttling (429) and server errors (5xx) answer before any token is
sent, so they are retried with bounded exponential backoff (honouring ``Retry-After``);
once tokens have streamed, a failure ends the reply with a :class:`~kairox.support.models.ModelError`
saying it was cut off. Every error names what to check: the URL, the API key variable,
the model name.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kairox.default_plugins.openai_compatible.errors import (
    HTTPX,
    ModelHTTPError,
    parse_retry_after,
    reason,
    server_message,
)
from kairox.default_plugins.openai_compatible.reply import ReplyReader
from kairox.support.models import ChatMessage, ModelError
from kairox.support.retry import RetryPolicy, async_call_with_retries

if TYPE_CHECKING:
    import httpx

DEFAULT_BASE_URL = "https://api.openai.com/v1"

#: Model calls are slow and throttling windows long, so the defaults wait longer than
#: a retrieval source's would; still bounded so a chat turn never hangs on retries.
DEFAULT_RETRY = RetryPolicy(attempts=4, base_delay=0.5, max_delay=10.0, budget=30.0)


def _message_json(message: ChatMessage) -> dict[str, Any]:
    data: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.name:
        data["name"] = message.name
    return data


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
        detail = server_message(raw)
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

    # -- streaming -------------------------------------------------------------------

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str,
        max_tokens: int | None = None,
    ) -> AsyncIterator[str]:
        """Stream the reply's text pieces; raise :class:`ModelError` on any failure."""
        httpx = HTTPX.load()
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
                async for piece in ReplyReader(self.base_url, self.timeout_s).read(response):
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
        httpx = HTTPX.load()
        request = client.build_request(
            method, url or self.url, json=body if method == "POST" else None, headers=headers
        )
        try:
            response = await client.send(request, stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ModelError(
                f"cannot connect to the model server at {self.base_url} ({reason(exc)}); "
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
                f"the request to the model server at {self.base_url} failed: {reason(exc)}"
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

    # -- discovery -------------------------------------------------------------------

    async def list_models(self) -> list[str]:
        """The model ids the server serves (``GET {base_url}/models``); a connection check."""
        httpx = HTTPX.load()
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
