"""Scoped, durable memories: the :class:`MemoryStore` protocol and :class:`SqliteMemoryStore`.

A memory is a short fact the user (or, for session scope, the session) chose to keep:

* ``user`` memories follow the user into every session and workspace;
* ``workspace`` memories belong to one workspace and never appear in another;
* ``session`` memories belong to one session.

Keys make writes stable: a write with a key that already exists in the same place (same scope,
and the same workspace or session where the scope has one) overwrites the body and bumps
``updated_at`` but keeps ``created_at``. Keys are normalised with
:func:`kairox.memory.markers.normalize_key`, the same rule the marker extractor uses.

Proposals wait in the same table with status ``pending`` (so they survive a restart) and do not
touch the approved memory with the same key until they are approved: approving one overwrites
that memory (which keeps its id) and the proposal row is consumed. Rejected proposals are kept
with status ``rejected`` for the record. Listings show approved memories unless asked otherwise.

:class:`SqliteMemoryStore` lives in the same SQLite file as the event store (its own tables,
component ``memory`` in ``kairox_schema``), in WAL mode with short transactions, and keeps no
cache: two processes see each other's writes on their next read.
"""

from __future__ import annotations

import builtins
import json
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any, Final, Literal, Protocol, runtime_checkable

from kairox.memory.markers import SCOPES, normalize_key
from kairox.storage import SqliteComponentStore

__all__ = [
    "MEMORY_SCHEMA_VERSION",
    "STATUSES",
    "MemoryRecord",
    "MemoryStore",
    "Scope",
    "SqliteMemoryStore",
    "Status",
]

Scope = Literal["session", "user", "workspace"]
Status = Literal["pending", "approved", "rejected"]
STATUSES: Final = ("pending", "approved", "rejected")
MEMORY_SCHEMA_VERSION: Final = 1


@dataclass(frozen=True)
class MemoryRecord:
    """One stored memory or proposal."""

    id: int
    scope: str
    key: str | None
    body: str
    status: str
    """``pending``, ``approved`` or ``rejected``."""
    workspace_id: str | None
    """Set for workspace memories (and session memories whose workspace is known)."""
    session_id: str | None
    """Set for session memories only."""
    created_at: str
    updated_at: str
    approved_at: str | None
    """When a user or workspace memory was approved; ``None`` for session memories."""
    provenance: dict[str, Any] = field(default_factory=dict)
    """Where it came from: ``session_id``, ``workspace_id``, ``event_id``/``turn_id``,
    ``injection_warning``."""

    @property
    def injection_warning(self) -> bool:
        """The proposing turn's prompt held unvetted text, so this may be prompt injection."""
        return bool(self.provenance.get("injection_warning", False))

    @property
    def tainted_by(self) -> list[str]:
        """What tainted the proposing turn (``tool output``, ``workspace:<source>``,
        ``knowledge_base:<id>``); records from before sources were named say ``tool output``."""
        named = self.provenance.get("tainted_by")
        if isinstance(named, list) and named:
            return [str(n) for n in named]
        return ["tool output"] if self.injection_warning else []

    def as_json(self) -> dict[str, Any]:
        """The record as the CLI's ``--json`` and the web API show it."""
        return {
            "id": self.id,
            "scope": self.scope,
            "key": self.key,
            "body": self.body,
            "status": self.status,
            "workspace_id": self.workspace_id,
            "session_id": self.session_id,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "approved_at": self.approved_at,
            "injection_warning": self.injection_warning,
            "tainted_by": self.tainted_by,
            "provenance": self.provenance,
        }


@runtime_checkable
class MemoryStore(Protocol):
    """What the rest of Kairox needs from a memory store."""

    def put(
        self,
        scope: str,
        body: str,
        *,
        key: str | None = None,
        workspace_id: str | None = None,
        session_id: str | None = None,
        provenance: dict[str, Any] | None = None,
    ) -> MemoryRecord:
        """Write an approved memory (overwriting the one with the same key)."""
        ...

    def propose(
        self,
        scope: str,
        body: str,
        *,
        key: str | None = None,
        workspace_id: str | None = None,
        session_id: str | None = None,
        provenance: dict[str, Any] | None = None,
    ) -> MemoryRecord:
        """Record a pending proposal (replacing a pending one with the same key)."""
        ...

    def get(self, memory_id: int) -> MemoryRecord | None:
        """The record with this id, whatever its status."""
        ...

    def get_by_key(
        self,
        scope: str,
        key: str,
        workspace_id: str | None = None,
        session_id: str | None = None,
        *,
        status: str = "approved",
    ) -> MemoryRecord | None:
        """The record with this key in this place."""
        ...

    def list(
        self,
        scope: str | None = None,
        workspace_id: str | None = None,
        session_id: str | None = None,
        status: str | None = "approved",
    ) -> builtins.list[MemoryRecord]:
        """Records matching every given filter (``status=None``: any status)."""
        ...

    def visible_to(
        self, workspace_id: str, session_id: str | None = None
    ) -> builtins.list[MemoryRecord]:
        """Approved user memories, this workspace's, and this session's."""
        ...

    def set_status(self, memory_id: int, status: str) -> MemoryRecord:
        """Approve or reject a record; returns the resulting record."""
        ...

    def update_body(self, memory_id: int, body: str) -> MemoryRecord:
        """Replace a record's body (a user edit)."""
        ...

    def forget(self, memory_id: int) -> bool:
        """Delete a record; ``False`` if there was none."""
        ...


