"""What a memory proposal is, who makes it, what became of it, and the checks it goes through.

Shared by :mod:`kairox.memory.approvals` (the flow) and the surfaces that call it: the
:class:`Proposer` of a proposal made outside a chat turn, the :class:`TurnProposals` outcome,
the errors a person's input gets, and the events that name a stored record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kairox.memory.marker_rules import SCOPES, normalize_key
from kairox.memory.markers import MemoryMarker
from kairox.memory.records import MemoryRecord
from kairox.store.events import MemoryProposed
from kairox.support.errors import KairoxError

__all__ = [
    "FORGET_ACTION",
    "MAX_PROPOSAL_CHARS",
    "USER_ACTIONS_SESSION",
    "MemoryInputError",
    "MemoryNotFound",
    "Proposer",
    "TurnProposals",
]

# Events of actions a person takes outside any chat session (the CLI, the web page).
USER_ACTIONS_SESSION: Final = "kairox-user-actions"
# The default bound on a memory body (``[memory] max_body_chars``): a memory is a short
# fact; a body longer than this is a mistake or an attack.
MAX_PROPOSAL_CHARS: Final = 8000
# ``provenance["action"]`` of a proposal to delete a memory rather than write one.
FORGET_ACTION: Final = "forget"


class MemoryNotFound(KairoxError, LookupError):
    """No memory or proposal matches; the message says what was looked for."""


class MemoryInputError(KairoxError, ValueError):
    """A key, scope or body a person typed is not valid; the message says why."""


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
    merged: list[MemoryRecord] = field(default_factory=list)
    """Pending or approved memories a proposal restated: nothing new was kept or queued."""


def checked_text(value: str, what: str) -> str:
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


def checked_key(key: str) -> str:
    """A key a person typed, normalised; :class:`MemoryInputError` says what is wrong."""
    try:
        return normalize_key(checked_text(key, "key"))
    except ValueError as exc:
        raise MemoryInputError(
            f"{exc}; keys are short dotted names such as 'editor.font' or 'commit.style'"
        ) from exc


def too_long(body: str, limit: int) -> str | None:
    """Why ``body`` is over the ``[memory] max_body_chars`` bound, or ``None``."""
    if len(body.strip()) <= limit:
        return None
    return (
        f"the body is {len(body.strip())} characters long (at most {limit}, "
        "[memory] max_body_chars); a memory is one short fact"
    )


def marker_for(scope: str, key: str | None, body: str, raw: str) -> tuple[MemoryMarker | None, str]:
    """The marker a proposal stands for, or ``None`` and the reason it is not valid."""
    if scope not in SCOPES:
        return None, f"unknown scope {scope!r}; use one of {', '.join(SCOPES)}"
    if not isinstance(body, str) or not body.strip():
        return None, "the body is empty; say what should be remembered"
    try:
        checked_text(body, "body")
        if key is not None:
            checked_text(key, "key")
    except MemoryInputError as exc:
        return None, str(exc)
    normal = None
    if key is not None and key.strip():
        try:
            normal = normalize_key(key)
        except ValueError as exc:
            return None, f"{exc}; keys are short dotted names such as 'editor.font'"
    elif scope != "session":
        return None, f"a {scope} memory needs a key, so a later proposal can replace it"
    return MemoryMarker(scope=scope, key=normal, body=body.strip(), raw=raw), ""


def origin_of(record: MemoryRecord) -> str:
    """The channel a proposal came through (``mcp``, ``api``; ``chat`` for a chat turn)."""
    return str(record.provenance.get("via") or "chat")


def log_of(record: MemoryRecord, *, by_person: bool = False) -> tuple[str, str | None]:
    """The (session, workspace) whose event log records a decision about ``record``.

    A person's edit or deletion of a user or workspace memory (``by_person``) belongs to no
    session, so it goes to the user-actions session instead.
    """
    session = record.session_id or record.provenance.get("session_id") or USER_ACTIONS_SESSION
    if by_person and record.scope != "session":
        session = USER_ACTIONS_SESSION
    return session, record.workspace_id or record.provenance.get("workspace_id")


def proposed_event(
    record: MemoryRecord, taint: list[str], turn_id: str | None = None
) -> MemoryProposed:
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


def about(record: MemoryRecord) -> dict[str, Any]:
    """The fields every event about a stored record names it by."""
    return {"memory_id": record.id, "scope": record.scope, "key": record.key}
