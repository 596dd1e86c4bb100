"""Compaction of a session's history: the summary that stands in for its oldest turns.

The :class:`~kairox.runtime.session.Session` actor runs these commands from its queue, so a
compaction never overlaps a turn. The oldest tier of history (all but the last
:data:`KEEP_RECENT_TURNS` turns) and the previous summary are summarised again into one
rolling summary through the profile's summariser; if it fails, a sliding window stands
in. A :class:`~kairox.store.events.CompactionSummary` event records the summary with the range
of events it covers; nothing is deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kairox.context.assembler import CompactionSummaryItem, ContextAssembler, HistoryTurn
from kairox.context.summarizer import ReportingSummarizer, Summarizer, SummaryReport
from kairox.store.events import (
    CompactionSummary,
    ContextCompactionCompleted,
    ContextCompactionFailed,
    ContextCompactionSkipped,
    ContextCompactionStarted,
    StoredEvent,
)
from kairox.support.models import ChatMessage

if TYPE_CHECKING:
    from kairox.config.schema import ProfileConfig
    from kairox.runtime.facade import AppFacade
    from kairox.store.events import SqliteEventStore
    from kairox.support.models import ModelBackend

# The most recent turns always stay verbatim; compaction summarises what is older.
KEEP_RECENT_TURNS = 2
# Compact when history alone would take more than this share of the budget next turn,
# leaving room for the prompt, memories and retrieval hits.
COMPACT_AT_SHARE = 0.6
# A summary may use at most this share of the budget.
SUMMARY_SHARE = 0.2


@dataclass
class CompactionResult:
    """What a compaction did (or why it did nothing)."""

    status: str  # "completed", "failed", "skipped"
    reason: str = ""
    summary: str = ""
    summarizer: str | None = None
    fallback: bool = False
    events_summarised: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    kept: tuple[str, ...] = ()
    """The kept facts the summary holds (see :class:`~kairox.context.summarizer.SummaryReport`)."""
    dropped: tuple[tuple[str, str], ...] = ()
    """``(fact, why)`` for each fact the summary left out."""


@dataclass
class History:
    """What the session's events say about the conversation, read once per command."""

    summaries: list[StoredEvent]
    turns: list[HistoryTurn]


