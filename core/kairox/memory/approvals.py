"""The approval flow: what happens to the memories a model proposes, and to the user's edits.

Session memories are accepted at once (``MemoryProposed`` + ``MemoryAccepted``). User
and workspace memories wait as pending proposals until a person approves or rejects
them; pending proposals live in the store, so they survive a restart. Malformed markers
and proposals over the per-turn cap are rejected with a reason and recorded as
``MemoryRejected`` events; nothing is silently dropped or downgraded.

A proposal made in a *tainted* turn (its prompt held tool output, or text retrieved from
the workspace or a knowledge base: the usual routes of indirect prompt injection) carries
an injection warning naming what tainted it, and a session memory proposed there waits
for approval too (``[memory] hold_tainted_session``, default true). Edits and deletions
by a person are ``MemoryEdited`` / ``MemoryForgotten`` events naming who (``actor``:
``cli``, ``tui``, ``web`` or ``api``) and the previous body. This is the one path every
surface takes to change memories, and the path proposals from outside a chat take (the MCP
server, the Python API): :meth:`MemoryApprovals.propose` treats one like a marker, and
:meth:`MemoryApprovals.propose_forget` asks a person to delete a memory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Final

from kairox.errors import KairoxError
from kairox.events import (
    MemoryAccepted,
    MemoryEdited,
    MemoryForgotten,
    MemoryProposed,
    MemoryRejected,
    SqliteEventStore,
)
from kairox.memory.base_store import MemoryStore
from kairox.memory.markers import SCOPES, MemoryMarker, RejectedMarker, normalize_key
from kairox.memory.records import MemoryRecord
from kairox.storage import Database

DEFAULT_MAX_PROPOSALS_PER_TURN = 5
# Events of actions a person takes outside any chat session (the CLI, the web page).
USER_ACTIONS_SESSION = "kairox-user-actions"
# A memory is a short fact; a proposal from an agent longer than this is a mistake or an attack.
MAX_PROPOSAL_CHARS: Final = 8000
# ``provenance["action"]`` of a proposal to delete a memory rather than write one.
FORGET_ACTION: Final = "forget"


class MemoryNotFound(KairoxError, LookupError):
    """No memory or proposal matches; the message says what was looked for."""


class MemoryInputError(KairoxError, ValueError):
    """A key, scope or body a person typed is not valid; the message says why."""


def _text(value: str, what: str) -> str:
    """``value`` if it is valid text; a lone surrogate (from a bad escape or undecodable
    command-line bytes) could not be stored."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MemoryInputError(
            f"the {what} holds a lone surrogate (\\u{ord(value[exc.start]):04x}) at character "
            f"{exc.start}, which is not text; write it again as plain UTF-8"
        ) from None
    return value


def _key(key: str) -> str:
    try:
        return normalize_key(_text(key, "key"))
    except ValueError as exc:
        raise MemoryInputError(
            f"{exc}; keys are short dotted names such as 'editor.font' or 'commit.style'"
        ) from exc


@dataclass(frozen=True)
class Proposer:
    """Who makes a proposal from outside a chat turn (:meth:`MemoryApprovals.propose`).

    :param session_id: the session it is made in (its events go there).
    :param workspace_id: the workspace it is made in.
    :param via: the channel (``"mcp"``, ``"api"``), kept in the provenance.
    :param tainted_by: what unvetted text the proposer has read (``workspace:<source>``,
        ``tool output``): the proposal then carries the injection warning.
    """

    session_id: str
    workspace_id: str
    via: str
    tainted_by: Sequence[str] = ()


@dataclass
class TurnProposals:
    """What became of the markers of one turn."""

    accepted: list[MemoryRecord] = field(default_factory=list)
    pending: list[MemoryRecord] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (raw text, reason)


