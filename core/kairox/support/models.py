"""Chat messages and the ``ModelBackend`` protocol every model plugin implements."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from kairox.support.errors import KairoxError

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of a prompt: ``role`` and ``content`` (plus ``name`` for tools)."""

    role: Role
    content: str
    name: str | None = None

    def to_openai(self) -> dict[str, str]:
        """This message as an OpenAI-style chat message (``{"role", "content", "name"?}``).

        A ``tool`` message becomes an ``assistant`` one that says which tool returned the
        text: chat APIs reject a ``tool`` role without the id of the call that produced it,
        and a tool's text must not gain the authority of a user or system message.
        """
        if self.role == "tool":
            label = f"[tool {self.name} returned]" if self.name else "[tool returned]"
            return {"role": "assistant", "content": f"{label}\n{self.content}"}
        message = {"role": self.role, "content": self.content}
        if self.name:
            message["name"] = self.name
        return message


def to_openai_messages(messages: Iterable[ChatMessage]) -> list[dict[str, str]]:
    """``[m.to_openai() for m in messages]``: a prompt ready for any OpenAI-style client."""
    return [message.to_openai() for message in messages]


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


async def complete(
    backend: ModelBackend,
    messages: Sequence[ChatMessage],
    *,
    model: str,
    max_tokens: int | None = None,
) -> str:
    """The whole reply of ``backend`` to ``messages``, for callers that need no streaming."""
    pieces = [piece async for piece in backend.stream(messages, model=model, max_tokens=max_tokens)]
    return "".join(pieces)


def check_backend_options(
    backend: str, options: Mapping[str, Any], accepted: Collection[str]
) -> None:
    """Raise a :class:`TypeError` naming the ``options`` a backend's factory does not take
    (``backend`` is its registered name), and the ones it does."""
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise TypeError(
            f"the {backend} backend does not take {', '.join(unknown)}; "
            f"its options are {', '.join(sorted(accepted))}"
        )
