"""What an assembly takes and gives: the input, the prompt with its accounts, the budget guard.

:class:`AssemblyInput` (with :class:`HistoryTurn` and :class:`CompactionSummaryItem`) is what
one turn's prompt may be built from; :class:`Assembly` is the prompt and its accounting, one
:class:`SourceAccount` per context source; :class:`BudgetExceeded` is the budget guard's
refusal. The :mod:`kairox.context.assembler` builds one from the other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kairox.support.errors import KairoxError
from kairox.support.models import ChatMessage

if TYPE_CHECKING:
    # Types only: the assembler must not pull in pydantic or the SQLite stores on import.
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
    "HistoryTurn",
    "RecalledMessage",
    "RecalledTurn",
    "SourceAccount",
]

# What Assembly.trace() stores as it is, in this order (then the sources' accounts).
_TRACED = ("budget", "used_tokens", "had_tool_output", "tainted_by", "hits", "stages")

#: Drop reasons, as they appear in :attr:`SourceAccount.reasons` and the trace.
DROP_BUDGET = "budget"
DROP_LESS_RELEVANT_MEMORY = "budget: less relevant memory dropped (key match, recency, scope)"
DROP_HITS_CAP = "budget: retrieval hits capped so history keeps its share"
DROP_OLDER_HISTORY = "budget: older history dropped"
DROP_MEMORY_BEATS_HISTORY = "budget: memory beats old history"
DROP_NOT_APPROVED = "not approved"


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
class RecalledMessage:
    """A message said earlier, found again by recall: who said it, when, where.

    ``tool_output`` marks text a tool returned: recalled, it stays as unvetted as it was.
    """

    event_id: int
    session_id: str
    who: str
    time: str
    text: str
    tool_output: bool = False
    tokens: tuple[str, int] | None = None
    """``(encoding, count)`` of the message's line (:func:`kairox.context.recalled.recall_line`)
    when the caller counted it already; used when the assembler counts in that encoding."""


@dataclass(frozen=True)
class RecalledTurn:
    """One recall hit: the message found (``event_id``) with the neighbours that complete
    it (the question it answers, the answer it asked for), oldest first."""

    event_id: int
    messages: tuple[RecalledMessage, ...]
    score: float = 0.0


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
    #: Recall: earlier messages relevant to the prompt, best first. Those the kept
    #: history already holds are left out, so nothing is in the prompt twice.
    recall: Sequence[RecalledTurn] = ()


@dataclass(frozen=True)
class SourceAccount:
    """What one context source contributed to the prompt, and what it lost and why.

    ``source`` is ``system``, ``memory:user``, ``memory:workspace``, ``memory:session``,
    ``compaction_summary``, ``workspace_retrieval``, ``knowledge_base:<id>``, ``history`` or
    ``prompt``. ``tokens`` is exact, and the accounts add up to :attr:`Assembly.used_tokens`:
    ``system`` carries the system message's framing and
    :data:`~kairox.context.tokens.REPLY_PRIMING_TOKENS`, each section carries its own
    heading. ``dropped_items`` names what was dropped (a memory id and key, an event range,
    a hit's uri or id).
    """

    source: str
    tokens: int
    included: int
    dropped: int
    reasons: tuple[str, ...]
    dropped_items: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        """The account as the trace stores it: every field, the tuples as lists."""
        return {
            **dataclasses.asdict(self),
            "reasons": list(self.reasons),
            "dropped_items": list(self.dropped_items),
        }


@dataclass(frozen=True)
class Assembly:
    """The assembled prompt plus its accounting.

    ``used_tokens`` is the exact cost of ``messages``: every message with its framing, plus
    :data:`~kairox.context.tokens.REPLY_PRIMING_TOKENS` once; it never exceeds ``budget``.
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
        traced = {name: getattr(self, name) for name in _TRACED}
        return {**traced, "sources": [account.as_json() for account in self.sources]}


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