class MemoryApprovals:
    """Applies the approval rules on top of a memory store and the event log.

    Every decision is one store write and one event. When the store and the event log
    share one :class:`~kairox.storage.Database` (the facade sees to it) both commit in
    one transaction: a crash leaves both or neither.

    :param max_proposals_per_turn: markers beyond this many in one turn are rejected
        with a reason (a model that floods proposals is more likely confused or steered).
    :param hold_tainted_session: a session memory proposed in a tainted turn (its prompt
        held tool output or retrieved text) waits for approval like a user or workspace
        one, instead of being accepted at once.
    """

    def __init__(
        self,
        store: MemoryStore,
        events: SqliteEventStore,
        *,
        max_proposals_per_turn: int = DEFAULT_MAX_PROPOSALS_PER_TURN,
        hold_tainted_session: bool = True,
    ) -> None:
        if max_proposals_per_turn < 0:
            raise ValueError("max_proposals_per_turn must be >= 0")
        self.store = store
        self.events = events
        self.max_proposals_per_turn = max_proposals_per_turn
        self.hold_tainted_session = hold_tainted_session

    def _atomic(self) -> AbstractContextManager[object]:
        """One transaction over the store and the log, when they share a database."""
        shared = getattr(self.store, "database", None)
        if isinstance(shared, Database) and shared is getattr(self.events, "database", None):
            return shared.transaction()
        return nullcontext()

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
        """Record one turn's markers: accept, queue or reject each, with events.

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
            if number > self.max_proposals_per_turn:
                reason = (
                    f"more than {self.max_proposals_per_turn} memory proposals in one turn; "
                    "the rest were not kept"
                )
                self._reject_marker(marker.raw, reason, session_id, workspace_id, marker)
                outcome.rejected.append((marker.raw, reason))
                continue
            provenance = {
                **(origin or {}),
                "session_id": session_id,
                "workspace_id": workspace_id,
                "turn_id": turn_id,
                "injection_warning": bool(taint),
                "tainted_by": taint,
            }
            place = {
                "workspace_id": workspace_id if marker.scope != "user" else None,
                "session_id": session_id if marker.scope == "session" else None,
            }
            accept = marker.scope == "session" and not (taint and self.hold_tainted_session)
            write = self.store.put if accept else self.store.propose
            with self._atomic():
                record = write(
                    marker.scope, marker.body, key=marker.key, provenance=provenance, **place
                )
                proposed = _proposed(record, taint, turn_id)
                decided = MemoryAccepted(
                    scope="session", key=marker.key, memory_id=record.id, auto=True
                )
                self.events.append_many(
                    session_id, workspace_id, [proposed, decided] if accept else [proposed]
                )
            (outcome.accepted if accept else outcome.pending).append(record)
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

    # -- proposals from outside a model turn (the MCP server, the Python API) -------

    def propose(
        self, scope: str, body: str, *, key: str | None = None, by: Proposer
    ) -> TurnProposals:
        """Propose one memory exactly as a ``<memory>`` marker in a turn would.

        Session memories are kept at once (held for approval when ``by.tainted_by`` names
        something and ``hold_tainted_session`` is on), user and workspace ones wait for a
        person; a bad scope, key or body comes back in ``rejected`` with the reason (and a
        ``MemoryRejected`` event), never as a downgraded session memory.
        """
        raw = f"<memory scope={scope!r} key={key!r}> ({len(body)} characters) via {by.via}"
        marker, reason = _marker(scope, key, body, raw)
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
        memory has the key.
        """
        target = self.find(key, workspace_id=by.workspace_id, scope=scope)
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
            record = self.store.propose(
                target.scope,
                f"Forget this memory: {target.body}",
                key=target.key,
                workspace_id=target.workspace_id,
                provenance=provenance,
            )
            self.events.append(by.session_id, by.workspace_id, _proposed(record, taint))
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
                *_log_of(record),
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
        decided = [MemoryAccepted(**_about(request), actor=actor)]
        if target is not None and self.store.forget(target.id):
            decided.append(
                MemoryForgotten(
                    **_about(target),
                    previous_body=target.body,
                    actor=actor,
                )
            )
        self.events.append_many(*_log_of(request), decided)
        return request

    def reject(
        self, memory_id: int, reason: str = "rejected by the user", *, actor: str = "api"
    ) -> MemoryRecord:
        """Decline a pending proposal; it is kept as history, never used."""
        with self._atomic():
            record = self._pending_record(memory_id)
            rejected = self.store.set_status(memory_id, "rejected")
            self.events.append(
                *_log_of(record),
                MemoryRejected(
                    reason=reason,
                    **_about(record),
                    actor=actor,
                ),
            )
        return rejected

    # -- memories a person writes, edits or forgets ---------------------------------

    def set(
        self, scope: str, key: str, body: str, *, workspace_id: str, actor: str = "api"
    ) -> MemoryRecord:
        """Write a user or workspace memory directly (the person is the approver)."""
        if scope not in ("user", "workspace"):
            raise MemoryInputError(
                f"a memory you write yourself is 'user' or 'workspace', not {scope!r}"
            )
        if not _text(body, "body").strip():
            raise MemoryInputError("the body is empty; write what should be remembered")
        with self._atomic():
            record = self.store.put(
                scope,
                body,
                key=_key(key),
                workspace_id=workspace_id if scope == "workspace" else None,
                provenance={"written_by": "user", "actor": actor},
            )
            self.events.append(
                USER_ACTIONS_SESSION,
                workspace_id,
                MemoryAccepted(**_about(record), actor=actor),
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
        self,
        key: str,
        body: str,
        *,
        workspace_id: str,
        scope: str | None = None,
        actor: str = "api",
    ) -> MemoryRecord:
        """Replace the body stored under ``key``."""
        if not _text(body, "new body").strip():
            raise MemoryInputError("the new body is empty; use `forget` to delete a memory")
        record = self.find(key, workspace_id=workspace_id, scope=scope)
        return self.edit_by_id(record.id, body, actor=actor)

    def edit_by_id(self, memory_id: int, body: str, *, actor: str = "api") -> MemoryRecord:
        """Replace the body of memory ``memory_id`` (session memories may have no key)."""
        if not body.strip():
            raise MemoryInputError("the new body is empty; use `forget` to delete a memory")
        with self._atomic():
            before = self.store.get(memory_id)
            if before is None:
                raise MemoryNotFound(f"no memory {memory_id}; `kairox memory list` shows the ids")
            edited = self.store.update_body(memory_id, body)
            self.events.append(
                *_log_of(before, by_person=True),
                MemoryEdited(
                    **_about(before),
                    body=edited.body,
                    previous_body=before.body,
                    actor=actor,
                ),
            )
        return edited

    def forget(
        self, key: str, *, workspace_id: str, scope: str | None = None, actor: str = "api"
    ) -> MemoryRecord:
        """Delete the memory stored under ``key``; returns what was deleted."""
        record = self.find(key, workspace_id=workspace_id, scope=scope)
        return self.forget_by_id(record.id, actor=actor)

    def forget_by_id(self, memory_id: int, *, actor: str = "api") -> MemoryRecord:
        """Delete memory ``memory_id``; returns what was deleted."""
        with self._atomic():
            before = self.store.get(memory_id)
            if before is None or not self.store.forget(memory_id):
                raise MemoryNotFound(f"no memory {memory_id}; `kairox memory list` shows the ids")
            self.events.append(
                *_log_of(before, by_person=True),
                MemoryForgotten(
                    **_about(before),
                    previous_body=before.body,
                    actor=actor,
                ),
            )
        return before


