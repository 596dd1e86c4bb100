"""Typed session events and the append-only SQLite event store.

Everything that happens in a session is an event: user messages, model token deltas, tool calls,
memory proposals and decisions, compactions, profile switches and the trace of each assembled
context. Events are appended, never updated or deleted (compaction appends a
:class:`CompactionSummary`; it does not remove what it summarised). SQLite triggers enforce this
for anyone who bypasses the API.

The database is shared with memories and workspace indexes; opening it, its versions and its
transactions are :mod:`kairox.storage`'s (re-exported here for existing imports). The facade
owns the process's event store.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, Final

from kairox.storage import (
    DATABASE_FORMAT_VERSION,
    DEFAULT_BUSY_TIMEOUT_MS,
    SchemaVersionError,
    SqliteComponentStore,
    connect_database,
    enable_wal,
    ensure_component_schema,
    utc_now,
    where_equal,
)

__all__ = [
    "DATABASE_FORMAT_VERSION",
    "DEFAULT_BUSY_TIMEOUT_MS",
    "EVENTS_SCHEMA_VERSION",
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
    "MemoryProposed",
    "MemoryRejected",
    "ModelTokenDelta",
    "ProfileSwitched",
    "SchemaVersionError",
    "SqliteComponentStore",
    "SqliteEventStore",
    "StoredEvent",
    "SystemMessageAdded",
    "ToolInvocationCompleted",
    "UserMessageAdded",
    "connect_database",
    "enable_wal",
    "ensure_component_schema",
    "event_from_payload",
    "utc_now",
]

EVENTS_SCHEMA_VERSION: Final = 1
"""Version of the ``events`` component's tables."""

EVENT_TYPES: dict[str, type[Event]] = {}
"""Every event class by its ``type`` string (filled as the classes are defined)."""


