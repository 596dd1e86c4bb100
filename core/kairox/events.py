"""Typed session events and the append-only SQLite event store.

Everything that happens in a session is an event: user messages, model token deltas, tool calls,
memory proposals and decisions, compactions, profile switches and the trace of each assembled
context. Events are appended, never updated or deleted (compaction appends a
:class:`CompactionSummary`; it does not remove what it summarised). SQLite triggers enforce this
for anyone who bypasses the API.

The database is shared: events, memories (:mod:`kairox.memory.store`) and workspace indexes live
in one file (see :func:`kairox.paths.database_path`). So that each part can evolve its own tables,
versions are tracked twice:

* ``PRAGMA user_version`` holds the version of the shared layout (:data:`DATABASE_FORMAT_VERSION`:
  the pragmas and the ``kairox_schema`` bookkeeping table);
* ``kairox_schema(component, version)`` holds one version per component (``events``, ``memory``,
  ...), managed by :func:`ensure_component_schema`.

A database written by a newer Kairox (either number higher than this code knows) is refused with
:class:`SchemaVersionError` instead of being read or written with the wrong assumptions.

Every connection runs in WAL mode with a busy timeout and autocommit, and every write is one short
transaction, so two processes (say, the TUI and the web app) can share the file and see each
other's writes on their next read.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from os import PathLike
from pathlib import Path
from typing import Any, ClassVar, Final, Self

__all__ = [
    "DATABASE_FORMAT_VERSION",
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
    "MemoryProposed",
    "MemoryRejected",
    "ModelTokenDelta",
    "ProfileSwitched",
    "SchemaVersionError",
    "SqliteEventStore",
    "StoredEvent",
    "ToolInvocationCompleted",
    "UserMessageAdded",
    "connect_database",
    "enable_wal",
    "ensure_component_schema",
    "event_from_payload",
    "utc_now",
]

DATABASE_FORMAT_VERSION: Final = 1
"""``PRAGMA user_version`` this code writes and understands."""

EVENTS_SCHEMA_VERSION: Final = 1
"""Version of the ``events`` component's tables."""

DEFAULT_BUSY_TIMEOUT_MS: Final = 5_000

EVENT_TYPES: dict[str, type[Event]] = {}
"""Every event class by its ``type`` string (filled as the classes are defined)."""


class SchemaVersionError(RuntimeError):
    """The database was written by a newer Kairox than this one."""


def utc_now() -> datetime:
    """The current time, timezone-aware UTC (the default clock of the stores)."""
    return datetime.now(UTC)


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


@dataclass(frozen=True)
class MemoryProposed(Event):
    """The model proposed a memory (one per valid marker)."""

    scope: str
    body: str
    key: str | None = None
    memory_id: int | None = None
    injection_warning: bool = False
    """The proposing turn's context held tool output: the proposal may be prompt injection."""
    turn_id: str | None = None


@dataclass(frozen=True)
class MemoryAccepted(Event):
    """A proposal was accepted (automatically for session scope, by the user otherwise)."""

    scope: str
    key: str | None = None
    memory_id: int | None = None
    auto: bool = False


@dataclass(frozen=True)
class MemoryRejected(Event):
    """A proposal was rejected by the user, or a marker was malformed (then ``raw`` is set)."""

    reason: str
    scope: str | None = None
    key: str | None = None
    memory_id: int | None = None
    raw: str | None = None


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


# ----------------------------------------------------------------------------- the database


