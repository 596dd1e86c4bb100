"""Chat messages and the ``ModelBackend`` protocol every model plugin implements."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from kairox.errors import KairoxError

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of a prompt: ``role`` and ``content`` (plus ``name`` for tools)."""

    role: Role
    content: str
    name: str | None = None


class ModelError(KairoxError, RuntimeError):
    """The model backend failed; the message says what to check (URL, key, model name)."""


@runtime_checkable
class ModelBackend(Protocol):
    """A chat model that streams its reply.

    ``stream`` yields text pieces as they arrive (markers included: the session runs them
    through the marker extractor). It raises :class:`ModelError` on failure, also
    part-way through a reply.
    """

    name: str

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str,
        max_tokens: int | None = None,
    ) -> AsyncIterator[str]: ...