def _iso(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware (UTC)")
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


# ----------------------------------------------------------------------------- events


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
    """Who spoke, when the conversation names its speakers (see :mod:`kairox.messages`)."""
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


@dataclass(frozen=True)
class StoredEvent:
    """An event as stored: the row's metadata plus the decoded payload."""

    id: int
    session_id: str
    workspace_id: str | None
    created_at: str
    """UTC, ISO 8601 with microseconds."""
    type: str
    payload: dict[str, Any]
    provenance: dict[str, Any] | None = None

    @property
    def event(self) -> Event:
        """The payload as a typed :class:`Event` (``ValueError`` for an unknown type)."""
        return event_from_payload(self.type, self.payload)


def _dumps(value: Any, what: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} is not JSON-serialisable: {exc}") from exc


_EVENTS_DDL: Final = (
    """CREATE TABLE IF NOT EXISTS events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        workspace_id TEXT,
        created_at TEXT NOT NULL,
        type TEXT NOT NULL,
        payload TEXT NOT NULL,
        provenance TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS events_by_session ON events(session_id, id)",
    "CREATE INDEX IF NOT EXISTS events_by_type ON events(type, id)",
    """CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE is not allowed'); END""",
    """CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only: DELETE is not allowed'); END""",
)


class SqliteEventStore(SqliteComponentStore):
    """Append-only event log in the shared Kairox SQLite database.

    One connection (its own, or a shared :class:`~kairox.storage.Database`), safe to share
    between threads; calls are serialised. Open one per process (the facade owns it);
    instances on the same file see each other's appends immediately.
    There is deliberately no update or delete method.
    """

    component = "events"
    schema_version = EVENTS_SCHEMA_VERSION
    schema = _EVENTS_DDL

    def append(
        self,
        session_id: str,
        workspace_id: str | None,
        event: Event,
        *,
        provenance: dict[str, Any] | None = None,
    ) -> StoredEvent:
        """Append ``event`` and return it as stored (with its new id and timestamp).

        ``provenance`` is merged over the event's own :meth:`Event.provenance`. Inside
        ``self.database.transaction()`` the row commits with whatever else that
        transaction writes (a memory and its event, say).
        """
        (stored,) = self.append_many(session_id, workspace_id, [event], provenance=provenance)
        return stored

    def append_many(
        self,
        session_id: str,
        workspace_id: str | None,
        events: Iterable[Event],
        *,
        provenance: dict[str, Any] | None = None,
    ) -> builtins.list[StoredEvent]:
        """Append several events in one transaction, in order (a batch of token deltas)."""
        if not isinstance(session_id, str) or not session_id:
            raise ValueError("session_id must be a non-empty string")
        rows = [self._row(event, provenance) for event in events]
        created_at = _iso(self._clock())
        stored: builtins.list[StoredEvent] = []
        with self.database.transaction() as conn:
            for event, payload_json, merged, provenance_json in rows:
                cursor = conn.execute(
                    "INSERT INTO events(session_id, workspace_id, created_at, type, payload,"
                    " provenance) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        session_id,
                        workspace_id,
                        created_at,
                        event.type,
                        payload_json,
                        provenance_json,
                    ),
                )
                assert cursor.lastrowid is not None
                stored.append(
                    StoredEvent(
                        id=cursor.lastrowid,
                        session_id=session_id,
                        workspace_id=workspace_id,
                        created_at=created_at,
                        type=event.type,
                        payload=json.loads(payload_json),
                        provenance=merged,
                    )
                )
        return stored

    @staticmethod
    def _row(
        event: Event, provenance: dict[str, Any] | None
    ) -> tuple[Event, str, dict[str, Any] | None, str | None]:
        if not isinstance(event, Event) or type(event) is Event:
            raise TypeError(f"append() needs an Event subclass instance, not {event!r}")
        payload_json = _dumps(event.payload(), f"the payload of {event.type}")
        merged = event.provenance()
        if provenance is not None:
            merged = {**(merged or {}), **provenance}
        provenance_json = (
            None if merged is None else _dumps(merged, f"the provenance of {event.type}")
        )
        return event, payload_json, merged, provenance_json

    def get(self, event_id: int) -> StoredEvent | None:
        """The event with this id, or ``None``."""
        with self._lock:
            row = self._conn.execute(f"{_SELECT} WHERE id = ?", (event_id,)).fetchone()
        return None if row is None else _row_to_event(row)

    def list(
        self,
        session_id: str | None = None,
        types: Iterable[str | type[Event]] | None = None,
        after_id: int | None = None,
        limit: int | None = None,
        *,
        workspace_id: str | None = None,
    ) -> builtins.list[StoredEvent]:
        """Events in append order, filtered by session, type names (or classes), id and count."""
        where, params = where_equal(session_id=session_id, workspace_id=workspace_id)
        if types is not None:
            names = [t if isinstance(t, str) else t.type for t in types]
            if not names:
                return []
            where.append(f"type IN ({', '.join('?' * len(names))})")
            params.extend(names)
        if after_id is not None:
            where.append("id > ?")
            params.append(after_id)
        sql = _SELECT + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY id"
        if limit is not None:
            if limit < 0:
                raise ValueError("limit must not be negative")
            sql += " LIMIT ?"
            params.append(limit)
        with self._lock:
            rows = self._conn.execute(sql, params).fetchall()
        return [_row_to_event(row) for row in rows]

    def sessions(
        self, types: Iterable[str | type[Event]], *, workspace_id: str | None = None
    ) -> builtins.list[tuple[str, int, int, int]]:
        """``(session_id, count, first_id, last_id)`` of each session holding events of
        ``types``, the most recently active first."""
        names = [t if isinstance(t, str) else t.type for t in types]
        where, params = where_equal(workspace_id=workspace_id)
        where.append(f"type IN ({', '.join('?' * len(names))})")
        sql = (
            "SELECT session_id, count(*), min(id), max(id) FROM events"
            f" WHERE {' AND '.join(where)} GROUP BY session_id ORDER BY max(id) DESC"
        )
        with self._lock:
            return self._conn.execute(sql, [*params, *names]).fetchall()


# The events table's columns, named as StoredEvent's fields are.
_COLUMNS: Final = (
    "id",
    "session_id",
    "workspace_id",
    "created_at",
    "type",
    "payload",
    "provenance",
)
_SELECT: Final = f"SELECT {', '.join(_COLUMNS)} FROM events"


def _row_to_event(row: tuple[Any, ...]) -> StoredEvent:
    stored = dict(zip(_COLUMNS, row, strict=True))
    provenance = stored["provenance"]
    stored["payload"] = json.loads(stored["payload"])
    stored["provenance"] = None if provenance is None else json.loads(provenance)
    return StoredEvent(**stored)