class CompactionMixin:
    """The compaction commands of :class:`~kairox.runtime.session.Session` (which provides the
    attributes declared here)."""

    facade: AppFacade
    session_id: str
    _backend: ModelBackend | None
    _compaction_queued: bool

    if TYPE_CHECKING:

        @property
        def profile(self) -> ProfileConfig: ...

        @property
        def events(self) -> SqliteEventStore: ...

        def _assembler(self) -> ContextAssembler: ...

        def _read(self) -> History: ...

    async def _compact_as_recorded(self) -> list[CompactionResult]:
        """The automatic compactions a live conversation would have run at the end of
        each turn of the history (after an append of many turns at once)."""
        if not self.profile.auto_compact:
            return []
        history = self._read()
        done: list[CompactionResult] = []
        live: list[HistoryTurn] = []
        for turn in history.turns:
            live.append(turn)
            if not self._needs_compaction(live):
                continue
            result = await self._compact("auto", History(history.summaries, list(live)))
            done.append(result)
            if result.status == "failed":
                break  # the next live turn tries again; a broken summariser fails each time
            if result.status == "completed":
                live = live[-KEEP_RECENT_TURNS:]
                history.summaries = self.events.list(
                    session_id=self.session_id, types=[CompactionSummary]
                )
        return done

    def _history_tokens(self, turns: Sequence[HistoryTurn]) -> int:
        return self._assembler().history_tokens(turns)

    def _budget(self) -> int:
        return self.profile.context_window - self.profile.headroom

    def _summary_tokens(self, summaries: Sequence[StoredEvent]) -> int:
        assembler = self._assembler()
        return sum(
            assembler.summary_tokens(
                CompactionSummaryItem(
                    e.payload["summary"], e.payload["first_event_id"], e.payload["last_event_id"]
                )
            )
            for e in summaries
        )

    def _needs_compaction(self, turns: Sequence[HistoryTurn]) -> bool:
        if len(turns) <= KEEP_RECENT_TURNS:
            return False
        return self._history_tokens(turns) > COMPACT_AT_SHARE * self._budget()

    # -- compaction -----------------------------------------------------------------

    async def _skip(self, reason: str, **details: Any) -> CompactionResult:
        self.events.append(
            self.session_id, self.facade.workspace_id, ContextCompactionSkipped(reason)
        )
        return CompactionResult("skipped", reason=reason, **details)

    async def _compact(self, trigger: str, history: History | None = None) -> CompactionResult:
        try:
            return await self._compact_now(trigger, history)
        finally:
            if trigger == "manual":
                self._compaction_queued = False

    async def _compact_now(self, trigger: str, history: History | None) -> CompactionResult:
        if trigger == "auto" and not self.profile.auto_compact:
            return await self._skip("auto_compact is off for this profile")
        history = history or self._read()
        turns = history.turns
        older = turns[:-KEEP_RECENT_TURNS] if len(turns) > KEEP_RECENT_TURNS else []
        if not older:
            return await self._skip(
                f"nothing to compact: the last {KEEP_RECENT_TURNS} turns always stay verbatim"
            )
        workspace = self.facade.workspace_id
        # What the prompt pays now for history and the summary compaction would replace:
        # the same ledger as ``after`` below, so the two compare like for like.
        before = self._history_tokens(turns) + self._summary_tokens(history.summaries[-1:])
        self.events.append(
            self.session_id,
            workspace,
            ContextCompactionStarted(trigger=trigger, tokens_before=before),
        )
        # Rolling summary: the previous summary is summarised again together with the
        # turns after it, so one summary stands for everything before the live history.
        # Separate summaries would pile up until they crowd out the history itself.
        previous = history.summaries
        carried = (
            [ChatMessage("assistant", previous[-1].payload["summary"], name="summary")]
            if previous
            else []
        )
        messages = carried + [m for turn in older for m in turn.messages]
        first = (
            previous[-1].payload["first_event_id"]
            if previous
            else min(i for turn in older for i in turn.event_ids)
        )
        last = max(i for turn in older for i in turn.event_ids)
        limit = max(64, int(SUMMARY_SHARE * self._budget()))
        name = self.profile.summarizer
        fallback = False
        try:
            summarizer = self.facade.summarizer(name, self.profile, self._backend)
            summary, report = await _summarize(
                summarizer, messages, max_tokens=limit, encoding=self.profile.encoding
            )
        except Exception as exc:
            self.events.append(
                self.session_id,
                workspace,
                ContextCompactionFailed(
                    error=f"{type(exc).__name__}: {exc}; falling back to a sliding window",
                    summarizer=name,
                ),
            )
            fallback = True
            name = "sliding-window"
            try:
                window = self.facade.summarizer(name, self.profile, None)
                summary, report = await _summarize(
                    window, messages, max_tokens=limit, encoding=self.profile.encoding
                )
            except Exception as second:  # even the fallback failed: the session goes on
                self.events.append(
                    self.session_id,
                    workspace,
                    ContextCompactionFailed(
                        error=f"{type(second).__name__}: {second}", summarizer=name
                    ),
                )
                return CompactionResult("failed", reason=str(second), summarizer=name)
        # The same ledger as the prompt's: the turns kept verbatim, plus the summary with
        # the framing it gets there.
        after = self._history_tokens(turns[-KEEP_RECENT_TURNS:]) + self._assembler().summary_tokens(
            CompactionSummaryItem(summary, first, last)
        )
        if after >= before:
            # A summary no smaller than what it replaces only loses detail: keep the history.
            return await self._skip(
                f"the summary would not shrink the history ({before:,} -> {after:,} tokens); "
                "history kept as it was",
                summarizer=name,
                fallback=fallback,
                tokens_before=before,
                tokens_after=before,
            )
        stored = self.events.append(
            self.session_id,
            workspace,
            CompactionSummary(
                summary,
                first,
                last,
                summarizer=name,
                fallback=fallback,
                kept=list(report.kept),
                dropped=[{"fact": fact, "why": why} for fact, why in report.dropped],
            ),
        )
        self.events.append(
            self.session_id,
            workspace,
            ContextCompactionCompleted(
                summary_event_id=stored.id, tokens_before=before, tokens_after=after
            ),
        )
        return CompactionResult(
            "completed",
            summary=summary,
            summarizer=name,
            fallback=fallback,
            events_summarised=sum(len(t.event_ids) for t in older),
            tokens_before=before,
            tokens_after=after,
            kept=report.kept,
            dropped=report.dropped,
        )

    # -- profiles -------------------------------------------------------------------


async def _summarize(
    summarizer: Summarizer, messages: list[ChatMessage], *, max_tokens: int, encoding: str
) -> tuple[str, SummaryReport]:
    """The summary, and what it kept and dropped when the summariser says so."""
    if isinstance(summarizer, ReportingSummarizer):
        return await summarizer.summarize_with_report(
            messages, max_tokens=max_tokens, encoding=encoding
        )
    return await summarizer.summarize(messages, max_tokens=max_tokens, encoding=encoding), (
        SummaryReport()
    )
