"""The approval flow: what happens to the memories a model proposes, and to the user's edits.

Session memories are accepted at once (``MemoryProposed`` + ``MemoryAccepted``). User
and workspace memories wait as pending proposals until a person approves or rejects
them; pending proposals live in the store, so they survive a restart. Malformed markers,
bodies over ``[memory] max_body_chars`` and proposals over the per-turn cap are rejected
with a reason and recorded as ``MemoryRejected`` events; nothing is silently dropped or
downgraded. A proposal that restates a pending or approved memory
(:mod:`kairox.memory.restatement`) is merged with it (``MemoryMerged``) instead of queued
again, and an origin (``chat``, ``mcp``, ``api``) with ``[memory] max_pending_per_origin``
proposals waiting gets its next one rejected until a person decides some
(:mod:`kairox.memory.limits`).

A proposal made in a *tainted* turn (its prompt held tool output, or text retrieved from
the workspace or a knowledge base: the usual routes of indirect prompt injection) carries
an injection warning naming what tainted it, and a session memory proposed there waits
for approval too (``[memory] hold_tainted_session``, default true). Edits and deletions
by a person are ``MemoryEdited`` / ``MemoryForgotten`` events naming who (``actor``:
``cli``, ``tui``, ``web`` or ``api``) and the previous body. This is the one path every
surface takes to change memories, and the path proposals from outside a chat take (the MCP
server, the Python API): :meth:`MemoryApprovals.propose` treats one like a marker (within
the per-session and per-minute bounds), and :meth:`MemoryApprovals.propose_forget` asks a
person to delete a memory.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kairox.memory.base_store import MemoryStore
from kairox.memory.edits import MemoryEdits
from kairox.memory.limits import DEFAULT_LIMITS, ProposalLimits, ProposalRate
from kairox.memory.markers import MemoryMarker, RejectedMarker
from kairox.memory.proposals import (
    FORGET_ACTION,
    MAX_PROPOSAL_CHARS,
    USER_ACTIONS_SESSION,
    MemoryInputError,
    MemoryNotFound,
    Proposer,
    TurnProposals,
    about,
    log_of,
    marker_for,
    origin_of,
    proposed_event,
    too_long,
)
from kairox.memory.records import MemoryRecord
from kairox.memory.restatement import restated
from kairox.store.events import (
    MemoryAccepted,
    MemoryForgotten,
    MemoryMerged,
    MemoryRejected,
    SqliteEventStore,
)
from kairox.support.errors import KairoxError

__all__ = [
    "DEFAULT_MAX_PROPOSALS_PER_TURN",
    "FORGET_ACTION",
    "MAX_PROPOSAL_CHARS",
    "USER_ACTIONS_SESSION",
    "MemoryApprovals",
    "MemoryInputError",
    "MemoryNotFound",
    "ProposalRefused",
    "Proposer",
    "TurnProposals",
]

DEFAULT_MAX_PROPOSALS_PER_TURN = 5


class ProposalRefused(KairoxError, RuntimeError):
    """A proposal over the rate or pending bounds; the message says which and what to do."""


class MemoryApprovals(MemoryEdits):
    """Applies the approval rules on top of a memory store and the event log.

    Every decision is one store write and one event. When the store and the event log
    share one :class:`~kairox.store.sqlite.Database` (the facade sees to it) both commit in
    one transaction: a crash leaves both or neither. What a person does directly (write,
    edit, forget, read a key's history) comes from :class:`~kairox.memory.edits.MemoryEdits`.

    :param max_proposals_per_turn: markers beyond this many in one turn are rejected
        with a reason (a model that floods proposals is more likely confused or steered).
    :param hold_tainted_session: a session memory proposed in a tainted turn (its prompt
        held tool output or retrieved text) waits for approval like a user or workspace
        one, instead of being accepted at once.
    :param limits: the bounds on bodies, on proposals per session and per minute from
        outside a chat turn, and on the pending queue per origin.
    :param clock: the monotonic clock the per-minute bound reads (tests drive it).
    """

    def __init__(
        self,
        store: MemoryStore,
        events: SqliteEventStore,
        *,
        max_proposals_per_turn: int = DEFAULT_MAX_PROPOSALS_PER_TURN,
        hold_tainted_session: bool = True,
        limits: ProposalLimits = DEFAULT_LIMITS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_proposals_per_turn < 0:
            raise ValueError("max_proposals_per_turn must be >= 0")
        self.store = store
        self.events = events
        self.max_proposals_per_turn = max_proposals_per_turn
        self.hold_tainted_session = hold_tainted_session
        self.limits = limits
        self._rate = ProposalRate(limits, clock=clock)

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
        tainted_by: Sequence[str] = (),
        origin: Mapping[str, Any] | None = None,
    ) -> TurnProposals:
        """Record one turn's markers: accept, queue, merge or reject each, with events.

        ``tainted_by`` names what in the turn's prompt nobody vetted (``tool output``,
        ``workspace:<source>``, ``knowledge_base:<source>``); ``context_had_tool_output``
        is the older spelling of ``tainted_by=["tool output"]``. ``origin`` is extra
        provenance for every record, e.g. ``{"via": "mcp"}`` for a proposal an agent made
        through the MCP server rather than in a chat turn.
        """
        taint = list(
            dict.fromkeys([*(["tool output"] if context_had_tool_output else []), *tainted_by])
        )
        outcome = TurnProposals()
        for marker in rejected:
            self._reject_marker(marker.raw, marker.reason, session_id, workspace_id)
            outcome.rejected.append((marker.raw, marker.reason))
        for number, marker in enumerate(markers, start=1):
            reason = too_long(marker.body, self.limits.max_body_chars)
            if number > self.max_proposals_per_turn:
                reason = (
                    f"more than {self.max_proposals_per_turn} memory proposals in one turn; "
                    "the rest were not kept"
                )
            if reason is None:
                reason = self._keep(
                    marker, outcome, session_id, workspace_id, turn_id, taint, origin
                )
            if reason is not None:
                self._reject_marker(marker.raw, reason, session_id, workspace_id, marker)
                outcome.rejected.append((marker.raw, reason))
        return outcome

    def _keep(
        self,
        marker: MemoryMarker,
        outcome: TurnProposals,
        session_id: str,
        workspace_id: str,
        turn_id: str | None,
        taint: list[str],
        origin: Mapping[str, Any] | None,
    ) -> str | None:
        """Merge, accept or queue one valid marker; the reason it is refused, or ``None``."""
        place = {
            "workspace_id": workspace_id if marker.scope != "user" else None,
            "session_id": session_id if marker.scope == "session" else None,
        }
        accept = marker.scope == "session" and not (taint and self.hold_tainted_session)
        with self._atomic():
            target = restated(marker, self._live(marker.scope, **place))
            if target is not None:
                self.events.append(
                    session_id,
                    workspace_id,
                    MemoryMerged(
                        memory_id=target.id,
                        scope=marker.scope,
                        body=marker.body,
                        into=target.status,
                        key=marker.key,
                        turn_id=turn_id,
                        tainted_by=taint,
                    ),
                )
                outcome.merged.append(target)
                return None
            via = str((origin or {}).get("via") or "chat")
            if not accept and self._queue_grows(marker.scope, marker.key, place):
                full = self._queue_full(via, workspace_id)
                if full is not None:
                    return full
            provenance = {
                **(origin or {}),
                "session_id": session_id,
                "workspace_id": workspace_id,
                "turn_id": turn_id,
                "injection_warning": bool(taint),
                "tainted_by": taint,
            }
            write = self.store.put if accept else self.store.propose
            record = write(
                marker.scope, marker.body, key=marker.key, provenance=provenance, **place
            )
            proposed = proposed_event(record, taint, turn_id)
            decided = MemoryAccepted(
                scope="session", key=marker.key, memory_id=record.id, auto=True
            )
            self.events.append_many(
                session_id, workspace_id, [proposed, decided] if accept else [proposed]
            )
        (outcome.accepted if accept else outcome.pending).append(record)
        return None

    def _live(
        self, scope: str, *, workspace_id: str | None, session_id: str | None
    ) -> list[MemoryRecord]:
        """The approved memories and pending proposals (not requests to forget) in a place."""
        where: dict[str, Any] = {"scope": scope}
        if scope == "workspace":
            where["workspace_id"] = workspace_id
        elif scope == "session":
            where["session_id"] = session_id
        found = self.store.list(**where, status="approved")
        found += self.store.list(**where, status="pending")
        return [r for r in found if r.provenance.get("action") != FORGET_ACTION]

    def _queue_grows(self, scope: str, key: str | None, place: Mapping[str, str | None]) -> bool:
        """Whether queueing a proposal adds one (a pending one under its key is replaced)."""
        if key is None:
            return True
        return self.store.get_by_key(scope, key, **place, status="pending") is None

    def _queue_full(self, via: str, workspace_id: str) -> str | None:
        """Why ``via`` may not queue one more proposal here, or ``None``."""
        limit = self.limits.max_pending_per_origin
        waiting = sum(1 for r in self.pending(workspace_id) if origin_of(r) == via)
        if waiting < limit:
            return None
        return (
            f"{waiting} proposals from {via} already wait for the user's decision, the most "
            f"allowed ([memory] max_pending_per_origin = {limit}); the user reviews them with "
            "`kairox memory list --pending`"
        )

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

    # -- proposals from outside a model turn (the MCP server, the Python API) -------

    def propose(
        self, scope: str, body: str, *, key: str | None = None, by: Proposer
    ) -> TurnProposals:
        """Propose one memory exactly as a ``<memory>`` marker in a turn would.

        Session memories are kept at once (held for approval when ``by.tainted_by`` names
        something and ``hold_tainted_session`` is on), user and workspace ones wait for a
        person; a bad scope, key or body comes back in ``rejected`` with the reason (and a
        ``MemoryRejected`` event), never as a downgraded session memory. Past the bounds
        per session and per minute a proposal comes back in ``rejected`` too, without an
        event (a flood writes nothing).
        """
        raw = f"<memory scope={scope!r} key={key!r}> ({len(body)} characters) via {by.via}"
        refused = self._rate.admit(f"{by.via}:{by.session_id}")
        if refused is not None:
            return TurnProposals(rejected=[(raw, refused)])
        marker, reason = marker_for(scope, key, body, raw)
        if marker is None:
            return self.handle_turn(
                [],
                [RejectedMarker(reason=reason, raw=raw)],
                session_id=by.session_id,
                workspace_id=by.workspace_id,
            )
        return self.handle_turn(
            [marker],
            [],
            session_id=by.session_id,
            workspace_id=by.workspace_id,
            tainted_by=by.tainted_by,
            origin={"via": by.via},
        )

    def propose_forget(self, key: str, *, scope: str | None = None, by: Proposer) -> MemoryRecord:
        """Ask a person to delete the memory under ``key``; nothing is deleted until approved.

        The request waits as a pending proposal in the memory's scope and key (replacing a
        pending proposal for the same key: the latest request wins); approving it deletes
        the memory, rejecting it keeps the memory. Raises :class:`MemoryNotFound` when no
        memory has the key, and :class:`ProposalRefused` past the proposal bounds.
        """
        target = self.find(key, workspace_id=by.workspace_id, scope=scope)
        refused = self._rate.admit(f"{by.via}:{by.session_id}")
        taint = list(dict.fromkeys(by.tainted_by))
        provenance = {
            "via": by.via,
            "action": FORGET_ACTION,
            "forget_memory_id": target.id,
            "session_id": by.session_id,
            "workspace_id": by.workspace_id,
            "injection_warning": bool(taint),
            "tainted_by": taint,
        }
        with self._atomic():
            place = {"workspace_id": target.workspace_id, "session_id": None}
            if refused is None and self._queue_grows(target.scope, target.key, place):
                refused = self._queue_full(by.via, by.workspace_id)
            if refused is not None:
                raise ProposalRefused(f"not asked: {refused}")
            record = self.store.propose(
                target.scope,
                f"Forget this memory: {target.body}",
                key=target.key,
                workspace_id=target.workspace_id,
                provenance=provenance,
            )
            self.events.append(by.session_id, by.workspace_id, proposed_event(record, taint))
        return record

    # -- decisions by a person ------------------------------------------------------

    def pending(self, workspace_id: str | None = None) -> list[MemoryRecord]:
        """Pending user proposals, and this workspace's workspace and (held) session ones."""
        found = self.store.list(scope="user", status="pending")
        if workspace_id is not None:
            for scope in ("workspace", "session"):
                found += self.store.list(scope=scope, workspace_id=workspace_id, status="pending")
        return sorted(found, key=lambda r: r.id)

    def get(self, memory_id: int) -> MemoryRecord | None:
        """The record with this id, whatever its status."""
        return self.store.get(memory_id)

    def _pending_record(self, memory_id: int) -> MemoryRecord:
        record = self.store.get(memory_id)
        if record is None or record.status != "pending":
            state = "does not exist" if record is None else f"is already {record.status}"
            raise MemoryNotFound(
                f"proposal {memory_id} {state}; `kairox memory list --pending` shows what waits"
            )
        return record

    def approve(self, memory_id: int, *, actor: str = "api") -> MemoryRecord:
        """Accept a pending proposal; it overwrites any memory with the same key."""
        with self._atomic():
            record = self._pending_record(memory_id)
            if record.provenance.get("action") == FORGET_ACTION:
                return self._approve_forget(record, actor)
            accepted = self.store.set_status(memory_id, "approved")
            self.events.append(
                *log_of(record),
                MemoryAccepted(
                    scope=record.scope, key=record.key, memory_id=accepted.id, actor=actor
                ),
            )
        return accepted

    def _approve_forget(self, request: MemoryRecord, actor: str) -> MemoryRecord:
        """Carry out an approved request to forget: the memory and the request both go."""
        target = self.store.get_by_key(
            request.scope, request.key or "", workspace_id=request.workspace_id
        )
        self.store.forget(request.id)
        decided = [MemoryAccepted(**about(request), actor=actor)]
        if target is not None and self.store.forget(target.id):
            decided.append(
                MemoryForgotten(
                    **about(target),
                    previous_body=target.body,
                    actor=actor,
                )
            )
        self.events.append_many(*log_of(request), decided)
        return request

    def reject(
        self, memory_id: int, reason: str = "rejected by the user", *, actor: str = "api"
    ) -> MemoryRecord:
        """Decline a pending proposal; it is kept as history, never used."""
        with self._atomic():
            record = self._pending_record(memory_id)
            rejected = self.store.set_status(memory_id, "rejected")
            self.events.append(
                *log_of(record),
                MemoryRejected(
                    reason=reason,
                    **about(record),
                    actor=actor,
                ),
            )
        return rejected
