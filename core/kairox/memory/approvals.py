"""The approval flow: what happens to the memories a model proposes, and to the user's edits.

Session memories are accepted at once (``MemoryProposed`` + ``MemoryAccepted``). User
and workspace memories wait as pending proposals until a person approves or rejects
them; pending proposals live in the store, so they survive a restart. Malformed markers
and proposals over the per-turn cap are rejected with a reason and recorded as
``MemoryRejected`` events; nothing is silently dropped or downgraded. A proposal made
in a turn whose context held tool output carries an injection warning.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kairox.errors import KairoxError
from kairox.events import MemoryAccepted, MemoryProposed, MemoryRejected, SqliteEventStore
from kairox.memory.markers import MemoryMarker, RejectedMarker, normalize_key
from kairox.memory.store import MemoryRecord, MemoryStore

DEFAULT_MAX_PROPOSALS_PER_TURN = 5
# Events of actions a person takes outside any chat session (the CLI, the web page).
USER_ACTIONS_SESSION = "kairox-user-actions"


class MemoryNotFound(KairoxError, LookupError):
    """No memory or proposal matches; the message says what was looked for."""


class MemoryInputError(KairoxError, ValueError):
    """A key, scope or body a person typed is not valid; the message says why."""


def _key(key: str) -> str:
    try:
        return normalize_key(key)
    except ValueError as exc:
        raise MemoryInputError(
            f"{exc}; keys are short dotted names such as 'editor.font' or 'commit.style'"
        ) from exc


@dataclass
class TurnProposals:
    """What became of the markers of one turn."""

    accepted: list[MemoryRecord] = field(default_factory=list)
    pending: list[MemoryRecord] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (raw text, reason)


class MemoryApprovals:
    """Applies the approval rules on top of a memory store and the event log.

    :param max_proposals_per_turn: markers beyond this many in one turn are rejected
        with a reason (a model that floods proposals is more likely confused or steered).
    """

    def __init__(
        self,
        store: MemoryStore,
        events: SqliteEventStore,
        *,
        max_proposals_per_turn: int = DEFAULT_MAX_PROPOSALS_PER_TURN,
    ) -> None:
        if max_proposals_per_turn < 0:
            raise ValueError("max_proposals_per_turn must be >= 0")
        self.store = store
        self.events = events
        self.max_proposals_per_turn = max_proposals_per_turn

    # -- proposals from a model turn ------------------------------------------------

    def handle_turn(
        self,
        markers: Sequence[MemoryMarker],
        rejected: Sequence[RejectedMarker],
        *,
        session_id: str,
        workspace_id: str,
        turn_id: str | None = None,
        context_had_tool_output: bool = False,
    ) -> TurnProposals:
        """Record one turn's markers: accept, queue or reject each, with events."""
        outcome = TurnProposals()
        for marker in rejected:
            self._reject_marker(marker.raw, marker.reason, session_id, workspace_id)
            outcome.rejected.append((marker.raw, marker.reason))
        for number, marker in enumerate(markers, start=1):
            if number > self.max_proposals_per_turn:
                reason = (
                    f"more than {self.max_proposals_per_turn} memory proposals in one turn; "
                    "the rest were not kept"
                )
                self._reject_marker(marker.raw, reason, session_id, workspace_id, marker)
                outcome.rejected.append((marker.raw, reason))
                continue
            provenance = {
                "session_id": session_id,
                "workspace_id": workspace_id,
                "turn_id": turn_id,
                "injection_warning": context_had_tool_output,
            }
            place = {
                "workspace_id": workspace_id if marker.scope != "user" else None,
                "session_id": session_id if marker.scope == "session" else None,
            }
            if marker.scope == "session":
                record = self.store.put(
                    "session", marker.body, key=marker.key, provenance=provenance, **place
                )
            else:
                record = self.store.propose(
                    marker.scope, marker.body, key=marker.key, provenance=provenance, **place
                )
            self.events.append(
                session_id,
                workspace_id,
                MemoryProposed(
                    scope=marker.scope,
                    body=marker.body,
                    key=marker.key,
                    memory_id=record.id,
                    injection_warning=context_had_tool_output,
                    turn_id=turn_id,
                ),
            )
            if marker.scope == "session":
                self.events.append(
                    session_id,
                    workspace_id,
                    MemoryAccepted(scope="session", key=marker.key, memory_id=record.id, auto=True),
                )
                outcome.accepted.append(record)
            else:
                outcome.pending.append(record)
        return outcome

    def _reject_marker(
        self,
        raw: str,
        reason: str,
        session_id: str,
        workspace_id: str,
        marker: MemoryMarker | None = None,
    ) -> None:
        self.events.append(
            session_id,
            workspace_id,
            MemoryRejected(
                reason=reason,
                scope=marker.scope if marker else None,
                key=marker.key if marker else None,
                raw=raw,
            ),
        )

    # -- decisions by a person ------------------------------------------------------

    def pending(self, workspace_id: str | None = None) -> list[MemoryRecord]:
        """Pending user proposals and this workspace's pending workspace proposals."""
        found = self.store.list(scope="user", status="pending")
        if workspace_id is not None:
            found += self.store.list(scope="workspace", workspace_id=workspace_id, status="pending")
        return sorted(found, key=lambda r: r.id)

    def _pending_record(self, memory_id: int) -> MemoryRecord:
        record = self.store.get(memory_id)
        if record is None or record.status != "pending":
            state = "does not exist" if record is None else f"is already {record.status}"
            raise MemoryNotFound(
                f"proposal {memory_id} {state}; `kairox memory list --pending` shows what waits"
            )
        return record

    def approve(self, memory_id: int) -> MemoryRecord:
        """Accept a pending proposal; it overwrites any memory with the same key."""
        record = self._pending_record(memory_id)
        accepted = self.store.set_status(memory_id, "approved")
        self.events.append(
            _session_of(record),
            record.workspace_id or record.provenance.get("workspace_id"),
            MemoryAccepted(scope=record.scope, key=record.key, memory_id=accepted.id),
        )
        return accepted

    def reject(self, memory_id: int, reason: str = "rejected by the user") -> MemoryRecord:
        """Decline a pending proposal; it is kept as history, never used."""
        record = self._pending_record(memory_id)
        rejected = self.store.set_status(memory_id, "rejected")
        self.events.append(
            _session_of(record),
            record.workspace_id or record.provenance.get("workspace_id"),
            MemoryRejected(reason=reason, scope=record.scope, key=record.key, memory_id=memory_id),
        )
        return rejected

    # -- memories a person writes, edits or forgets ---------------------------------

    def set(self, scope: str, key: str, body: str, *, workspace_id: str) -> MemoryRecord:
        """Write a user or workspace memory directly (the person is the approver)."""
        if scope not in ("user", "workspace"):
            raise MemoryInputError(
                f"a memory you write yourself is 'user' or 'workspace', not {scope!r}"
            )
        if not body.strip():
            raise MemoryInputError("the body is empty; write what should be remembered")
        record = self.store.put(
            scope,
            body,
            key=_key(key),
            workspace_id=workspace_id if scope == "workspace" else None,
            provenance={"written_by": "user"},
        )
        self.events.append(
            USER_ACTIONS_SESSION,
            workspace_id,
            MemoryAccepted(scope=scope, key=record.key, memory_id=record.id),
        )
        return record

    def find(self, key: str, *, workspace_id: str, scope: str | None = None) -> MemoryRecord:
        """The approved memory with ``key``: this workspace's first, then the user's."""
        normalised = _key(key)
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
        self, key: str, body: str, *, workspace_id: str, scope: str | None = None
    ) -> MemoryRecord:
        """Replace the body stored under ``key``."""
        if not body.strip():
            raise MemoryInputError("the new body is empty; use `forget` to delete a memory")
        record = self.find(key, workspace_id=workspace_id, scope=scope)
        return self.store.update_body(record.id, body)

    def forget(self, key: str, *, workspace_id: str, scope: str | None = None) -> MemoryRecord:
        """Delete the memory stored under ``key``; returns what was deleted."""
        record = self.find(key, workspace_id=workspace_id, scope=scope)
        self.store.forget(record.id)
        return record


def _session_of(record: MemoryRecord) -> str:
    return record.session_id or record.provenance.get("session_id") or USER_ACTIONS_SESSION
