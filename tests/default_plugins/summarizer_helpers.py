"""What the summarisers' tests share: the encoding, the llm summary's headings, messages,
a summary run to its end, and a scripted model backend."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from kairox.context.summarizer import Summarizer
from kairox.support.models import ChatMessage
from kairox.testing import run

ENC = "o200k_base"
HEADINGS = [
    "## Goal",
    "## Decisions and constraints",
    "## Tool calls and outcomes",
    "## Open questions",
    "## Recent user messages",
]


def user(text: str) -> ChatMessage:
    return ChatMessage("user", text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage("assistant", text)


def summarize(summarizer: Summarizer, messages: Sequence[ChatMessage], max_tokens: int) -> str:
    return run(summarizer.summarize(messages, max_tokens=max_tokens, encoding=ENC))


class CannedBackend:
    """A ``ModelBackend`` test double: each call plays the next scripted reply.

    A reply is a string (streamed in small pieces), an exception (raised before any
    text), or a ``(text, exception)`` pair (raised part-way through the stream). The last
    reply repeats once the script runs out.
    """

    name = "canned"

    def __init__(self, *replies: object) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[list[ChatMessage], str, int | None]] = []

    async def stream(
        self, messages: Sequence[ChatMessage], *, model: str, max_tokens: int | None = None
    ) -> AsyncIterator[str]:
        self.calls.append((list(messages), model, max_tokens))
        reply = self.replies[min(len(self.calls), len(self.replies)) - 1]
        if isinstance(reply, BaseException):
            raise reply
        error = None
        if isinstance(reply, tuple):
            reply, error = reply
        for start in range(0, len(reply), 7):
            yield reply[start : start + 7]
        if error is not None:
            raise error


SUMMARY = (
    "## Goal\n- Build a billing service for Acme.\n"
    "## Decisions and constraints\n- PostgreSQL 16; worker must not exceed 512 MB.\n"
    "## Tool calls and outcomes\n- none\n"
    "## Open questions\n- CSV or Parquet exports?"
)
HISTORY = [
    user("I want to build a billing service for the Acme shop."),
    assistant("We decided to use PostgreSQL 16."),
    ChatMessage("tool", "ok", name="migrate"),
    user("Keep the worker under 512 MB."),
    assistant("Noted."),
]
