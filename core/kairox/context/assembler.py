"""The context assembler: what goes into the prompt of each turn, within the token budget.

Every turn the prompt is rebuilt from scratch. :class:`ContextAssembler` takes the profile's
token budget (``context_window - headroom``) and fills it in priority order:

1. the system prompt plus the active instructions (always; see the budget guard below);
2. memories (user, this workspace's, this session's), filtered by relevance when tight;
3. compaction summaries, newest first when tight;
4. workspace retrieval hits, best first;
5. knowledge-base hits, one knowledge base after the other, best first;
6. history, newest turn first and in whole turns only;
7. the new user prompt, always verbatim and always the last message.

If the system prompt and the new prompt alone do not fit, :class:`BudgetExceeded` is raised
(the budget guard): nothing else can be dropped to make room for them.

Message layout
--------------
One system message, then the history turns in chronological order, then the user prompt.
The system message holds the system prompt and instructions followed by one Markdown section
per context source (``## Memory (user)``, ``## Summary of earlier conversation``,
``## Context from the workspace``, ``## Context from <kb>``). Retrieval context goes into
that single system message rather than a second system message before the prompt because
many OpenAI-compatible servers (llama.cpp and Ollama chat templates among them) reject or
silently mangle a system message that is not the first one; one leading system message
works everywhere.

Exact token accounting
----------------------
Everything is counted with tiktoken in the profile's encoding, with the per-message framing
(:func:`~kairox.context.tokens.count_message_tokens`) and :data:`REPLY_PRIMING_TOKENS` once.
Messages are counted independently, so their counts add up exactly. Inside the system
message the sections are built from *pieces* that each end with ``"\\n"`` and (after the
first) start with a fixed marker (``#``, ``-`` or ``[``). tiktoken's pre-tokeniser never
lets a chunk run from a newline into such a character (the ``o200k_base`` and
``cl100k_base`` split patterns only continue a chunk that ends in a newline with more
whitespace, newlines or ``/``), and BPE never merges across chunks, so the system message
costs exactly the sum of its pieces. That makes every keep-or-drop decision exact while each
piece is counted once (and cached); the finished system message is still recounted as a
safety net, and anything over budget is dropped in reverse priority order.

Caching
-------
Counts go through a :class:`~kairox.context.tokens.TokenCounter`. History messages of a turn
with ``event_ids`` are cached under those ids, so re-assembling a growing conversation
counts only the text of the new turn, not the whole history again.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kairox.context.memory_ranking import PreparedMemories, words
from kairox.context.tokens import REPLY_PRIMING_TOKENS, TokenCounter
from kairox.errors import KairoxError
from kairox.models import ChatMessage

if TYPE_CHECKING:
    # Types only: the assembler must not pull in pydantic or the SQLite stores on import.
    from kairox.config import ProfileConfig
    from kairox.memory.store import MemoryRecord
    from kairox.retrieval.model import FusedHit

__all__ = [
    "DROP_BUDGET",
    "DROP_HITS_CAP",
    "DROP_LESS_RELEVANT_MEMORY",
    "DROP_MEMORY_BEATS_HISTORY",
    "DROP_NOT_APPROVED",
    "DROP_OLDER_HISTORY",
    "Assembly",
    "AssemblyInput",
    "BudgetExceeded",
    "CompactionSummaryItem",
    "ContextAssembler",
    "HistoryTurn",
    "SourceAccount",
]

#: Drop reasons, as they appear in :attr:`SourceAccount.reasons` and the trace.
DROP_BUDGET = "budget"
DROP_LESS_RELEVANT_MEMORY = "budget: less relevant memory dropped (key match, recency, scope)"
DROP_HITS_CAP = "budget: retrieval hits capped so history keeps its share"
DROP_OLDER_HISTORY = "budget: older history dropped"
DROP_MEMORY_BEATS_HISTORY = "budget: memory beats old history"
DROP_NOT_APPROVED = "not approved"

# Memory sections are rendered broadest scope first, so the narrower (more specific) ones
# come later and read as refinements of the broader ones.
_MEMORY_SCOPES = ("user", "workspace", "session")

_SYSTEM = "system"
_SUMMARY = "compaction_summary"
_WORKSPACE = "workspace_retrieval"
_HISTORY = "history"
_PROMPT = "prompt"
_KB_PREFIX = "knowledge_base:"
_SUMMARY_HEADING = "## Summary of earlier conversation\n"
# The key of the per-turn table in TokenCounter.derived (see ContextAssembler._turn_entry).
_TURNS = "assembler.turns"


@dataclass(frozen=True)
class HistoryTurn:
    """One whole turn of past conversation: the user message, the reply, tool messages.

    ``event_ids`` are the events the turn was built from; when given they key the token
    counts in the cache (the caller promises the same ids always mean the same messages).
    ``had_tool_output`` says the turn carried tool output, i.e. text nobody vetted.
    """

    messages: tuple[ChatMessage, ...]
    event_ids: tuple[int, ...] = ()
    had_tool_output: bool = False


@dataclass(frozen=True)
class CompactionSummaryItem:
    """A compaction summary and the range of events it stands for."""

    text: str
    first_event_id: int
    last_event_id: int


@dataclass(frozen=True)
class AssemblyInput:
    """Everything one turn's prompt may be built from; sequences are in the documented order.

    ``memories`` are the approved user, this-workspace and this-session memories (anything
    not approved is dropped); ``summaries`` and ``history`` are oldest first;
    ``workspace_hits`` and each list in ``knowledge_base_hits`` (kb id -> hits, only the
    knowledge bases visible to the active profile) are best first.

    ``hits`` is the other way to give retrieval hits: the fused ranking as it came from
    the search, best first across every source, with ``groups`` naming each source's
    group (``workspace`` or ``knowledge_base``, see
    :attr:`kairox.retrieval.RetrievalResult.groups`). Hits are then taken in exactly that
    order while the budget lasts, each into its group's section (a knowledge base's hits
    under its own heading), and the sections appear in the order of their best hit.
    ``hits`` and the two per-group fields are not meant to be mixed.
    """

    system_prompt: str
    prompt: str
    memories: Sequence[MemoryRecord] = ()
    summaries: Sequence[CompactionSummaryItem] = ()
    workspace_hits: Sequence[FusedHit] = ()
    knowledge_base_hits: Mapping[str, Sequence[FusedHit]] = field(default_factory=dict)
    history: Sequence[HistoryTurn] = ()
    instructions: str | None = None
    hits: Sequence[FusedHit] = ()
    groups: Mapping[str, str] = field(default_factory=dict)
    #: The search stages that produced ``hits`` (``{"stage", "status", "latency_ms",
    #: "error"}`` each: a query transform, a reranker), for the trace.
    stages: Sequence[Mapping[str, Any]] = ()


@dataclass(frozen=True)
class SourceAccount:
    """What one context source contributed to the prompt, and what it lost and why.

    ``source`` is ``system``, ``memory:user``, ``memory:workspace``, ``memory:session``,
    ``compaction_summary``, ``workspace_retrieval``, ``knowledge_base:<id>``, ``history`` or
    ``prompt``. ``tokens`` is exact, and the accounts add up to :attr:`Assembly.used_tokens`:
    ``system`` carries the system message's framing and :data:`REPLY_PRIMING_TOKENS`, each
    section carries its own heading. ``dropped_items`` names what was dropped (a memory id
    and key, an event range, a hit's uri or id).
    """

    source: str
    tokens: int
    included: int
    dropped: int
    reasons: tuple[str, ...]
    dropped_items: tuple[str, ...] = ()


@dataclass(frozen=True)
class Assembly:
    """The assembled prompt plus its accounting.

    ``used_tokens`` is the exact cost of ``messages``: every message with its framing, plus
    :data:`REPLY_PRIMING_TOKENS` once; it never exceeds ``budget``.
    ``had_tool_output`` says the prompt holds tool output from the history, so memory the
    model proposes in this turn may be prompt injection.
    """

    messages: list[ChatMessage]
    budget: int
    used_tokens: int
    sources: list[SourceAccount]
    had_tool_output: bool = False
    hits: list[dict[str, Any]] = field(default_factory=list)
    """One entry per retrieval hit offered, in fusion's order: ``rank``, ``label``, ``id``,
    ``document`` (the document a chunk came from), ``tokens`` (what its block costs),
    ``source``, ``group``, ``section``, ``included`` and every source's rank (``found_by``);
    after search stages, ``fused_rank`` and ``reranked_rank``."""
    stages: list[dict[str, Any]] = field(default_factory=list)
    """The search stages that ran for the hits (``stage``, ``status``, ``latency_ms``, ``error``)."""

    @property
    def tainted_by(self) -> list[str]:
        """What in the prompt nobody vetted: ``tool output`` from the history, and each
        source whose retrieved text made it in (``workspace:<name>``,
        ``knowledge_base:<name>``). A memory proposed in this turn may be prompt injection."""
        found = ["tool output"] if self.had_tool_output else []
        found += [f"{hit['group']}:{hit['source']}" for hit in self.hits if hit["included"]]
        return list(dict.fromkeys(found))

    def openai_messages(self) -> list[dict[str, str]]:
        """The messages as OpenAI-style chat dicts (see :meth:`ChatMessage.to_openai`)."""
        return [message.to_openai() for message in self.messages]

    def trace(self) -> dict[str, Any]:
        """JSON-ready summary: what the ``ContextAssembled`` event stores."""
        return {
            "budget": self.budget,
            "used_tokens": self.used_tokens,
            "had_tool_output": self.had_tool_output,
            "tainted_by": self.tainted_by,
            "hits": self.hits,
            "stages": self.stages,
            "sources": [
                {
                    "source": account.source,
                    "tokens": account.tokens,
                    "included": account.included,
                    "dropped": account.dropped,
                    "reasons": list(account.reasons),
                    "dropped_items": list(account.dropped_items),
                }
                for account in self.sources
            ],
        }


class BudgetExceeded(KairoxError, ValueError):
    """The system prompt and the new prompt alone do not fit the profile's token budget."""

    def __init__(self, *, needed: int, budget: int, context_window: int, headroom: int) -> None:
        self.needed = needed
        self.budget = budget
        self.context_window = context_window
        self.headroom = headroom
        super().__init__(
            f"the system prompt and the new prompt need {needed} tokens, but the budget is "
            f"{budget} (context_window {context_window} - headroom {headroom}); shorten the "
            "prompt or pick a profile with a larger context window"
        )


@dataclass(eq=False)  # identity, not value: two equal pieces are still two pieces
class _Piece:
    """One block of the system message; ends with a newline (see the module docstring)."""

    order: int  # position in the source's input, so sections render in input order
    text: str
    tokens: int
    label: str


@dataclass
class _Ledger:
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


class _SystemMessage:
    """The system message under construction, with its exact token count.

    Sections are kept in render order; a section's heading is paid for with its first piece,
    and the cost of turning the bare system prompt into "system prompt + sections" (framing,
    the blank line after the prompt) with the first piece of any section.
    """

    def __init__(self, counter: TokenCounter, base: str, section_order: Sequence[str]) -> None:
        self._counter = counter
        self.base = base
        # The bare prompt is sent verbatim; with sections after it, it gets a blank line.
        self._base_piece = base + "\n\n" if base else ""
        self._alone = counter.count_message(_SYSTEM, base) if base else 0
        self._opened = counter.count_message(_SYSTEM, "") + (
            counter.count(self._base_piece) if base else 0
        )
        self.sections: dict[str, list[_Piece]] = {name: [] for name in section_order}
        self.headings: dict[str, tuple[str, int]] = {}
        self.selection: list[tuple[str, _Piece]] = []  # in the order pieces were accepted
        self._section_tokens = 0  # running total, so each keep-or-drop check is O(1)

    def set_heading(self, source: str, heading: str) -> None:
        self.headings[source] = (heading, self._counter.count(heading))

    def piece(self, order: int, text: str, label: str) -> _Piece:
        return _Piece(order, text, self._counter.count(text), label)

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

    def extra(self, source: str, piece: _Piece) -> int:
        """How many tokens adding ``piece`` to ``source`` would add to the message."""
        cost = piece.tokens + self.opening_cost()
        if not self.sections[source]:
            cost += self.headings[source][1]
        return cost

    def add(self, source: str, piece: _Piece) -> None:
        self._section_tokens += self.extra(source, piece) - self.opening_cost()
        self.sections[source].append(piece)
        self.selection.append((source, piece))

    def add_all(self, chosen: Sequence[tuple[str, _Piece]], cost: int) -> None:
        """:meth:`add` each of ``chosen`` (in order), which together cost ``cost``."""
        self._section_tokens += cost - self.opening_cost()
        sections = self.sections
        for source, piece in chosen:
            sections[source].append(piece)
        self.selection.extend(chosen)

    def pop_last(self) -> tuple[str, _Piece]:
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
class _Retrieved:
    """One hit offered to the prompt: which section it goes to, and why."""

    hit: FusedHit
    group: str
    section: str
    label: str


def _retrieved(data: AssemblyInput) -> list[_Retrieved]:
    """The hits to offer, best first: the fused ranking as given, or the per-group lists."""
    if data.hits:
        out = []
        for hit in data.hits:
            group = data.groups.get(hit.source, "knowledge_base")
            section = _WORKSPACE if group == "workspace" else f"{_KB_PREFIX}{hit.source}"
            out.append(_Retrieved(hit, group, section, hit.uri or hit.id))
        return out
    out = [_Retrieved(h, "workspace", _WORKSPACE, h.uri or h.id) for h in data.workspace_hits]
    for kb_id, hits in data.knowledge_base_hits.items():
        section = f"{_KB_PREFIX}{kb_id}"
        out += [_Retrieved(h, "knowledge_base", section, h.uri or h.id) for h in hits]
    return out


def _base_text(system_prompt: str, instructions: str | None) -> str:
    return "\n\n".join(part for part in (system_prompt, instructions) if part)


def _event_range(ids: Sequence[int]) -> str:
    return f"events {ids[0]}-{ids[-1]}" if len(ids) > 1 else f"event {ids[0]}"


def _turn_range(history: Sequence[HistoryTurn], newest: int) -> str:
    """The label of turns ``0 .. newest``: their events (or indexes), and how many."""
    first, last = history[0], history[newest]
    if newest == 0:
        return _event_range(first.event_ids) if first.event_ids else "turn 0"
    if first.event_ids and last.event_ids:
        where = _event_range([first.event_ids[0], last.event_ids[-1]])
    else:
        where = f"turns 0-{newest}"
    return f"{where} ({newest + 1} turns)"


def _remember(counter: TokenCounter, key: Hashable, value: Any) -> None:
    derived = counter.derived
    if len(derived) >= counter.maxsize:
        derived.clear()  # rare and cheap to rebuild: the counts themselves stay cached
    derived[key] = value


class ContextAssembler:
    """Builds each turn's prompt within ``context_window - headroom`` tokens.

    See the module docstring for the priority order, the message layout and the exact
    accounting. ``max_hits_tokens_share`` bounds retrieval hits (workspace and knowledge
    bases together) when history wants the room: hits take what history leaves them, but
    never less than that share of the budget when there are hits to fill it. Without
    history pressure hits may use everything that is left. The assembler keeps no state
    between turns except the counter's cache, and is safe to share between threads.
    """

    def __init__(
        self,
        *,
        encoding: str,
        context_window: int,
        headroom: int,
        counter: TokenCounter | None = None,
        max_hits_tokens_share: float = 0.25,
    ) -> None:
        if context_window <= 0:
            raise ValueError(f"context_window must be positive, got {context_window}")
        if headroom < 0 or headroom >= context_window:
            raise ValueError(
                f"headroom ({headroom}) must be at least 0 and smaller than "
                f"context_window ({context_window})"
            )
        if not 0 <= max_hits_tokens_share <= 1:
            raise ValueError(
                f"max_hits_tokens_share must be between 0 and 1, got {max_hits_tokens_share}"
            )
        if counter is None:
            counter = TokenCounter(encoding)
        elif counter.encoding != encoding:
            # Cached counts are per encoding; mixing them would make the budget a guess.
            raise ValueError(
                f"the token counter counts in {counter.encoding!r} but the profile uses "
                f"{encoding!r}"
            )
        self.encoding = encoding
        self.context_window = context_window
        self.headroom = headroom
        self.counter = counter
        self.max_hits_tokens_share = max_hits_tokens_share

    @classmethod
    def for_profile(
        cls, profile: ProfileConfig, counter: TokenCounter | None = None
    ) -> ContextAssembler:
        """An assembler for ``profile``'s encoding, context window and headroom."""
        return cls(
            encoding=profile.encoding,
            context_window=profile.context_window,
            headroom=profile.headroom,
            counter=counter,
        )

    @property
    def budget(self) -> int:
        """Tokens the prompt may use: ``context_window - headroom``."""
        return self.context_window - self.headroom

    # -- counting ---------------------------------------------------------------------------

    def history_tokens(self, turns: Sequence[HistoryTurn]) -> int:
        """What ``turns`` cost as history in the prompt (cached per event, like assembly)."""
        return sum(self._turn_tokens(turn) for turn in turns)

    def summary_tokens(self, summary: CompactionSummaryItem) -> int:
        """What ``summary`` costs in the prompt: its block and its section's heading."""
        label = _event_range([summary.first_event_id, summary.last_event_id])
        return self.counter.count(_SUMMARY_HEADING) + self.counter.count(
            f"[{label}]\n{summary.text}\n"
        )

    def _turn_tokens(self, turn: HistoryTurn) -> int:
        return self._turn_entry(turn)[0]

    def _turn_entry(self, turn: HistoryTurn) -> tuple[int, bool]:
        """(tokens, whether the turn holds tool output) of one history turn.

        A turn with event ids is looked up once per turn in the counter's ``derived``
        cache, so a long history costs a dict lookup per turn that fits, not a count per
        message.
        """
        turns = self._turn_table()
        key = turn.event_ids or None
        if key is not None:
            found = turns.get(key)
            if found is not None:
                return found
        total = 0
        for index, message in enumerate(turn.messages):
            # Keyed by the turn's events, a known turn costs a dict lookup, not a re-encode.
            message_key: Hashable | None = (
                ("history", turn.event_ids, index) if turn.event_ids else None
            )
            total += self.counter.count_message(
                message.role, message.content, key=message_key, name=message.name
            )
        entry = (total, turn.had_tool_output or any(m.role == "tool" for m in turn.messages))
        if key is not None:
            if len(turns) >= self.counter.maxsize:
                turns.clear()
            turns[key] = entry
        return entry

    def _turn_table(self) -> dict[tuple[int, ...], tuple[int, bool]]:
        """Event ids -> ``_turn_entry`` of every turn counted so far, kept in the counter."""
        table = self.counter.derived.get(_TURNS)
        if table is None:
            table = self.counter.derived[_TURNS] = {}
        return table

    # -- assembly ---------------------------------------------------------------------------

    def assemble(self, data: AssemblyInput) -> Assembly:
        """The prompt for ``data`` within the budget, plus the trace of every source.

        Raises :class:`BudgetExceeded` when the system prompt (with instructions) and the
        new prompt alone do not fit.
        """
        budget = self.budget
        counter = self.counter
        retrieved = _retrieved(data)
        if data.hits:
            # Hit sections in the order of their best hit (the workspace's is always there).
            hit_sections = list(dict.fromkeys(r.section for r in retrieved))
            if _WORKSPACE not in hit_sections:
                hit_sections.insert(0, _WORKSPACE)
        else:
            hit_sections = [_WORKSPACE, *(f"{_KB_PREFIX}{k}" for k in data.knowledge_base_hits)]
        kb_sources = [name for name in hit_sections if name != _WORKSPACE]
        memory_sources = [f"memory:{scope}" for scope in _MEMORY_SCOPES]
        section_order = [*memory_sources, _SUMMARY, *hit_sections]
        ledgers = {name: _Ledger() for name in [*section_order, _HISTORY]}

        base = _base_text(data.system_prompt, data.instructions)
        system = _SystemMessage(counter, base, section_order)
        prompt_tokens = counter.count_message("user", data.prompt)
        fixed = system.tokens + prompt_tokens + REPLY_PRIMING_TOKENS
        if fixed > budget:
            raise BudgetExceeded(
                needed=fixed,
                budget=budget,
                context_window=self.context_window,
                headroom=self.headroom,
            )
        # What the system message and the history may use between them.
        limit = budget - prompt_tokens - REPLY_PRIMING_TOKENS

        for scope, source in zip(_MEMORY_SCOPES, memory_sources, strict=True):
            system.set_heading(source, f"## Memory ({scope})\n")
        system.set_heading(_SUMMARY, _SUMMARY_HEADING)
        system.set_heading(_WORKSPACE, "## Context from the workspace\n")
        for source in kb_sources:
            system.set_heading(source, f"## Context from {source.removeprefix(_KB_PREFIX)}\n")

        self._add_memories(data, system, ledgers, limit)
        self._add_summaries(data, system, ledgers, limit)

        history = data.history
        turn_entry = self._turn_entry

        def turn_cost(index: int) -> int:
            return turn_entry(history[index])[0]

        taken = self._add_hits(data, system, ledgers, limit, retrieved, turn_cost)

        content, system_tokens = self._finish_system(system, ledgers, limit)
        kept_pieces = {id(piece) for _, piece in system.selection}

        memory_tokens = sum(system.source_tokens(s) for s in memory_sources)
        kept_turns, had_tool_output = self._select_history(
            data, ledgers[_HISTORY], limit - system_tokens, memory_tokens
        )

        messages: list[ChatMessage] = []
        if content:
            messages.append(ChatMessage(_SYSTEM, content))
        for index in kept_turns:
            messages.extend(data.history[index].messages)
        messages.append(ChatMessage("user", data.prompt))

        history_tokens = ledgers[_HISTORY].tokens
        used = system_tokens + history_tokens + prompt_tokens + REPLY_PRIMING_TOKENS
        section_tokens = 0
        for name in section_order:
            ledgers[name].tokens = system.source_tokens(name)
            ledgers[name].included = len(system.sections[name])
            section_tokens += ledgers[name].tokens

        sources = [
            SourceAccount(
                source=_SYSTEM,
                # Framing, the system prompt, instructions, any counting drift the safety
                # net found and the reply priming: whatever the sections do not account for.
                tokens=system_tokens - section_tokens + REPLY_PRIMING_TOKENS,
                included=sum(1 for part in (data.system_prompt, data.instructions) if part),
                dropped=0,
                reasons=(),
            )
        ]
        for name in [*section_order, _HISTORY]:
            ledger = ledgers[name]
            sources.append(
                SourceAccount(
                    source=name,
                    tokens=ledger.tokens,
                    included=ledger.included,
                    dropped=len(ledger.dropped) + ledger.summarised,
                    reasons=tuple(ledger.reasons),
                    dropped_items=tuple(ledger.dropped),
                )
            )
        sources.append(SourceAccount(_PROMPT, prompt_tokens, 1, 0, ()))
        hit_trace = [
            {
                "rank": rank,
                "label": r.label,
                "id": r.hit.id,
                # The document a chunk came from (knowledge-base chunks name it; the
                # workspace's carry their file's path).
                "document": r.hit.metadata.get("document_id")
                or r.hit.metadata.get("path")
                or r.hit.id,
                "tokens": taken[rank - 1].tokens,
                "source": r.hit.source,
                "group": r.group,
                "section": r.section,
                "included": id(taken[rank - 1]) in kept_pieces,
                "found_by": [{"source": p.source, "rank": p.rank} for p in r.hit.sources],
                **_stage_ranks(r.hit),
            }
            for rank, r in enumerate(retrieved, start=1)
        ]
        return Assembly(
            messages,
            budget,
            used,
            sources,
            had_tool_output,
            hit_trace,
            [dict(stage) for stage in data.stages],
        )

    def _add_memories(
        self,
        data: AssemblyInput,
        system: _SystemMessage,
        ledgers: dict[str, _Ledger],
        limit: int,
    ) -> None:
        """Memories before anything else but the system prompt: memory beats old history.

        When they do not all fit, the most relevant go first: key match (how many of the
        key's words appear in the prompt), then recency (``updated_at``), then scope
        (session > workspace > user). A memory that does not fit is skipped and a smaller,
        less relevant one may still take the room.
        """
        prepared = self._prepared_memories(system, data.memories)
        for source, label in prepared.not_approved:
            # Pending proposals are unvetted model output: never let them into context.
            ledgers[source].drop(label, DROP_NOT_APPROVED)
        chosen = prepared.ranked(words(data.prompt))
        if chosen and system.tokens + prepared.cost + system.opening_cost() <= limit:
            system.add_all(chosen, prepared.cost + system.opening_cost())  # the usual case
            return
        for source, piece in chosen:
            if system.tokens + system.extra(source, piece) <= limit:
                system.add(source, piece)
            else:
                ledgers[source].drop(piece.label, DROP_LESS_RELEVANT_MEMORY)

    def _prepared_memories(
        self, system: _SystemMessage, memories: Sequence[MemoryRecord]
    ) -> PreparedMemories:
        """The memories rendered, counted and ranked but for the prompt's key match, kept
        across turns in the counter's ``derived`` cache: a turn with a thousand memories
        looks them up, it does not re-render, re-hash, re-parse or re-sort them."""
        key = (
            "memories",
            tuple((m.id, m.scope, m.status, m.key, m.body, m.updated_at) for m in memories),
        )
        found = self.counter.derived.get(key)
        if found is None:
            found = PreparedMemories(memories, system.piece, system.headings)
            _remember(self.counter, key, found)
        return found

    def _add_summaries(
        self,
        data: AssemblyInput,
        system: _SystemMessage,
        ledgers: dict[str, _Ledger],
        limit: int,
    ) -> None:
        """Compaction summaries, kept before any history; newest first when tight.

        The newest summary covers the events right before the live history, so it is the
        one that keeps the thread; older ones are dropped first. They render oldest first.
        """
        indexed = list(enumerate(data.summaries))
        for order, summary in reversed(indexed):
            label = _event_range([summary.first_event_id, summary.last_event_id])
            text = f"[{label}]\n{summary.text}\n"
            piece = system.piece(order, text, label)
            if system.tokens + system.extra(_SUMMARY, piece) <= limit:
                system.add(_SUMMARY, piece)
            else:
                ledgers[_SUMMARY].drop(label, DROP_BUDGET)

    def _add_hits(
        self,
        data: AssemblyInput,
        system: _SystemMessage,
        ledgers: dict[str, _Ledger],
        limit: int,
        retrieved: Sequence[_Retrieved],
        turn_cost: Callable[[int], int],
    ) -> list[_Piece]:
        """Retrieval hits in their given order (fusion's), within the hits allowance.

        The allowance is everything left when the hits and the history that fits both fit.
        Otherwise history "wants the space", and hits get what history leaves them but at
        least ``max_hits_tokens_share`` of the budget: retrieval ranks above history, yet a
        long conversation must not be squeezed out by a page of search results. Returns
        every hit's piece, in the order given.
        """
        candidates = [
            (
                r.section,
                system.piece(order, f"### {r.label} ({r.hit.source})\n{r.hit.text}\n", r.label),
            )
            for order, r in enumerate(retrieved)
        ]
        if not candidates:
            return []

        room = limit - system.tokens
        # Cost of every hit together: the pieces, their section headings (hit sections are
        # still empty here) and opening the sections if memories and summaries did not.
        all_hits = sum(piece.tokens for _, piece in candidates)
        all_hits += sum(system.headings[s][1] for s in dict.fromkeys(s for s, _ in candidates))
        all_hits += system.opening_cost()
        wanted_by_history = 0
        for index in reversed(range(len(data.history))):
            cost = turn_cost(index)
            if wanted_by_history + cost > room:
                break
            wanted_by_history += cost
        if all_hits + wanted_by_history <= room:
            allowance = room
        else:
            share = int(self.max_hits_tokens_share * self.budget)
            allowance = min(room, max(share, room - wanted_by_history))

        spent = 0
        for source, piece in candidates:
            cost = system.extra(source, piece)
            if spent + cost <= allowance:
                system.add(source, piece)
                spent += cost
            elif spent + cost <= room:
                ledgers[source].drop(piece.label, DROP_HITS_CAP)
            else:
                ledgers[source].drop(piece.label, DROP_BUDGET)
        return [piece for _, piece in candidates]

    def _finish_system(
        self, system: _SystemMessage, ledgers: dict[str, _Ledger], limit: int
    ) -> tuple[str, int]:
        """The rendered system message and its exact token count, within ``limit``.

        The pieces add up exactly by construction (see the module docstring); this recount
        is the safety net should a tokenizer ever break that, so that the budget holds
        regardless: pieces are then dropped in reverse priority order until the message
        fits. The bare system prompt always fits, the budget guard saw to that.
        """
        while True:
            content = system.render()
            tokens = self.counter.count_message(_SYSTEM, content) if content else 0
            if tokens <= limit or not system.selection:
                return content, tokens
            source, piece = system.pop_last()
            ledgers[source].drop(piece.label, DROP_BUDGET)

    def _select_history(
        self,
        data: AssemblyInput,
        ledger: _Ledger,
        room: int,
        memory_tokens: int,
    ) -> tuple[list[int], bool]:
        """Indexes of the turns kept, oldest first: newest first, whole turns, no gaps;
        and whether any of them holds tool output.

        The first turn that does not fit ends the history; it and every older turn are
        dropped, since a conversation with a hole in it reads as something that never
        happened. The dropped turns are one range in the trace (``events 1-40 (20
        turns)``), so a long history costs what fits, not what it drops.
        """
        history = data.history
        turn_entry = self._turn_entry
        known = self._turn_table().get  # inlined: this loop runs once per turn that fits
        kept: list[int] = []
        spent = 0
        tool = False
        for index in range(len(history) - 1, -1, -1):
            turn = history[index]
            entry = (turn.event_ids and known(turn.event_ids)) or turn_entry(turn)
            cost = entry[0]
            if cost > room - spent:
                ledger.drop(_turn_range(history, index), DROP_OLDER_HISTORY, count=index + 1)
                if memory_tokens and cost <= room - spent + memory_tokens:
                    # Without the memories this turn would have fitted: say so in the trace.
                    ledger.drop_reason(DROP_MEMORY_BEATS_HISTORY)
                break
            spent += cost
            tool = tool or entry[1]
            kept.append(index)
        ledger.tokens += spent
        ledger.included = len(kept)
        kept.reverse()
        return kept, tool


def _stage_ranks(hit: Any) -> dict[str, int]:
    """A hit's place before and after search stages, when they ran."""
    ranks = {
        "fused_rank": getattr(hit, "fused_rank", None),
        "reranked_rank": getattr(hit, "reranked_rank", None),
    }
    return {key: value for key, value in ranks.items() if value is not None}
