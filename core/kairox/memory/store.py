"""Scoped, durable memories, kept in SQLite: :class:`SqliteMemoryStore`.

A memory is a short fact the user (or, for session scope, the session) chose to keep:

* ``user`` memories follow the user into every session and workspace;
* ``workspace`` memories belong to one workspace and never appear in another;
* ``session`` memories belong to one session.

Keys make writes stable: a new value for a key that already has an approved memory in the
same place (same scope, and the same workspace or session where the scope has one) becomes
the current body, and the old body is kept as history: a ``superseded`` record with its
validity interval (``valid_from``, ``valid_to``). The current record keeps its id and
``created_at``; only ``approved`` records ever reach a prompt. Keys are normalised with
:func:`kairox.memory.markers.normalize_key`, the same rule the marker extractor uses.

Proposals wait in the same table with status ``pending`` (so they survive a restart) and do not
touch the approved memory with the same key until they are approved: approving one supersedes
that memory (which keeps its id) and the proposal row is consumed. Rejected proposals are kept
with status ``rejected`` for the record. Forgetting a memory deletes its history with it.
Listings show approved memories unless asked otherwise.

:class:`~kairox.memory.base_store.MemoryStore` (re-exported here) is the API every store offers
and checks the arguments; :class:`~kairox.memory.records.MemoryRecord` is what comes back.
:class:`SqliteMemoryStore` lives in the same SQLite file as the event store (its own tables,
component ``memory`` in ``kairox_schema``), in WAL mode with short transactions, and keeps no
cache: two processes see each other's writes on their next read.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping
from dataclasses import fields
from datetime import UTC
from typing import Any, Final

from kairox.memory.base_store import MemoryStore, NewMemory
from kairox.memory.records import STATUSES, MemoryRecord, MemorySlot, Scope, Status
from kairox.store.sqlite import SqliteComponentStore

__all__ = [
    "MEMORY_SCHEMA_VERSION",
    "STATUSES",
    "MemoryRecord",
    "MemoryStore",
    "Scope",
    "SqliteMemoryStore",
    "Status",
]

MEMORY_SCHEMA_VERSION: Final = 2

_TABLE: Final = """(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        scope TEXT NOT NULL CHECK (scope IN ('session', 'user', 'workspace')),
        workspace_id TEXT,
        session_id TEXT,
        key TEXT,
        body TEXT NOT NULL CHECK (length(trim(body)) > 0),
        status TEXT NOT NULL
            CHECK (status IN ('pending', 'approved', 'rejected', 'superseded')),
        provenance TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        approved_at TEXT,
        valid_from TEXT,
        valid_to TEXT,
        CHECK (scope = 'session' OR key IS NOT NULL),
        CHECK (scope <> 'workspace' OR workspace_id IS NOT NULL),
        CHECK (scope <> 'session' OR session_id IS NOT NULL),
        CHECK (scope <> 'user' OR (workspace_id IS NULL AND session_id IS NULL)),
        CHECK (status <> 'superseded' OR (key IS NOT NULL AND valid_to IS NOT NULL))
    )"""

_MEMORY_DDL: Final = (
    f"CREATE TABLE IF NOT EXISTS memories {_TABLE}",
    # One live (approved, or pending) record per key and place; the others are history.
    """CREATE UNIQUE INDEX IF NOT EXISTS memories_user_key ON memories(status, key)
        WHERE scope = 'user' AND status IN ('approved', 'pending')""",
    """CREATE UNIQUE INDEX IF NOT EXISTS memories_workspace_key
        ON memories(status, workspace_id, key)
        WHERE scope = 'workspace' AND status IN ('approved', 'pending')""",
    """CREATE UNIQUE INDEX IF NOT EXISTS memories_session_key ON memories(status, session_id, key)
        WHERE scope = 'session' AND key IS NOT NULL AND status IN ('approved', 'pending')""",
    "CREATE INDEX IF NOT EXISTS memories_by_workspace ON memories(workspace_id, scope)",
    "CREATE INDEX IF NOT EXISTS memories_by_session ON memories(session_id, scope)",
)

# Version 1 had no history: the table is rebuilt (SQLite cannot widen a CHECK in place) with
# every row and id kept; an approved body became current when it was last written.
_V1_COLUMNS: Final = (
    "id, scope, workspace_id, session_id, key, body, status, provenance,"
    " created_at, updated_at, approved_at"
)
_MIGRATIONS: Final = {
    2: (
        *(
            f"DROP INDEX IF EXISTS {index}"
            for index in (
                "memories_user_key",
                "memories_workspace_key",
                "memories_session_key",
                "memories_by_workspace",
                "memories_by_session",
            )
        ),
        "ALTER TABLE memories RENAME TO memories_v1",
        f"CREATE TABLE memories {_TABLE}",
        f"INSERT INTO memories({_V1_COLUMNS}, valid_from)"
        f" SELECT {_V1_COLUMNS}, CASE WHEN status = 'approved' THEN updated_at END"
        " FROM memories_v1 ORDER BY id",
        # Ids of deleted memories are never handed out again.
        "INSERT INTO sqlite_sequence(name, seq) SELECT 'memories', seq FROM sqlite_sequence"
        " WHERE name = 'memories_v1'"
        " AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'memories')",
        "UPDATE sqlite_sequence SET seq = (SELECT max(seq) FROM sqlite_sequence"
        " WHERE name IN ('memories', 'memories_v1')) WHERE name = 'memories'",
        "DROP TABLE memories_v1",
    )
}

# The record's fields, in order: a row unpacks straight into a MemoryRecord.
_COLUMNS: Final = ", ".join(f.name for f in fields(MemoryRecord))


def _same_slot(slot: MemorySlot) -> tuple[str, tuple[Any, ...]]:
    """The WHERE clause (and its parameters) that finds the records in ``slot``."""
    if slot.scope == "user":
        return "scope = 'user' AND key = ?", (slot.key,)
    if slot.scope == "workspace":
        return "scope = 'workspace' AND workspace_id = ? AND key = ?", (slot.workspace_id, slot.key)
    return "scope = 'session' AND session_id = ? AND key = ?", (slot.session_id, slot.key)


class SqliteMemoryStore(SqliteComponentStore, MemoryStore):
    """:class:`MemoryStore` on the shared Kairox SQLite database (table ``memories``).

    One connection (its own, or a :class:`~kairox.store.sqlite.Database` shared with the event
    store), serialised by a lock; every write is one short ``BEGIN IMMEDIATE`` transaction so
    concurrent processes never interleave a read-modify-write. Inside the shared database's
    :meth:`~kairox.store.sqlite.Database.transaction`, a write joins that transaction instead.
    """

    component = "memory"
    schema_version = MEMORY_SCHEMA_VERSION
    schema = _MEMORY_DDL
    migrations = _MIGRATIONS

    # ----------------------------------------------------------------------------- writes

    def _write(self, memory: NewMemory) -> MemoryRecord:
        slot, status = memory.slot, memory.status
        provenance_json = _provenance_json(memory.provenance)
        now = self._now()
        approved_at = now if status == "approved" and slot.scope != "session" else None
        with self.database.transaction():
            existing = self._live_locked(slot, status) if slot.key is not None else None
            if existing is not None:
                valid_from = self._take_over_locked(existing, memory.body, now)
                self._conn.execute(
                    "UPDATE memories SET body = ?, provenance = ?, updated_at = ?,"
                    " approved_at = ?, valid_from = ?, workspace_id = COALESCE(?, workspace_id)"
                    " WHERE id = ?",
                    (
                        memory.body,
                        provenance_json,
                        now,
                        approved_at,
                        valid_from,
                        slot.workspace_id,
                        existing.id,
                    ),
                )
                memory_id = existing.id
            else:
                cursor = self._conn.execute(
                    "INSERT INTO memories(scope, workspace_id, session_id, key, body, status,"
                    " provenance, created_at, updated_at, approved_at, valid_from)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        slot.scope,
                        slot.workspace_id,
                        slot.session_id,
                        slot.key,
                        memory.body,
                        status,
                        provenance_json,
                        now,
                        now,
                        approved_at,
                        now if status == "approved" else None,
                    ),
                )
                memory_id = cursor.lastrowid
            return self._existing_locked(memory_id)

    def _decide(self, memory_id: int, status: str) -> MemoryRecord:
        now = self._now()
        with self.database.transaction():
            record = self._existing_locked(memory_id)
            if record.status == status:
                return record
            if record.status == "superseded":
                raise ValueError(f"memory {memory_id} is an earlier value kept as history")
            if status == "rejected":
                self._conn.execute(
                    "UPDATE memories SET status = 'rejected', updated_at = ?, approved_at = NULL"
                    " WHERE id = ?",
                    (now, memory_id),
                )
                return self._existing_locked(memory_id)
            # A person decided, whatever the scope: the record says when.
            target = self._live_locked(record.slot, "approved") if record.key else None
            if target is not None and target.id != memory_id:
                valid_from = self._take_over_locked(target, record.body, now)
                self._conn.execute(
                    "UPDATE memories SET body = ?, provenance = ?, updated_at = ?,"
                    " approved_at = ?, valid_from = ? WHERE id = ?",
                    (
                        record.body,
                        _provenance_json(record.provenance),
                        now,
                        now,
                        valid_from,
                        target.id,
                    ),
                )
                self._conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
                return self._existing_locked(target.id)
            self._conn.execute(
                "UPDATE memories SET status = 'approved', updated_at = ?, approved_at = ?,"
                " valid_from = ? WHERE id = ?",
                (now, now, now, memory_id),
            )
            return self._existing_locked(memory_id)

    def _replace_body(self, memory_id: int, body: str) -> MemoryRecord:
        now = self._now()
        with self.database.transaction():
            record = self._existing_locked(memory_id)
            valid_from = record.valid_from
            if record.status == "approved" and record.key is not None:
                valid_from = self._take_over_locked(record, body, now)
            self._conn.execute(
                "UPDATE memories SET body = ?, updated_at = ?, valid_from = ? WHERE id = ?",
                (body, now, valid_from, memory_id),
            )
            return self._existing_locked(memory_id)

    def forget(self, memory_id: int) -> bool:
        """Delete a record for good (an explicit user action); ``False`` if it did not exist.

        Forgetting a key's current memory deletes its earlier values too.
        """
        with self.database.transaction():
            record = self._get_locked(memory_id) if 0 <= memory_id < 2**63 else None
            if record is None:
                return False
            if record.status == "approved" and record.key is not None:
                clause, params = _same_slot(record.slot)
                self._conn.execute(
                    f"DELETE FROM memories WHERE {clause} AND status = 'superseded'", params
                )
            self._conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
        return True

    def _live_locked(self, slot: MemorySlot, status: str) -> MemoryRecord | None:
        """The pending or approved record in a keyed ``slot``, if any."""
        clause, params = _same_slot(slot)
        row = self._conn.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE {clause} AND status = ?", (*params, status)
        ).fetchone()
        return None if row is None else _row_to_record(row)

    def _take_over_locked(self, current: MemoryRecord, body: str, now: str) -> str | None:
        """Before ``current`` takes ``body``: keep its old body as history when it is the
        key's approved value and the body changes. Returns ``current``'s new ``valid_from``."""
        if current.status != "approved" or current.body == body:
            return current.valid_from
        self._conn.execute(
            "INSERT INTO memories(scope, workspace_id, session_id, key, body, status,"
            " provenance, created_at, updated_at, approved_at, valid_from, valid_to)"
            " SELECT scope, workspace_id, session_id, key, body, 'superseded', provenance,"
            " created_at, updated_at, approved_at, COALESCE(valid_from, updated_at), ?"
            " FROM memories WHERE id = ?",
            (now, current.id),
        )
        return now

    # ----------------------------------------------------------------------------- reads

    def get(self, memory_id: int) -> MemoryRecord | None:
        """The record with this id, whatever its status, or ``None``."""
        if not 0 <= memory_id < 2**63:  # no SQLite rowid; binding it would overflow
            return None
        with self._lock:
            return self._get_locked(memory_id)

    def _find(self, slot: MemorySlot, status: str) -> MemoryRecord | None:
        clause, params = _same_slot(slot)
        with self._lock:
            row = self._conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE {clause} AND status = ?"
                " ORDER BY id DESC LIMIT 1",
                (*params, status),
            ).fetchone()
        return None if row is None else _row_to_record(row)

    def _select(self, where: Mapping[str, str]) -> builtins.list[MemoryRecord]:
        # The column names come from MemoryStore.list, never from the caller.
        sql = f"SELECT {_COLUMNS} FROM memories"
        if where:
            sql += " WHERE " + " AND ".join(f"{column} = ?" for column in where)
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY id", list(where.values())).fetchall()
        return [_row_to_record(row) for row in rows]

    def _history(self, slot: MemorySlot) -> builtins.list[MemoryRecord]:
        clause, params = _same_slot(slot)
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE {clause}"
                " AND status IN ('superseded', 'approved')"
                " ORDER BY status = 'approved', valid_from, id",
                params,
            ).fetchall()
        return [_row_to_record(row) for row in rows]

    def _visible(self, workspace_id: str, session_id: str | None) -> builtins.list[MemoryRecord]:
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE status = 'approved' AND ("
                " scope = 'user'"
                " OR (scope = 'workspace' AND workspace_id = ?)"
                " OR (scope = 'session' AND session_id = ?))"
                " ORDER BY id",
                (workspace_id, session_id),
            ).fetchall()
        return [_row_to_record(row) for row in rows]

    # ----------------------------------------------------------------------------- plumbing

    def _now(self) -> str:
        moment = self._clock()
        if moment.tzinfo is None:
            raise ValueError("the memory store clock must return timezone-aware datetimes")
        return moment.astimezone(UTC).isoformat(timespec="microseconds")

    def _get_locked(self, memory_id: int) -> MemoryRecord | None:
        row = self._conn.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,)
        ).fetchone()
        return None if row is None else _row_to_record(row)

    def _existing_locked(self, memory_id: int) -> MemoryRecord:
        record = self._get_locked(memory_id)
        if record is None:
            raise KeyError(f"no memory with id {memory_id}")
        return record


def _provenance_json(provenance: dict[str, Any]) -> str:
    try:
        return json.dumps(provenance, ensure_ascii=False, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"memory provenance is not JSON-serialisable: {exc}") from exc


def _row_to_record(row: tuple[Any, ...]) -> MemoryRecord:
    *columns, provenance = row  # _COLUMNS: the record's fields in order, provenance last
    return MemoryRecord(*columns, provenance=json.loads(provenance))