_MEMORY_DDL: Final = (
    """CREATE TABLE IF NOT EXISTS memories (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        scope TEXT NOT NULL CHECK (scope IN ('session', 'user', 'workspace')),
        workspace_id TEXT,
        session_id TEXT,
        key TEXT,
        body TEXT NOT NULL CHECK (length(trim(body)) > 0),
        status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
        provenance TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        approved_at TEXT,
        CHECK (scope = 'session' OR key IS NOT NULL),
        CHECK (scope <> 'workspace' OR workspace_id IS NOT NULL),
        CHECK (scope <> 'session' OR session_id IS NOT NULL),
        CHECK (scope <> 'user' OR (workspace_id IS NULL AND session_id IS NULL))
    )""",
    # One live (approved, or pending) record per key and place; rejected ones are history.
    """CREATE UNIQUE INDEX IF NOT EXISTS memories_user_key ON memories(status, key)
        WHERE scope = 'user' AND status <> 'rejected'""",
    """CREATE UNIQUE INDEX IF NOT EXISTS memories_workspace_key
        ON memories(status, workspace_id, key)
        WHERE scope = 'workspace' AND status <> 'rejected'""",
    """CREATE UNIQUE INDEX IF NOT EXISTS memories_session_key ON memories(status, session_id, key)
        WHERE scope = 'session' AND key IS NOT NULL AND status <> 'rejected'""",
    "CREATE INDEX IF NOT EXISTS memories_by_workspace ON memories(workspace_id, scope)",
    "CREATE INDEX IF NOT EXISTS memories_by_session ON memories(session_id, scope)",
)

_COLUMNS: Final = (
    "id, scope, key, body, status, workspace_id, session_id, created_at, updated_at,"
    " approved_at, provenance"
)


def _check_scope(scope: object) -> str:
    if scope not in SCOPES:
        raise ValueError(f"unknown memory scope {scope!r}; expected one of {', '.join(SCOPES)}")
    return str(scope)


def _check_status(status: object) -> str:
    if status not in STATUSES:
        raise ValueError(f"unknown memory status {status!r}; expected one of {', '.join(STATUSES)}")
    return str(status)


def _check_body(body: object) -> str:
    if not isinstance(body, str):
        raise TypeError(f"memory body must be a string, not {type(body).__name__}")
    stripped = body.strip()
    if not stripped:
        raise ValueError("memory body must not be empty")
    return stripped


def _check_key(scope: str, key: str | None) -> str | None:
    if key is None or (isinstance(key, str) and not key.strip()):
        if scope != "session":
            raise ValueError(f"a {scope} memory needs a key, so later writes overwrite it")
        return None
    try:
        return normalize_key(key)
    except ValueError as exc:
        raise ValueError(f"invalid memory key: {exc}") from None


def _place(
    scope: str, workspace_id: str | None, session_id: str | None
) -> tuple[str | None, str | None]:
    """The (workspace_id, session_id) columns for a scope.

    Ids that don't bound a scope are not stored on the row (a user memory tagged with a workspace
    would look workspace-bound); callers' ids still go into provenance as the origin.
    """
    if scope == "workspace":
        if not workspace_id:
            raise ValueError("a workspace memory needs a workspace_id")
        return workspace_id, None
    if scope == "session":
        if not session_id:
            raise ValueError("a session memory needs a session_id")
        return workspace_id or None, session_id
    return None, None


def _same_key_clause(scope: str) -> str:
    if scope == "user":
        return "scope = 'user' AND key = ?"
    if scope == "workspace":
        return "scope = 'workspace' AND workspace_id = ? AND key = ?"
    return "scope = 'session' AND session_id = ? AND key = ?"


def _same_key_params(
    scope: str, key: str, workspace_id: str | None, session_id: str | None
) -> tuple[Any, ...]:
    if scope == "user":
        return (key,)
    if scope == "workspace":
        return (workspace_id, key)
    return (session_id, key)


