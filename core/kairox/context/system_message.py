"""The system message under construction: its sections, their pieces and exact token cost.

Each context source (memories, summaries, retrieval hits) fills one section of the single
system message with :class:`Piece` blocks; :class:`SystemMessage` knows what adding or
removing a piece costs, exactly (why that is exact: :mod:`kairox.context.assembler`), and
:class:`Ledger` records per source what was kept and what was dropped and why. Also here:
the source and section names, and the labels the trace uses for events and turns.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kairox.context.assembly import SourceAccount
from kairox.context.tokens import TokenCounter

if TYPE_CHECKING:
    from kairox.context.assembly import AssemblyInput, HistoryTurn

__all__ = [
    "HISTORY",
    "KB_PREFIX",
    "MEMORY_SCOPES",
    "PROMPT",
    "RECALL",
    "RECALL_HEADING",
    "SUMMARY",
    "SUMMARY_HEADING",
    "SYSTEM",
    "WORKSPACE",
    "Draft",
    "Ledger",
    "Piece",
    "SystemMessage",
    "base_text",
    "event_range",
    "turn_range",
]

# Memory sections are rendered broadest scope first, so the narrower (more specific) ones
# come later and read as refinements of the broader ones.
MEMORY_SCOPES = ("user", "workspace", "session")

# The context sources, as :attr:`~kairox.context.assembly.SourceAccount.source` names them.
SYSTEM = "system"
SUMMARY = "compaction_summary"
WORKSPACE = "workspace_retrieval"
HISTORY = "history"
RECALL = "recall"
RECALL_HEADING = "## Recalled from earlier conversation\n"
PROMPT = "prompt"
KB_PREFIX = "knowledge_base:"
SUMMARY_HEADING = "## Summary of earlier conversation\n"


@dataclass(eq=False)  # identity, not value: two equal pieces are still two pieces
class Piece:
    """One block of the system message; ends with a newline (why: :mod:`.assembler`)."""

    order: int  # position in the source's input, so sections render in input order
    text: str
    tokens: int
    label: str


@dataclass
class Ledger:
    """Per-source bookkeeping while assembling."""

    included: int = 0
    tokens: int = 0
    dropped: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    summarised: int = 0  # dropped items beyond len(dropped): a range under one label

    def drop(self, label: str, reason: str, count: int = 1) -> None:
        """Drop ``count`` items, named by one ``label``."""
        self.dropped.append(label)
        self.summarised += count - 1
        self.drop_reason(reason)

    def drop_reason(self, reason: str) -> None:
        if reason not in self.reasons:
            self.reasons.append(reason)

    def account(self, source: str) -> SourceAccount:
        """What the trace says of ``source``: these books, closed."""
        return SourceAccount(
            source=source,
            tokens=self.tokens,
            included=self.included,
            dropped=len(self.dropped) + self.summarised,
            reasons=tuple(self.reasons),
            dropped_items=tuple(self.dropped),
        )


class SystemMessage:
    """The system message under construction, with its exact token count.

    Sections are kept in render order; a section's heading is paid for with its first piece,
    and the cost of turning the bare system prompt into "system prompt + sections" (framing,
    the blank line after the prompt) with the first piece of any section.
    """

    def __init__(self, counter: TokenCounter, base: str, section_order: Sequence[str]) -> None:
        self._counter = counter
        self.encoding = counter.encoding
        self.base = base
        # The bare prompt is sent verbatim; with sections after it, it gets a blank line.
        self._base_piece = base + "\n\n" if base else ""
        self._alone = counter.count_message(SYSTEM, base) if base else 0
        self._opened = counter.count_message(SYSTEM, "") + (
            counter.count(self._base_piece) if base else 0
        )
        self.sections: dict[str, list[Piece]] = {name: [] for name in section_order}
        self.headings: dict[str, tuple[str, int]] = {}
        self.selection: list[tuple[str, Piece]] = []  # in the order pieces were accepted
        self._section_tokens = 0  # running total, so each keep-or-drop check is O(1)

    def set_heading(self, source: str, heading: str) -> None:
        self.headings[source] = (heading, self._counter.count(heading))

    def piece(self, order: int, text: str, label: str, key: Hashable | None = None) -> Piece:
        """A piece of ``text``, counted (and cached under ``key`` when one is given)."""
        return Piece(order, text, self._counter.count(text, key=key), label)

    @property
    def has_sections(self) -> bool:
        return bool(self.selection)

    @property
    def tokens(self) -> int:
        """Exact tokens of the message as it stands (0 when there is no message at all)."""
        if not self.has_sections:
            return self._alone
        return self._opened + self._section_tokens

    def source_tokens(self, source: str) -> int:
        pieces = self.sections[source]
        if not pieces:
            return 0
        return self.headings[source][1] + sum(p.tokens for p in pieces)

    def opening_cost(self) -> int:
        """What the first piece of any section costs on top of itself and its heading."""
        return 0 if self.has_sections else self._opened - self._alone

    def extra(self, source: str, piece: Piece) -> int:
        """How many tokens adding ``piece`` to ``source`` would add to the message."""
        cost = piece.tokens + self.opening_cost()
        if not self.sections[source]:
            cost += self.headings[source][1]
        return cost

    def add(self, source: str, piece: Piece) -> None:
        self._section_tokens += self.extra(source, piece) - self.opening_cost()
        self.sections[source].append(piece)
        self.selection.append((source, piece))

    def add_all(self, chosen: Sequence[tuple[str, Piece]], cost: int) -> None:
        """:meth:`add` each of ``chosen`` (in order), which together cost ``cost``."""
        self._section_tokens += cost - self.opening_cost()
        sections = self.sections
        for source, piece in chosen:
            sections[source].append(piece)
        self.selection.extend(chosen)

    def pop_last(self) -> tuple[str, Piece]:
        source, piece = self.selection.pop()
        self.sections[source].remove(piece)
        self._section_tokens -= piece.tokens
        if not self.sections[source]:
            self._section_tokens -= self.headings[source][1]
        return source, piece

    def render(self) -> str:
        if not self.has_sections:
            return self.base
        parts = [self._base_piece]
        for name, pieces in self.sections.items():
            if pieces:
                parts.append(self.headings[name][0])
                parts.extend(p.text for p in sorted(pieces, key=lambda p: p.order))
        return "".join(parts)


@dataclass(frozen=True)
class Draft:
    """One assembly in progress: what it is built from, the system message so far, each
    source's ledger, and ``limit``, what the system message and the history may use
    between them."""

    data: AssemblyInput
    system: SystemMessage
    ledgers: dict[str, Ledger]
    limit: int

    def offer(self, source: str, piece: Piece, reason: str) -> None:
        """Add ``piece`` to ``source`` if it fits within the limit; else drop it for ``reason``."""
        if self.system.tokens + self.system.extra(source, piece) <= self.limit:
            self.system.add(source, piece)
        else:
            self.ledgers[source].drop(piece.label, reason)


def base_text(system_prompt: str, instructions: str | None) -> str:
    """The bare system message: the system prompt and the instructions, if any."""
    return "\n\n".join(part for part in (system_prompt, instructions) if part)


def event_range(ids: Sequence[int]) -> str:
    """How the trace names events: ``event 7`` or ``events 1-40``."""
    return f"events {ids[0]}-{ids[-1]}" if len(ids) > 1 else f"event {ids[0]}"


def turn_range(history: Sequence[HistoryTurn], newest: int) -> str:
    """The label of turns ``0 .. newest``: their events (or indexes), and how many."""
    first, last = history[0], history[newest]
    if newest == 0:
        return event_range(first.event_ids) if first.event_ids else "turn 0"
    if first.event_ids and last.event_ids:
        where = event_range([first.event_ids[0], last.event_ids[-1]])
    else:
        where = f"turns 0-{newest}"
    return f"{where} ({newest + 1} turns)"
