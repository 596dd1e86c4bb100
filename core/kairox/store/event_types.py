"""The typed session events: what a session records, one dataclass per kind.

Everything that happens in a session is an event: user messages, model token deltas, tool calls,
memory proposals and decisions, compactions, profile switches and the trace of each assembled
context. Each class registers itself in :data:`EVENT_TYPES` under its name, so a stored row
turns back into its object (:func:`event_from_payload`). Storing them is
:mod:`kairox.store.events`'s (which re-exports every name here).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = [
    "EVENT_TYPES",
    "AssistantMessageCompleted",
    "CompactionSummary",
    "ContextAssembled",
    "ContextCompactionCompleted",
    "ContextCompactionFailed",
    "ContextCompactionSkipped",
    "ContextCompactionStarted",
    "Event",
    "MemoryAccepted",
    "MemoryEdited",
    "MemoryForgotten",
    "MemoryMerged",
    "MemoryProposed",
    "MemoryRejected",
    "ModelTokenDelta",
    "ProfileSwitched",
    "SystemMessageAdded",
    "ToolInvocationCompleted",
    "UserMessageAdded",
    "event_from_payload",
]

EVENT_TYPES: dict[str, type[Event]] = {}
"""Every event class by its ``type`` string (filled as the classes are defined)."""


@dataclass(frozen=True)
class Event:
    """Base of all events. Subclasses are dataclasses whose fields form the JSON payload.

    The ``type`` string is the class name; subclasses register themselves in
    :data:`EVENT_TYPES` so stored rows can be turned back into objects.
    """

    type: ClassVar[str] = "Event"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.type = cls.__name__
        if cls.type in EVENT_TYPES:
            raise TypeError(f"duplicate event type {cls.type!r}")
        EVENT_TYPES[cls.type] = cls

    def payload(self) -> dict[str, Any]:
        """The event's fields as a JSON-ready dict."""
        return dataclasses.asdict(self)

    def provenance(self) -> dict[str, Any] | None:
        """Where the event's content came from, stored in its own column; most events have none."""
        return None


@dataclass(frozen=True)
class UserMessageAdded(Event):
    """The user sent a message (verbatim)."""

    text: str
    turn_id: str | None = None
    name: str | None = None
    """Who spoke, when the conversation names its speakers (see :mod:`kairox.store.messages`)."""
    time: str | None = None
    """When it was said (ISO 8601, as given); ``None``: when it was recorded."""


@dataclass(frozen=True)
class SystemMessageAdded(Event):
    """A system message the agent put into the conversation (not the profile's prompt)."""

    text: str
    turn_id: str | None = None
    name: str | None = None
    time: str | None = None


@dataclass(frozen=True)
class ModelTokenDelta(Event):
    """A piece of the model's reply as streamed (visible text, markers already stripped)."""

    text: str
    turn_id: str | None = None


@dataclass(frozen=True)
class AssistantMessageCompleted(Event):
    """The model's reply is complete; ``text`` is the sanitised visible text."""

    text: str
    turn_id: str | None = None
    model: str | None = None
    profile: str | None = None
    name: str | None = None
    time: str | None = None


@dataclass(frozen=True)
class ToolInvocationCompleted(Event):
    """A tool call finished; ``output`` is what went back into the context."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    output: str = ""
    ok: bool = True
    error: str | None = None
    call_id: str | None = None
    turn_id: str | None = None
    time: str | None = None


@dataclass(frozen=True)
class MemoryProposed(Event):
    """The model proposed a memory (one per valid marker)."""

    scope: str
    body: str
    key: str | None = None
    memory_id: int | None = None
    injection_warning: bool = False
    """The proposing turn's prompt held unvetted text: the proposal may be prompt injection."""
    turn_id: str | None = None
    tainted_by: list[str] = field(default_factory=list)
    """What tainted the turn: ``tool output``, ``workspace:<source>``, ``knowledge_base:<id>``."""


