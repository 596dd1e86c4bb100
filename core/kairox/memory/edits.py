"""What a person does to memories directly: write, look up, edit, forget, read a key's history.

:class:`MemoryEdits` is the part of :class:`~kairox.memory.approvals.MemoryApprovals` that
needs no proposal: the person is the approver. Every change is one store write and one event
(``MemoryAccepted``, ``MemoryEdited``, ``MemoryForgotten``, naming the ``actor``), in one
transaction when the store and the log share a database, and every body is held to
``[memory] max_body_chars`` as a proposal's is.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from kairox.memory.base_store import MemoryStore
from kairox.memory.limits import ProposalLimits
from kairox.memory.proposals import (
    USER_ACTIONS_SESSION,
    MemoryInputError,
    MemoryNotFound,
    about,
    checked_key,
    checked_text,
    log_of,
    too_long,
)
from kairox.memory.records import MemoryRecord
from kairox.store.events import MemoryAccepted, MemoryEdited, MemoryForgotten, SqliteEventStore
from kairox.store.sqlite import Database

__all__ = ["MemoryEdits"]


class MemoryEdits:
    """A person's direct changes to the memories in ``store``, logged to ``events``."""

    store: MemoryStore
    events: SqliteEventStore
    limits: ProposalLimits

    def _atomic(self) -> AbstractContextManager[object]:
        """One transaction over the store and the log, when they share a database."""
        shared = getattr(self.store, "database", None)
        if isinstance(shared, Database) and shared is getattr(self.events, "database", None):
            return shared.transaction()
        return nullcontext()

    def _body(self, body: str, what: str) -> str:
        """A body a person wrote, checked: text, not empty, within the bound."""
        if not checked_text(body, what).strip():
            if what == "body":
                raise MemoryInputError("the body is empty; write what should be remembered")
            raise MemoryInputError("the new body is empty; use `forget` to delete a memory")
        reason = too_long(body, self.limits.max_body_chars)
        if reason is not None:
            raise MemoryInputError(reason)
        return body

    def set(
        self, scope: str, key: str, body: str, *, workspace_id: str, actor: str = "api"
    ) -> MemoryRecord:
        """Write a user or workspace memory directly (the person is the approver)."""
        if scope not in ("user", "workspace"):
            raise MemoryInputError(
                f"a memory you write yourself is 'user' or 'workspace', not {scope!r}"
            )
        body = self._body(body, "body")
        same = self.unchanged(scope, key, body, workspace_id=workspace_id)
        if same is not None:  # nothing to write: no new `updated`, no event
            return same
        with self._atomic():
            record = self.store.put(
                scope,
                body,
                key=checked_key(key),
                workspace_id=workspace_id if scope == "workspace" else None,
                provenance={"written_by": "user", "actor": actor},
            )
            self.events.append(
                USER_ACTIONS_SESSION,
                workspace_id,
                MemoryAccepted(**about(record), actor=actor),
            )
        return record

    def unchanged(
        self, scope: str, key: str, body: str, *, workspace_id: str
    ) -> MemoryRecord | None:
        """The approved ``scope`` memory under ``key`` when it already holds ``body`` (writing
        it again would change nothing), else ``None``."""
        record = self.store.get_by_key(
            scope, checked_key(key), workspace_id=workspace_id if scope == "workspace" else None
        )
        return record if record is not None and record.body == body else None

    def find(self, key: str, *, workspace_id: str, scope: str | None = None) -> MemoryRecord:
        """The approved memory with ``key``: this workspace's first, then the user's."""
        normalised = checked_key(key)
        scopes = [scope] if scope else ["workspace", "user"]
        for candidate in scopes:
            record = self.store.get_by_key(
                candidate,
                normalised,
                workspace_id=workspace_id if candidate == "workspace" else None,
            )
            if record is not None:
                return record
        where = scope or "workspace or user"
        raise MemoryNotFound(
            f"no {where} memory with key {normalised!r}; `kairox memory list` shows the keys"
        )

    def edit(
        self,
        key: str,
        body: str,
        *,
        workspace_id: str,
        scope: str | None = None,
        actor: str = "api",
    ) -> MemoryRecord:
        """Replace the body stored under ``key`` (the old body stays in its history)."""
        self._body(body, "new body")
        record = self.find(key, workspace_id=workspace_id, scope=scope)
        return self.edit_by_id(record.id, body, actor=actor)

    def edit_by_id(self, memory_id: int, body: str, *, actor: str = "api") -> MemoryRecord:
        """Replace the body of memory ``memory_id`` (session memories may have no key)."""
        body = self._body(body, "new body")
        with self._atomic():
            before = self.store.get(memory_id)
            if before is None:
                raise MemoryNotFound(f"no memory {memory_id}; `kairox memory list` shows the ids")
            edited = self.store.update_body(memory_id, body)
            self.events.append(
                *log_of(before, by_person=True),
                MemoryEdited(
                    **about(before),
                    body=edited.body,
                    previous_body=before.body,
                    actor=actor,
                ),
            )
        return edited

    def forget(
        self, key: str, *, workspace_id: str, scope: str | None = None, actor: str = "api"
    ) -> MemoryRecord:
        """Delete the memory stored under ``key``, and its history; returns what was deleted."""
        record = self.find(key, workspace_id=workspace_id, scope=scope)
        return self.forget_by_id(record.id, actor=actor)

    def forget_by_id(self, memory_id: int, *, actor: str = "api") -> MemoryRecord:
        """Delete memory ``memory_id``; returns what was deleted."""
        with self._atomic():
            before = self.store.get(memory_id)
            if before is None or not self.store.forget(memory_id):
                raise MemoryNotFound(f"no memory {memory_id}; `kairox memory list` shows the ids")
            self.events.append(
                *log_of(before, by_person=True),
                MemoryForgotten(
                    **about(before),
                    previous_body=before.body,
                    actor=actor,
                ),
            )
        return before

    def history(
        self, key: str, *, workspace_id: str, scope: str | None = None
    ) -> list[MemoryRecord]:
        """The values the memory under ``key`` has had (this workspace's first, then the
        user's): the superseded ones oldest first with their validity, the current one last."""
        current = self.find(key, workspace_id=workspace_id, scope=scope)
        return self.store.history(
            current.scope, current.key or "", workspace_id=current.workspace_id
        )