def _marker(scope: str, key: str | None, body: str, raw: str) -> tuple[MemoryMarker | None, str]:
    """The marker a proposal stands for, or ``None`` and the reason it is not valid."""
    if scope not in SCOPES:
        return None, f"unknown scope {scope!r}; use one of {', '.join(SCOPES)}"
    if not isinstance(body, str) or not body.strip():
        return None, "the body is empty; say what should be remembered"
    try:
        _text(body, "body")
        if key is not None:
            _text(key, "key")
    except MemoryInputError as exc:
        return None, str(exc)
    if len(body) > MAX_PROPOSAL_CHARS:
        return None, (
            f"the body is {len(body)} characters long (at most {MAX_PROPOSAL_CHARS}); "
            "a memory is one short fact"
        )
    normal = None
    if key is not None and key.strip():
        try:
            normal = normalize_key(key)
        except ValueError as exc:
            return None, f"{exc}; keys are short dotted names such as 'editor.font'"
    elif scope != "session":
        return None, f"a {scope} memory needs a key, so a later proposal can replace it"
    return MemoryMarker(scope=scope, key=normal, body=body.strip(), raw=raw), ""


def _log_of(record: MemoryRecord, *, by_person: bool = False) -> tuple[str, str | None]:
    """The (session, workspace) whose event log records a decision about ``record``.

    A person's edit or deletion of a user or workspace memory (``by_person``) belongs to no
    session, so it goes to the user-actions session instead.
    """
    session = _session_of(record)
    if by_person and record.scope != "session":
        session = USER_ACTIONS_SESSION
    return session, record.workspace_id or record.provenance.get("workspace_id")


def _proposed(record: MemoryRecord, taint: list[str], turn_id: str | None = None) -> MemoryProposed:
    """The event of a proposal just stored as ``record`` (its body and key as stored)."""
    return MemoryProposed(
        scope=record.scope,
        body=record.body,
        key=record.key,
        memory_id=record.id,
        injection_warning=bool(taint),
        turn_id=turn_id,
        tainted_by=taint,
    )


def _about(record: MemoryRecord) -> dict[str, Any]:
    """The fields every event about a stored record names it by."""
    return {"memory_id": record.id, "scope": record.scope, "key": record.key}


def _session_of(record: MemoryRecord) -> str:
    return record.session_id or record.provenance.get("session_id") or USER_ACTIONS_SESSION
