"""The context assembler: what goes into the prompt of each turn, within the token budget.

Every turn the prompt is rebuilt from scratch. :class:`ContextAssembler` takes the profile's
token budget (``context_window - headroom``) and fills it in priority order:

1. the system prompt plus the active instructions (always; see the budget guard below);
2. memories (user, this workspace's, this session's), filtered by relevance when tight;
3. compaction summaries, newest first when tight;
4. workspace retrieval hits, best first;
5. knowledge-base hits, one knowledge base after the other, best first;
6. recalled messages: what was said earlier that the kept history does not hold
   (:mod:`kairox.context.recalled`), best first, under their own share of the budget;
7. history, newest turn first and in whole turns only;
8. the new user prompt, always verbatim and always the last message.

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

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

from kairox.context import assembly
from kairox.context.assembly import *  # noqa: F403
from kairox.context.assembly import (
    DROP_BUDGET,
    DROP_LESS_RELEVANT_MEMORY,
    DROP_MEMORY_BEATS_HISTORY,
    DROP_NOT_APPROVED,
    DROP_OLDER_HISTORY,
    Assembly,
    AssemblyInput,
    BudgetExceeded,
    CompactionSummaryItem,
    HistoryTurn,
    SourceAccount,
)
from kairox.context.hits import add_hits, hit_sections, hit_trace, retrieved_hits
from kairox.context.memory_ranking import PreparedMemories, words
from kairox.context.recalled import add_recall, kept_recalled
from kairox.context.system_message import (
    HISTORY,
    KB_PREFIX,
    MEMORY_SCOPES,
    PROMPT,
    RECALL,
    RECALL_HEADING,
    SUMMARY,
    SUMMARY_HEADING,
    SYSTEM,
    WORKSPACE,
    Draft,
    Ledger,
    SystemMessage,
    base_text,
    event_range,
    turn_range,
)
from kairox.context.tokens import REPLY_PRIMING_TOKENS, TokenCounter
from kairox.support.models import ChatMessage

if TYPE_CHECKING:
    # Types only: the assembler must not pull in pydantic or the SQLite stores on import.
    from kairox.config.schema import ProfileConfig
    from kairox.memory.store import MemoryRecord

# The records an assembly takes and gives live in kairox.context.assembly; they are
# re-exported here (the star import), where callers have always imported them from.
__all__ = ["ContextAssembler"]
__all__ += assembly.__all__  # the form type checkers follow

# The key of the per-turn table in TokenCounter.derived (see ContextAssembler._turn_entry).
_TURNS = "assembler.turns"


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
    history pressure hits may use everything that is left. Recalled messages get at least
    ``recall_share`` of the budget when history wants the room, and at most
    ``recall_max_tokens`` (:mod:`kairox.context.recalled`). The assembler keeps no state
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
        recall_share: float = 0.75,
        recall_max_tokens: int = 8000,
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
        if not 0 <= recall_share <= 1:
            raise ValueError(f"recall_share must be between 0 and 1, got {recall_share}")
        if recall_max_tokens < 0:
            raise ValueError(f"recall_max_tokens must be 0 or more, got {recall_max_tokens}")
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
        self.recall_share = recall_share
        self.recall_max_tokens = recall_max_tokens

    @classmethod
    def for_profile(
        cls,
        profile: ProfileConfig,
        counter: TokenCounter | None = None,
        *,
        recall_share: float = 0.75,
        recall_max_tokens: int = 8000,
    ) -> ContextAssembler:
        """An assembler for ``profile``'s encoding, context window and headroom (and the
        ``[recall]`` table's share and cap)."""
        return cls(
            encoding=profile.encoding,
            context_window=profile.context_window,
            headroom=profile.headroom,
            counter=counter,
            recall_share=recall_share,
            recall_max_tokens=recall_max_tokens,
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
        label = event_range([summary.first_event_id, summary.last_event_id])
        return self.counter.count(SUMMARY_HEADING) + self.counter.count(
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
        retrieved = retrieved_hits(data)
        sections = hit_sections(data, retrieved)
        kb_sources = [name for name in sections if name != WORKSPACE]
        memory_sources = [f"memory:{scope}" for scope in MEMORY_SCOPES]
        section_order = [*memory_sources, SUMMARY, *sections, RECALL]
        ledgers = {name: Ledger() for name in [*section_order, HISTORY]}

        base = base_text(data.system_prompt, data.instructions)
        system = SystemMessage(counter, base, section_order)
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
        draft = Draft(data, system, ledgers, limit)

        for scope, source in zip(MEMORY_SCOPES, memory_sources, strict=True):
            system.set_heading(source, f"## Memory ({scope})\n")
        system.set_heading(SUMMARY, SUMMARY_HEADING)
        system.set_heading(WORKSPACE, "## Context from the workspace\n")
        for source in kb_sources:
            system.set_heading(source, f"## Context from {source.removeprefix(KB_PREFIX)}\n")
        system.set_heading(RECALL, RECALL_HEADING)

        self._add_memories(draft)
        self._add_summaries(draft)

        history = data.history
        turn_entry = self._turn_entry

        def turn_cost(index: int) -> int:
            return turn_entry(history[index])[0]

        share = int(self.max_hits_tokens_share * budget)
        taken = add_hits(draft, retrieved, turn_cost, share)
        recall = add_recall(
            draft, turn_cost, int(self.recall_share * budget), self.recall_max_tokens
        )

        content, system_tokens = self._finish_system(system, ledgers, limit)
        kept_pieces = {id(piece) for _, piece in system.selection}

        memory_tokens = sum(system.source_tokens(s) for s in memory_sources)
        kept_turns, had_tool_output = self._select_history(
            data, ledgers[HISTORY], limit - system_tokens, memory_tokens, recall.event_ids
        )
        # Recalled tool output is as unvetted as it was in the history it came from.
        had_tool_output = had_tool_output or any(
            id(piece) in recall.tool_pieces for _, piece in system.selection
        )

        messages: list[ChatMessage] = []
        if content:
            messages.append(ChatMessage(SYSTEM, content))
        for index in kept_turns:
            messages.extend(data.history[index].messages)
        messages.append(ChatMessage("user", data.prompt))

        history_tokens = ledgers[HISTORY].tokens
        used = system_tokens + history_tokens + prompt_tokens + REPLY_PRIMING_TOKENS
        section_tokens = 0
        for name in section_order:
            ledgers[name].tokens = system.source_tokens(name)
            ledgers[name].included = len(system.sections[name])
            section_tokens += ledgers[name].tokens
        # Recall's group headings are not items; its messages are.
        ledgers[RECALL].included = len(recall.event_ids & kept_recalled(system))

        sources = [
            SourceAccount(
                source=SYSTEM,
                # Framing, the system prompt, instructions, any counting drift the safety
                # net found and the reply priming: whatever the sections do not account for.
                tokens=system_tokens - section_tokens + REPLY_PRIMING_TOKENS,
                included=sum(1 for part in (data.system_prompt, data.instructions) if part),
                dropped=0,
                reasons=(),
            )
        ]
        sources += [ledgers[name].account(name) for name in [*section_order, HISTORY]]
        sources.append(SourceAccount(PROMPT, prompt_tokens, 1, 0, ()))
        return Assembly(
            messages,
            budget,
            used,
            sources,
            had_tool_output,
            hit_trace(retrieved, taken, kept_pieces),
            [dict(stage) for stage in data.stages],
        )

    def _add_memories(self, draft: Draft) -> None:
        """Memories before anything else but the system prompt: memory beats old history.

        When they do not all fit, the most relevant go first: key match (how many of the
        key's words appear in the prompt), then recency (``updated_at``), then scope
        (session > workspace > user). A memory that does not fit is skipped and a smaller,
        less relevant one may still take the room.
        """
        system = draft.system
        prepared = self._prepared_memories(system, draft.data.memories)
        for source, label in prepared.not_approved:
            # Pending proposals are unvetted model output: never let them into context.
            draft.ledgers[source].drop(label, DROP_NOT_APPROVED)
        chosen = prepared.ranked(words(draft.data.prompt))
        if chosen and system.tokens + prepared.cost + system.opening_cost() <= draft.limit:
            system.add_all(chosen, prepared.cost + system.opening_cost())  # the usual case
            return
        for source, piece in chosen:
            draft.offer(source, piece, DROP_LESS_RELEVANT_MEMORY)

    def _prepared_memories(
        self, system: SystemMessage, memories: Sequence[MemoryRecord]
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

    def _add_summaries(self, draft: Draft) -> None:
        """Compaction summaries, kept before any history; newest first when tight.

        The newest summary covers the events right before the live history, so it is the
        one that keeps the thread; older ones are dropped first. They render oldest first.
        """
        indexed = list(enumerate(draft.data.summaries))
        for order, summary in reversed(indexed):
            label = event_range([summary.first_event_id, summary.last_event_id])
            text = f"[{label}]\n{summary.text}\n"
            draft.offer(SUMMARY, draft.system.piece(order, text, label), DROP_BUDGET)

    def _finish_system(
        self, system: SystemMessage, ledgers: dict[str, Ledger], limit: int
    ) -> tuple[str, int]:
        """The rendered system message and its exact token count, within ``limit``.

        The pieces add up exactly by construction (see the module docstring); this recount
        is the safety net should a tokenizer ever break that, so that the budget holds
        regardless: pieces are then dropped in reverse priority order until the message
        fits. The bare system prompt always fits, the budget guard saw to that.
        """
        while True:
            content = system.render()
            tokens = self.counter.count_message(SYSTEM, content) if content else 0
            if tokens <= limit or not system.selection:
                return content, tokens
            source, piece = system.pop_last()
            ledgers[source].drop(piece.label, DROP_BUDGET)

    def _select_history(
        self,
        data: AssemblyInput,
        ledger: Ledger,
        room: int,
        memory_tokens: int,
        recalled: set[int] | None = None,
    ) -> tuple[list[int], bool]:
        """Indexes of the turns kept, oldest first: newest first, whole turns, no gaps;
        and whether any of them holds tool output.

        The first turn that does not fit ends the history; it and every older turn are
        dropped, since a conversation with a hole in it reads as something that never
        happened. The dropped turns are one range in the trace (``events 1-40 (20
        turns)``), so a long history costs what fits, not what it drops. History also
        ends at a turn holding a ``recalled`` message: it is in the prompt already.
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
            if cost > room - spent or (recalled and not recalled.isdisjoint(turn.event_ids)):
                ledger.drop(turn_range(history, index), DROP_OLDER_HISTORY, count=index + 1)
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
