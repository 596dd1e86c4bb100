"""The ``Summarizer`` protocol compaction uses to shrink the oldest history."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from kairox.support.models import ChatMessage


@runtime_checkable
class Summarizer(Protocol):
    """Turns the oldest tier of a conversation into a shorter summary.

    ``summarize`` returns text of at most ``max_tokens`` tokens (counted in
    ``encoding``) that keeps the thread: the user's goal, decisions and constraints,
    tool calls and their outcomes, open questions, names and numbers. It raises on
    failure; compaction then falls back to a sliding window and says so.

    Summaries roll: the first message may carry the previous summary, as an assistant
    message named ``"summary"``; its content should survive in preference to new detail.
    """

    name: str

    async def summarize(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, encoding: str
    ) -> str: ...


@dataclass(frozen=True)
class SummaryReport:
    """What a summary kept and what it dropped, and why (recorded with the summary)."""

    kept: tuple[str, ...] = ()
    """The kept-facts lines, as the summary shows them."""
    dropped: tuple[tuple[str, str], ...] = ()
    """``(fact, why)``: superseded by a correction, over the budget share, or left out by
    a model's summary (the ledger then restored it)."""


@runtime_checkable
class ReportingSummarizer(Summarizer, Protocol):
    """A summariser that also says what it kept and dropped; compaction records it."""

    async def summarize_with_report(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, encoding: str
    ) -> tuple[str, SummaryReport]: ...


class SummaryFromReport:
    """``summarize`` for a :class:`ReportingSummarizer`: the text its report goes with."""

    async def summarize_with_report(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, encoding: str
    ) -> tuple[str, SummaryReport]:
        raise NotImplementedError

    async def summarize(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, encoding: str
    ) -> str:
        text, _ = await self.summarize_with_report(
            messages, max_tokens=max_tokens, encoding=encoding
        )
        return text
