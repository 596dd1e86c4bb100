"""The errors a ``bedrock`` knowledge base raises. Every message says what to fix.

A request Bedrock rejects as invalid (``ValidationException``) and a filter that cannot be
translated are :class:`kairox.retrieval.QueryError`; everything else is a
:class:`BedrockError`.
"""

from __future__ import annotations

from kairox import BackendError, BackendTimeoutError

__all__ = [
    "BedrockAuthError",
    "BedrockConnectionError",
    "BedrockError",
    "BedrockNotFoundError",
    "BedrockResponseError",
    "BedrockTimeoutError",
    "BedrockUnavailableError",
]


class BedrockError(BackendError):
    """Retrieval from a Bedrock knowledge base failed; the message says why and what to do.

    :param code: the service's error code (``Error.Code``), when the service sent one.
    :param attempts: how many requests were made for the failing page (retries included).
    """

    def __init__(self, message: str, *, code: str | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.code = code
        self.attempts = attempts


class BedrockAuthError(BedrockError):
    """Missing, invalid or expired credentials, or no permission. Never retried."""


class BedrockNotFoundError(BedrockError):
    """The knowledge base id does not exist in the configured region and account."""


class BedrockUnavailableError(BedrockError):
    """Throttling or server errors that outlasted the retries and the time budget."""


class BedrockConnectionError(BedrockError):
    """The endpoint could not be reached (wrong region or endpoint_url, network down)."""


class BedrockTimeoutError(BedrockError, BackendTimeoutError):
    """Bedrock did not answer within the knowledge base's ``timeout_ms``."""


class BedrockResponseError(BedrockError):
    """Bedrock (or whatever answered at the endpoint) sent a response that is not a
    valid ``Retrieve`` response."""