@dataclass(frozen=True)
class MemoryAccepted(Event):
    """A proposal was accepted (automatically for session scope, by the user otherwise)."""

    scope: str
    key: str | None = None
    memory_id: int | None = None
    auto: bool = False
    actor: str | None = None
    """Who decided: ``cli``, ``tui``, ``web`` or ``api`` (``None`` when automatic)."""


@dataclass(frozen=True)
class MemoryRejected(Event):
    """A proposal was rejected by the user, or a marker was malformed (then ``raw`` is set)."""

    reason: str
    scope: str | None = None
    key: str | None = None
    memory_id: int | None = None
    raw: str | None = None
    actor: str | None = None
    """Who rejected it (``cli``, ``tui``, ``web``, ``api``); ``None`` for a malformed marker."""


@dataclass(frozen=True)
class MemoryEdited(Event):
    """A person replaced a memory's body; ``previous_body`` is what it said before."""

    memory_id: int
    scope: str
    body: str
    previous_body: str
    key: str | None = None
    actor: str = "api"
    """Where the edit was made: ``cli``, ``tui``, ``web`` or ``api``."""


@dataclass(frozen=True)
class MemoryForgotten(Event):
    """A person deleted a memory; ``previous_body`` is what it said."""

    memory_id: int
    scope: str
    previous_body: str
    key: str | None = None
    actor: str = "api"
    """Where it was forgotten: ``cli``, ``tui``, ``web`` or ``api``."""


@dataclass(frozen=True)
class MemoryMerged(Event):
    """A proposal restated memory ``memory_id`` (pending or approved: ``into``) and was merged
    with it instead of being kept or queued again; ``body`` is what was proposed."""

    memory_id: int
    scope: str
    body: str
    into: str
    key: str | None = None
    turn_id: str | None = None
    tainted_by: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ContextCompactionStarted(Event):
    """Compaction of the session history began."""

    trigger: str = "auto"
    """``"auto"`` (end of a turn that would overflow) or ``"manual"``."""
    tokens_before: int | None = None


@dataclass(frozen=True)
class CompactionSummary(Event):
    """A summary standing in for events ``first_event_id..last_event_id`` (inclusive)."""

    summary: str
    first_event_id: int
    last_event_id: int
    summarizer: str
    fallback: bool = False
    """The summariser failed and a sliding window produced this instead."""
    kept: list[str] = field(default_factory=list)
    """The kept facts the summary holds (a summariser that reports them)."""
    dropped: list[dict[str, str]] = field(default_factory=list)
    """``{"fact", "why"}`` for each fact left out: superseded, over its share, or dropped
    by a model's summary (then restored from the ledger)."""

    def __post_init__(self) -> None:
        if self.first_event_id > self.last_event_id:
            raise ValueError(
                f"CompactionSummary range is backwards: {self.first_event_id}..{self.last_event_id}"
            )

    def provenance(self) -> dict[str, Any]:
        return {
            "first_event_id": self.first_event_id,
            "last_event_id": self.last_event_id,
            "summarizer": self.summarizer,
        }


@dataclass(frozen=True)
class ContextCompactionCompleted(Event):
    """Compaction finished and appended its summary."""

    summary_event_id: int | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None


@dataclass(frozen=True)
class ContextCompactionFailed(Event):
    """Compaction failed; the session carries on."""

    error: str
    summarizer: str | None = None


@dataclass(frozen=True)
class ContextCompactionSkipped(Event):
    """Compaction was requested but not needed or not possible."""

    reason: str


@dataclass(frozen=True)
class ProfileSwitched(Event):
    """The session's model profile changed."""

    to_profile: str
    from_profile: str | None = None


@dataclass(frozen=True)
class ContextAssembled(Event):
    """The trace of one assembled prompt: every context source, its tokens, what was dropped."""

    trace: dict[str, Any]
    total_tokens: int | None = None
    budget: int | None = None
    turn_id: str | None = None


def event_from_payload(type_name: str, payload: dict[str, Any]) -> Event:
    """Rebuild an event object from its stored ``type`` and payload."""
    try:
        cls = EVENT_TYPES[type_name]
    except KeyError:
        raise ValueError(f"unknown event type {type_name!r}") from None
    return cls(**payload)