class SqliteMemoryStore(SqliteComponentStore):
    """:class:`MemoryStore` on the shared Kairox SQLite database (table ``memories``).

    One connection (its own, or a :class:`~kairox.storage.Database` shared with the event
    store), serialised by a lock; every write is one short ``BEGIN IMMEDIATE`` transaction so
    concurrent processes never interleave a read-modify-write. Inside the shared database's
    :meth:`~kairox.storage.Database.transaction`, a write joins that transaction instead.
    """

    component = "memory"
    schema_version = MEMORY_SCHEMA_VERSION
    schema = _MEMORY_DDL

    # ----------------------------------------------------------------------------- writes

    def put(
        self,
        scope: str,
        body: str,
        *,
        key: str | None = None,
        workspace_id: str | None = None,
        session_id: str | None = None,
        provenance: dict[str, Any] | None = None,
    ) -> MemoryRecord:
        """Write an approved memory; the same key in the same place overwrites the body."""
        return self._write("approved", scope, body, key, workspace_id, session_id, provenance)

    def propose(
        self,
        scope: str,
        body: str,
        *,
        key: str | None = None,
        workspace_id: str | None = None,
        session_id: str | None = None,
        provenance: dict[str, Any] | None = None,
    ) -> MemoryRecord:
        """Record a pending proposal; a pending one with the same key and place is replaced.

        The approved memory with that key, if any, is untouched until :meth:`set_status`.
        """
        return self._write("pending", scope, body, key, workspace_id, session_id, provenance)

    def _write(
        self,
        status: str,
        scope: str,
        body: str,
        key: str | None,
        workspace_id: str | None,
        session_id: str | None,
        provenance: dict[str, Any] | None,
    ) -> MemoryRecord:
        scope = _check_scope(scope)
        body = _check_body(body)
        key = _check_key(scope, key)
        ws_col, sid_col = _place(scope, workspace_id, session_id)
        origin = dict(provenance or {})
        if session_id:
            origin.setdefault("session_id", session_id)
        if workspace_id:
            origin.setdefault("workspace_id", workspace_id)
        origin.setdefault("injection_warning", False)
        provenance_json = _provenance_json(origin)
        now = self._now()
        approved_at = now if status == "approved" and scope != "session" else None
        with self.database.transaction():
            existing = None
            if key is not None:
                existing = self._conn.execute(
                    f"SELECT id FROM memories WHERE {_same_key_clause(scope)} AND status = ?",
                    (*_same_key_params(scope, key, ws_col, sid_col), status),
                ).fetchone()
            if existing is not None:
                memory_id = existing[0]
                self._conn.execute(
                    "UPDATE memories SET body = ?, provenance = ?, updated_at = ?,"
                    " approved_at = ?, workspace_id = COALESCE(?, workspace_id) WHERE id = ?",
                    (body, provenance_json, now, approved_at, ws_col, memory_id),
                )
            else:
                cursor = self._conn.execute(
                    "INSERT INTO memories(scope, workspace_id, session_id, key, body, status,"
                    " provenance, created_at, updated_at, approved_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        scope,
                        ws_col,
                        sid_col,
                        key,
                        body,
                        status,
                        provenance_json,
                        now,
                        now,
                        approved_at,
                    ),
                )
                memory_id = cursor.lastrowid
            record = self._get_locked(memory_id)
        assert record is not None
        return record

    def set_status(self, memory_id: int, status: str) -> MemoryRecord:
        """Approve or reject a record and return the result.

        Approving a record whose key already has an approved memory in the same place overwrites
        that memory (keeping its id and ``created_at``) and removes the proposal row; the returned
        record is the surviving one. Rejecting keeps the row, status ``rejected``. Nothing goes
        back to ``pending``.
        """
        status = _check_status(status)
        if status == "pending":
            raise ValueError("a memory cannot be set back to pending")
        now = self._now()
        with self.database.transaction():
            record = self._get_locked(memory_id)
            if record is None:
                raise KeyError(f"no memory with id {memory_id}")
            if record.status == status:
                return record
            if status == "rejected":
                self._conn.execute(
                    "UPDATE memories SET status = 'rejected', updated_at = ?, approved_at = NULL"
                    " WHERE id = ?",
                    (now, memory_id),
                )
                result = self._get_locked(memory_id)
            else:
                approved_at = None if record.scope == "session" else now
                target = None
                if record.key is not None:
                    target = self._conn.execute(
                        f"SELECT id FROM memories WHERE {_same_key_clause(record.scope)}"
                        " AND status = 'approved' AND id <> ?",
                        (
                            *_same_key_params(
                                record.scope, record.key, record.workspace_id, record.session_id
                            ),
                            memory_id,
                        ),
                    ).fetchone()
                if target is not None:
                    self._conn.execute(
                        "UPDATE memories SET body = ?, provenance = ?, updated_at = ?,"
                        " approved_at = ? WHERE id = ?",
                        (
                            record.body,
                            _provenance_json(record.provenance),
                            now,
                            approved_at,
                            target[0],
                        ),
                    )
                    self._conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
                    result = self._get_locked(target[0])
                else:
                    self._conn.execute(
                        "UPDATE memories SET status = 'approved', updated_at = ?, approved_at = ?"
                        " WHERE id = ?",
                        (now, approved_at, memory_id),
                    )
                    result = self._get_locked(memory_id)
        assert result is not None
        return result

    def update_body(self, memory_id: int, body: str) -> MemoryRecord:
        """Replace the body of any record (an edit in the UI); bumps ``updated_at``."""
        body = _check_body(body)
        with self.database.transaction():
            cursor = self._conn.execute(
                "UPDATE memories SET body = ?, updated_at = ? WHERE id = ?",
                (body, self._now(), memory_id),
            )
            if cursor.rowcount == 0:
                raise KeyError(f"no memory with id {memory_id}")
            record = self._get_locked(memory_id)
        assert record is not None
        return record

    def forget(self, memory_id: int) -> bool:
        """Delete a record for good (an explicit user action); ``False`` if it did not exist."""
        with self.database.transaction():
            cursor = self._conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
        return cursor.rowcount > 0

    # ----------------------------------------------------------------------------- reads

    def get(self, memory_id: int) -> MemoryRecord | None:
        """The record with this id, whatever its status, or ``None``."""
        if not 0 <= memory_id < 2**63:  # no SQLite rowid; binding it would overflow
            return None
        with self._lock:
            return self._get_locked(memory_id)

    def get_by_key(
        self,
        scope: str,
        key: str,
        workspace_id: str | None = None,
        session_id: str | None = None,
        *,
        status: str = "approved",
    ) -> MemoryRecord | None:
        """The record with this (normalised) key in this place and status, or ``None``."""
        scope = _check_scope(scope)
        status = _check_status(status)
        normal = _check_key(scope, key)
        if normal is None:
            raise ValueError("get_by_key() needs a key")
        ws_col, sid_col = _place(scope, workspace_id, session_id)
        with self._lock:
            row = self._conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE {_same_key_clause(scope)} AND status = ?"
                " ORDER BY id DESC LIMIT 1",
                (*_same_key_params(scope, normal, ws_col, sid_col), status),
            ).fetchone()
        return None if row is None else _row_to_record(row)

    def list(
        self,
        scope: str | None = None,
        workspace_id: str | None = None,
        session_id: str | None = None,
        status: str | None = "approved",
    ) -> builtins.list[MemoryRecord]:
        """Records matching every given filter, oldest first; ``status=None`` means any status.

        Filters compare the stored columns, so ``workspace_id="w"`` lists w's workspace (and
        session) memories and never another workspace's; user memories belong to no workspace
        (use :meth:`visible_to` for everything a session sees).
        """
        where: builtins.list[str] = []
        params: builtins.list[Any] = []
        if scope is not None:
            where.append("scope = ?")
            params.append(_check_scope(scope))
        if workspace_id is not None:
            where.append("workspace_id = ?")
            params.append(workspace_id)
        if session_id is not None:
            where.append("session_id = ?")
            params.append(session_id)
        if status is not None:
            where.append("status = ?")
            params.append(_check_status(status))
        sql = f"SELECT {_COLUMNS} FROM memories"
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY id", params).fetchall()
        return [_row_to_record(row) for row in rows]

    def visible_to(
        self, workspace_id: str, session_id: str | None = None
    ) -> builtins.list[MemoryRecord]:
        """Approved memories a session in ``workspace_id`` may see.

        All user memories, the memories of this workspace, and those of this session; never
        another workspace's or another session's.
        """
        if not workspace_id:
            raise ValueError("visible_to() needs a workspace_id")
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


def _provenance_json(provenance: dict[str, Any]) -> str:
    try:
        return json.dumps(provenance, ensure_ascii=False, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"memory provenance is not JSON-serialisable: {exc}") from exc


def _row_to_record(row: tuple[Any, ...]) -> MemoryRecord:
    (
        memory_id,
        scope,
        key,
        body,
        status,
        workspace_id,
        session_id,
        created_at,
        updated_at,
        approved_at,
        provenance,
    ) = row
    return MemoryRecord(
        id=memory_id,
        scope=scope,
        key=key,
        body=body,
        status=status,
        workspace_id=workspace_id,
        session_id=session_id,
        created_at=created_at,
        updated_at=updated_at,
        approved_at=approved_at,
        provenance=json.loads(provenance),
    )
