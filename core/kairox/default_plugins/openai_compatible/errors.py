"""What a model server says when it fails: the HTTP error, ``Retry-After``, and the
message inside an error body, whatever shape the server gave it; and the lazy httpx
whose exceptions the backend translates."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping
from typing import Any

from kairox.support.lazy_imports import LazyImport
from kairox.support.models import ModelError

#: httpx, imported on first use: its exceptions are what the backend turns into errors.
HTTPX = LazyImport("httpx", needed_by="the openai-compatible backend", install="pip install httpx")

# 408/429/5xx: the server did not start the reply, so asking again is safe.
_RETRYABLE_STATUS = frozenset({408, 429})


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


def error_text(error: Any) -> str:
    """The human message of an error object, whatever shape the server gave it."""
    if isinstance(error, str):
        return error
    if isinstance(error, Mapping):
        for key in ("message", "error", "detail", "msg"):
            if error.get(key):
                return error_text(error[key])
        return json.dumps(error, ensure_ascii=False)[:300]
    if isinstance(error, list) and error:
        return error_text(error[0])
    return str(error)


def server_message(raw: bytes) -> str:
    """The message in an error body: OpenAI's ``{"error": {"message"}}``, Ollama's
    ``{"error": "..."}``, FastAPI's ``{"detail": ...}``, or the text itself."""
    text = raw.decode("utf-8", errors="replace").strip()
    if not text:
        return ""
    try:
        payload = json.loads(text)
    except ValueError:
        return text[:300]
    return error_text(payload)[:500]


def reason(exc: BaseException) -> str:
    """An exception's message, or its type's name when it has none."""
    return str(exc) or type(exc).__name__
