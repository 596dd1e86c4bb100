"""The :class:`MemoryStore` API, and the argument checks every memory store shares.

A store subclasses :class:`MemoryStore` and implements its storage primitives (``_write``,
``_find``, ``_select``, ...) on arguments already checked and normalised here; the public
methods, their signatures and their errors are written once, in this module.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kairox.memory.marker_rules import SCOPES, normalize_key
from kairox.memory.records import STATUSES, MemoryRecord, MemorySlot

__all__ = ["MemoryStore", "NewMemory", "place"]


@dataclass(frozen=True, slots=True)
class NewMemory:
    """A checked write: the record to insert, or to overwrite the live one in its slot with."""

    status: str
    slot: MemorySlot
    body: str
    provenance: dict[str, Any]
    """The caller's provenance with the origin filled in (``session_id``, ``workspace_id``,
    ``injection_warning``)."""


class MemoryStore(ABC):
    """What the rest of Kairox needs from a memory store."""

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
        """Write an approved memory; under a key that has one in the same place, the new body
        becomes current and the old one is kept as ``superseded`` history (see :meth:`history`)."""
        return self._write(_new("approved", scope, body, key, workspace_id, session_id, provenance))

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
        return self._write(_new("pending", scope, body, key, workspace_id, session_id, provenance))

    def set_status(self, memory_id: int, status: str) -> MemoryRecord:
        """Approve or reject a record and return the result.

        Approving a record whose key already has an approved memory in the same place makes
        its body that memory's current value (the memory keeps its id and ``created_at``; the
        old body stays as history) and removes the proposal row; the returned record is the
        surviving one. Rejecting keeps the row, status ``rejected``. Nothing goes back to
        ``pending``, and nothing is set ``superseded`` by hand.
        """
        status = check_status(status)
        if status == "pending":
            raise ValueError("a memory cannot be set back to pending")
        if status == "superseded":
            raise ValueError("a memory is superseded by a newer value, not by hand")
        return self._decide(memory_id, status)

    def update_body(self, memory_id: int, body: str) -> MemoryRecord:
        """Replace the body of any record (an edit in the UI); bumps ``updated_at``. A keyed
        approved memory keeps its old body as history."""
        return self._replace_body(memory_id, check_body(body))

    @abstractmethod
    def forget(self, memory_id: int) -> bool:
        """Delete a record for good (an explicit user action); ``False`` if it did not exist."""

    # ----------------------------------------------------------------------------- reads

    @abstractmethod
    def get(self, memory_id: int) -> MemoryRecord | None:
        """The record with this id, whatever its status, or ``None``."""

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
        scope = check_scope(scope)
        status = check_status(status)
        return self._find(_keyed_slot("get_by_key()", scope, key, workspace_id, session_id), status)

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
        where: dict[str, str] = {}
        if scope is not None:
            where["scope"] = check_scope(scope)
        if workspace_id is not None:
            where["workspace_id"] = workspace_id
        if session_id is not None:
            where["session_id"] = session_id
        if status is not None:
            where["status"] = check_status(status)
        return self._select(where)

    def history(
        self,
        scope: str,
        key: str,
        workspace_id: str | None = None,
        session_id: str | None = None,
    ) -> builtins.list[MemoryRecord]:
        """The values a key has had in this place: the ``superseded`` ones oldest first, each
        with its ``valid_from`` and ``valid_to``, then the current (``approved``) one."""
        slot = _keyed_slot("history()", check_scope(scope), key, workspace_id, session_id)
        return self._history(slot)

    def visible_to(
        self, workspace_id: str, session_id: str | None = None
    ) -> builtins.list[MemoryRecord]:
        """Approved memories a session in ``workspace_id`` may see.

        All user memories, the memories of this workspace, and those of this session; never
        another workspace's or another session's.
        """
        if not workspace_id:
            raise ValueError("visible_to() needs a workspace_id")
        return self._visible(workspace_id, session_id)

    # ----------------------------------------------------------------------------- primitives

    @abstractmethod
    def _write(self, memory: NewMemory) -> MemoryRecord:
        """Insert ``memory``, or overwrite the record of its status in its slot (keeping its
        id and ``created_at``; an approved body it replaces is kept as history)."""

    @abstractmethod
    def _find(self, slot: MemorySlot, status: str) -> MemoryRecord | None:
        """The newest record of ``status`` in ``slot``."""

    @abstractmethod
    def _select(self, where: Mapping[str, str]) -> builtins.list[MemoryRecord]:
        """The records whose columns equal every value in ``where``, oldest first."""

    @abstractmethod
    def _history(self, slot: MemorySlot) -> builtins.list[MemoryRecord]:
        """What :meth:`history` returns, for a checked ``slot``."""

    @abstractmethod
    def _visible(self, workspace_id: str, session_id: str | None) -> builtins.list[MemoryRecord]:
        """What :meth:`visible_to` returns, for a checked ``workspace_id``."""

    @abstractmethod
    def _decide(self, memory_id: int, status: str) -> MemoryRecord:
        """What :meth:`set_status` does, for ``approved`` or ``rejected``."""

    @abstractmethod
    def _replace_body(self, memory_id: int, body: str) -> MemoryRecord:
        """What :meth:`update_body` does, for a checked body; ``KeyError`` if no such record."""


# --------------------------------------------------------------------------------- checks


def check_scope(scope: object) -> str:
    if scope not in SCOPES:
        raise ValueError(f"unknown memory scope {scope!r}; expected one of {', '.join(SCOPES)}")
    return str(scope)


def check_status(status: object) -> str:
    if status not in STATUSES:
        raise ValueError(f"unknown memory status {status!r}; expected one of {', '.join(STATUSES)}")
    return str(status)


def check_body(body: object) -> str:
    if not isinstance(body, str):
        raise TypeError(f"memory body must be a string, not {type(body).__name__}")
    stripped = body.strip()
    if not stripped:
        raise ValueError("memory body must not be empty")
    return stripped


def check_key(scope: str, key: str | None) -> str | None:
    if key is None or (isinstance(key, str) and not key.strip()):
        if scope != "session":
            raise ValueError(f"a {scope} memory needs a key, so later writes overwrite it")
        return None
    try:
        return normalize_key(key)
    except ValueError as exc:
        raise ValueError(f"invalid memory key: {exc}") from None


def _keyed_slot(
    caller: str, scope: str, key: str | None, workspace_id: str | None, session_id: str | None
) -> MemorySlot:
    """The slot of ``key`` in a checked ``scope``'s place; ``caller`` (which needs a key, even
    for a session memory) names itself in the error when none is given."""
    normal = check_key(scope, key)
    if normal is None:
        raise ValueError(f"{caller} needs a key")
    return MemorySlot(scope, normal, *place(scope, workspace_id, session_id))


def place(
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


def _new(
    status: str,
    scope: str,
    body: str,
    key: str | None,
    workspace_id: str | None,
    session_id: str | None,
    provenance: dict[str, Any] | None,
) -> NewMemory:
    """The checked form of a :meth:`MemoryStore.put` or :meth:`MemoryStore.propose` call."""
    scope = check_scope(scope)
    body = check_body(body)
    key = check_key(scope, key)
    slot = MemorySlot(scope, key, *place(scope, workspace_id, session_id))
    origin = dict(provenance or {})
    if session_id:
        origin.setdefault("session_id", session_id)
    if workspace_id:
        origin.setdefault("workspace_id", workspace_id)
    origin.setdefault("injection_warning", False)
    return NewMemory(status, slot, body, origin)
