"""The append-only SQLite event store of the typed session events.

Everything that happens in a session is an event (the classes are in
:mod:`kairox.store.event_types`, re-exported here for existing imports). Events are appended, never
updated or deleted (compaction appends a :class:`CompactionSummary`; it does not remove what
it summarised). SQLite triggers enforce this for anyone who bypasses the API.

The database is shared with memories and workspace indexes; opening it, its versions and its
transactions are :mod:`kairox.store.sqlite`'s (re-exported here for existing imports). The facade
owns the process's event store.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from kairox.store import event_types
from kairox.store.event_types import *  # noqa: F403  (events is where the event types are imported from)
from kairox.store.event_types import Event, event_from_payload
from kairox.store.sqlite import (
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
    "SchemaVersionError",
    "SqliteComponentStore",
    "SqliteEventStore",
    "StoredEvent",
    "connect_database",
    "enable_wal",
    "ensure_component_schema",
    "utc_now",
    *event_types.__all__,
]

EVENTS_SCHEMA_VERSION: Final = 1
"""Version of the ``events`` component's tables."""


def _iso(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware (UTC)")
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


# ----------------------------------------------------------------------------- the store


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

    One connection (its own, or a shared :class:`~kairox.store.sqlite.Database`), safe to share
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