def connect_database(
    path: str | PathLike[str], *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS
) -> sqlite3.Connection:
    """Open the Kairox database with the settings every store relies on.

    Autocommit (transactions are explicit and short), WAL so readers never block the writer,
    and a busy timeout so two processes wait for each other instead of failing.
    Also checks ``PRAGMA user_version``: a newer layout raises :class:`SchemaVersionError`.
    """
    target = str(path)
    if target != ":memory:" and not target.startswith("file:"):
        Path(target).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(
        target,
        timeout=busy_timeout_ms / 1000,
        isolation_level=None,
        check_same_thread=False,
        uri=target.startswith("file:"),
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        # Check before switching to WAL, so a newer database is refused without being touched.
        _check_format(conn)
        enable_wal(conn, busy_timeout_ms / 1000)
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
    except BaseException:
        conn.close()
        raise
    return conn


def _check_format(conn: sqlite3.Connection) -> int:
    (found,) = conn.execute("PRAGMA user_version").fetchone()
    if found > DATABASE_FORMAT_VERSION:
        raise SchemaVersionError(
            f"this database has layout version {found}, newer than the {DATABASE_FORMAT_VERSION} "
            "this Kairox understands; upgrade Kairox (it was left untouched)"
        )
    return found


def enable_wal(conn: sqlite3.Connection, timeout_s: float) -> None:
    """Switch the connection's file to write-ahead logging, waiting for other openers.

    Switching needs the file's exclusive lock, and when another connection is opening the
    same new file SQLite answers "database is locked" at once instead of through the busy
    handler (waiting there could deadlock), so the switch is retried for up to
    ``timeout_s`` seconds. A file already in WAL mode is left as it is.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL").fetchall()
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)


def ensure_component_schema(
    conn: sqlite3.Connection, component: str, version: int, statements: Sequence[str]
) -> None:
    """Create ``component``'s tables at ``version`` if missing; refuse a newer stored version.

    ``statements`` must be idempotent (``IF NOT EXISTS``). They run in one ``BEGIN IMMEDIATE``
    transaction so two processes opening a fresh database cannot interleave.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        if _check_format(conn) < DATABASE_FORMAT_VERSION:
            conn.execute(f"PRAGMA user_version = {DATABASE_FORMAT_VERSION}")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS kairox_schema ("
            " component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
        )
        row = conn.execute(
            "SELECT version FROM kairox_schema WHERE component = ?", (component,)
        ).fetchone()
        if row is not None and row[0] > version:
            raise SchemaVersionError(
                f"the {component!r} tables in this database are version {row[0]}, newer than the "
                f"{version} this Kairox understands; upgrade Kairox (the database was left "
                "untouched)"
            )
        if row is None or row[0] < version:
            # Version 1 is the first layout, so creating is the only migration so far.
            for statement in statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO kairox_schema(component, version) VALUES (?, ?)"
                " ON CONFLICT(component) DO UPDATE SET version = excluded.version",
                (component, version),
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


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


class SqliteComponentStore:
    """One connection to the shared database, with this component's tables in place.

    Subclasses name their ``component``, ``schema_version`` and ``schema`` (idempotent
    statements); a database holding a newer version of them is refused untouched.
    """

    component: ClassVar[str]
    schema_version: ClassVar[int]
    schema: ClassVar[Sequence[str]]

    def __init__(
        self,
        path: str | PathLike[str],
        *,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._conn = connect_database(path, busy_timeout_ms=busy_timeout_ms)
        try:
            ensure_component_schema(self._conn, self.component, self.schema_version, self.schema)
        except BaseException:
            self._conn.close()
            raise

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class SqliteEventStore(SqliteComponentStore):
    """Append-only event log in the shared Kairox SQLite database.

    Each instance owns one connection (safe to share between threads; calls are serialised).
    Open one per process; instances on the same file see each other's appends immediately.
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

        ``provenance`` is merged over the event's own :meth:`Event.provenance`.
        """
        if not isinstance(event, Event) or type(event) is Event:
            raise TypeError(f"append() needs an Event subclass instance, not {event!r}")
        if not isinstance(session_id, str) or not session_id:
            raise ValueError("session_id must be a non-empty string")
        payload = event.payload()
        payload_json = _dumps(payload, f"the payload of {event.type}")
        merged = event.provenance()
        if provenance is not None:
            merged = {**(merged or {}), **provenance}
        provenance_json = (
            None if merged is None else _dumps(merged, f"the provenance of {event.type}")
        )
        created_at = _iso(self._clock())
        with self._lock:
            cursor = self._conn.execute(
                "INSERT INTO events(session_id, workspace_id, created_at, type, payload, provenance)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, workspace_id, created_at, event.type, payload_json, provenance_json),
            )
            new_id = cursor.lastrowid
        assert new_id is not None
        return StoredEvent(
            id=new_id,
            session_id=session_id,
            workspace_id=workspace_id,
            created_at=created_at,
            type=event.type,
            payload=json.loads(payload_json),
            provenance=merged,
        )

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
        where: builtins.list[str] = []
        params: builtins.list[Any] = []
        if session_id is not None:
            where.append("session_id = ?")
            params.append(session_id)
        if workspace_id is not None:
            where.append("workspace_id = ?")
            params.append(workspace_id)
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


_SELECT: Final = (
    "SELECT id, session_id, workspace_id, created_at, type, payload, provenance FROM events"
)


def _row_to_event(row: tuple[Any, ...]) -> StoredEvent:
    event_id, session_id, workspace_id, created_at, type_name, payload, provenance = row
    return StoredEvent(
        id=event_id,
        session_id=session_id,
        workspace_id=workspace_id,
        created_at=created_at,
        type=type_name,
        payload=json.loads(payload),
        provenance=None if provenance is None else json.loads(provenance),
    )
