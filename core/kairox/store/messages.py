"""Session messages: the one record every path that feeds a session shares.

A message has a ``role`` (``user``, ``assistant``, ``system``, ``tool``), its ``content``, an
optional speaker ``name`` and an optional ``time`` (ISO 8601, timezone-aware or naive as
given). Kairox's own chat turns, the Python API, the MCP tools and ``kairox session
import`` all record messages as the same events (:func:`message_event`), and
:func:`read_messages` turns a session's events back into messages, whoever wrote them:

========== ============================== =====================================
role       event                          name / time read back from
========== ============================== =====================================
user       ``UserMessageAdded``           ``name``, ``time``
assistant  ``AssistantMessageCompleted``  ``name``, ``time``
system     ``SystemMessageAdded``         ``name``, ``time``
tool       ``ToolInvocationCompleted``    ``tool`` (``""``: none), ``time``
========== ============================== =====================================

Events stored before names and times existed read back with both ``None``; the time the
event was recorded is always there as :attr:`RecordedMessage.recorded_at`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, get_args

from kairox.store.events import (
    AssistantMessageCompleted,
    Event,
    StoredEvent,
    SystemMessageAdded,
    ToolInvocationCompleted,
    UserMessageAdded,
)
from kairox.support.errors import KairoxError
from kairox.support.models import ChatMessage, Role

if TYPE_CHECKING:
    from kairox.store.events import SqliteEventStore

__all__ = [
    "MESSAGE_EVENTS",
    "MESSAGE_KEYS",
    "ROLES",
    "MessageError",
    "NoSuchSession",
    "RecordedMessage",
    "SessionMessage",
    "SessionSummary",
    "TranscriptError",
    "history_message",
    "message_at",
    "message_event",
    "messages_from",
    "parse_time",
    "read_messages",
    "read_transcript",
    "recorded_message",
    "session_summaries",
    "transcript_line",
]

ROLES: Final[tuple[Role, ...]] = get_args(Role)
"""The roles a session message may have."""

MESSAGE_KEYS: Final = ("role", "content", "name", "time")
"""The keys of a message as a dict (a JSON Lines transcript's line); the first two required."""

MESSAGE_EVENTS: Final = (
    UserMessageAdded,
    AssistantMessageCompleted,
    SystemMessageAdded,
    ToolInvocationCompleted,
)
"""The event types that record a message (one each)."""

# What an OpenAI-style ``name`` field accepts; other speaker names go into the text.
_CHAT_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")


class MessageError(KairoxError, ValueError):
    """A message is not valid; the text names the field and what it should be."""


def parse_time(value: str) -> str:
    """``value`` checked as an ISO 8601 date-time and written back in one canonical form.

    A timezone-aware time keeps its offset (``Z`` becomes ``+00:00``); a naive one stays
    naive. Raises :class:`MessageError` saying what an accepted value looks like.
    """
    if not isinstance(value, str):
        raise MessageError(f"time must be an ISO 8601 string, not {type(value).__name__}")
    try:
        return datetime.fromisoformat(value.strip()).isoformat()
    except ValueError:
        raise MessageError(
            f"time {value!r} is not ISO 8601; write e.g. 2023-05-08T13:56:00+00:00 "
            "or 2023-05-08T13:56:00"
        ) from None


@dataclass(frozen=True)
class SessionMessage:
    """One message of a conversation, as every path records it.

    :param role: ``user``, ``assistant``, ``system`` or ``tool``.
    :param content: the text, verbatim.
    :param name: who spoke (a participant's name, or the tool for a ``tool`` message).
    :param time: when it was said, ISO 8601 (validated and normalised, see :func:`parse_time`).
    """

    role: Role
    content: str
    name: str | None = None
    time: str | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise MessageError(
                f"unknown role {self.role!r}; use one of {', '.join(repr(r) for r in ROLES)}"
            )
        if not isinstance(self.content, str):
            raise MessageError(f"content must be a string, not {type(self.content).__name__}")
        if self.name is not None and (not isinstance(self.name, str) or not self.name.strip()):
            raise MessageError("name must be a non-empty string (or left out)")
        if self.time is not None:
            object.__setattr__(self, "time", parse_time(self.time))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionMessage:
        """A message from ``{"role", "content", "name"?, "time"?}``; any other key is an error."""
        if not isinstance(data, Mapping):
            raise MessageError(
                f"a message must be an object with role and content, not {type(data).__name__}"
            )
        unknown = [key for key in data if key not in MESSAGE_KEYS]
        if unknown:
            raise MessageError(
                f"unknown key {', '.join(repr(k) for k in unknown)}; "
                f"a message has {', '.join(MESSAGE_KEYS)}"
            )
        missing = [key for key in MESSAGE_KEYS[:2] if key not in data]
        if missing:
            raise MessageError(f"missing {' and '.join(missing)}")
        return cls(data["role"], data["content"], data.get("name"), data.get("time"))

    def to_dict(self) -> dict[str, str]:
        """The message as a dict, ``name`` and ``time`` left out when unset."""
        found = {"role": self.role, "content": self.content, "name": self.name, "time": self.time}
        return {key: value for key, value in found.items() if value is not None}


def message_event(message: SessionMessage, *, turn_id: str | None = None) -> Event:
    """The event that records ``message`` (see the table in this module's docstring)."""
    text, name, time = message.content, message.name, message.time
    if message.role == "user":
        return UserMessageAdded(text, turn_id=turn_id, name=name, time=time)
    if message.role == "assistant":
        return AssistantMessageCompleted(text, turn_id=turn_id, name=name, time=time)
    if message.role == "system":
        return SystemMessageAdded(text, turn_id=turn_id, name=name, time=time)
    return ToolInvocationCompleted(tool=name or "", output=text, turn_id=turn_id, time=time)


@dataclass(frozen=True)
class RecordedMessage:
    """A message as the event store holds it."""

    event_id: int
    session_id: str
    workspace_id: str | None
    recorded_at: str
    """When the event was appended (UTC, ISO 8601); ``message.time`` is when it was said."""
    turn_id: str | None
    message: SessionMessage

    @property
    def when(self) -> str:
        """When it was said if known, else when it was recorded."""
        return self.message.time or self.recorded_at


def _message(stored: StoredEvent) -> SessionMessage:
    payload = stored.payload
    if stored.type == "ToolInvocationCompleted":
        return SessionMessage(
            "tool", payload.get("output", ""), payload.get("tool") or None, payload.get("time")
        )
    role: Role = {
        "UserMessageAdded": "user",
        "AssistantMessageCompleted": "assistant",
        "SystemMessageAdded": "system",
    }[stored.type]  # type: ignore[assignment]
    return SessionMessage(role, payload["text"], payload.get("name"), payload.get("time"))


def recorded_message(stored: StoredEvent) -> RecordedMessage | None:
    """The message ``stored`` records, or ``None`` for an event that records none."""
    if stored.type not in _MESSAGE_TYPE_NAMES:
        return None
    return RecordedMessage(
        event_id=stored.id,
        session_id=stored.session_id,
        workspace_id=stored.workspace_id,
        recorded_at=stored.created_at,
        turn_id=stored.payload.get("turn_id"),
        message=_message(stored),
    )


_MESSAGE_TYPE_NAMES: Final = frozenset(cls.type for cls in MESSAGE_EVENTS)


def message_at(events: SqliteEventStore, event_id: int) -> RecordedMessage | None:
    """The message event ``event_id`` records (``None``: no such event, or not a message)."""
    stored = events.get(event_id)
    return None if stored is None else recorded_message(stored)


def read_messages(
    events: SqliteEventStore,
    session_id: str | None,
    *,
    after_id: int | None = None,
    limit: int | None = None,
    workspace_id: str | None = None,
) -> list[RecordedMessage]:
    """The messages of a session (every session when ``session_id`` is ``None``), in order."""
    stored = events.list(
        session_id=session_id,
        types=MESSAGE_EVENTS,
        after_id=after_id,
        limit=limit,
        workspace_id=workspace_id,
    )
    return [found for found in map(recorded_message, stored) if found is not None]


class NoSuchSession(KairoxError):
    """No session of that id holds messages (a typo, or another workspace's)."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(
            f"no session {session_id!r} with messages; `kairox session list` shows them"
        )


def history_message(message: SessionMessage) -> ChatMessage:
    """How a recorded message goes back into a prompt's history.

    A tool's output is folded into an assistant message naming the tool (chat APIs reject a
    bare ``tool`` role without its call id, and a tool's text must not gain the authority of
    a user or system message). A speaker name a chat API would reject as ``name`` (spaces,
    dots) leads the text instead.
    """
    if message.role == "tool":
        label = f"[tool {message.name} returned]" if message.name else "[tool returned]"
        return ChatMessage("assistant", f"{label}\n{message.content}")
    if message.name is None or _CHAT_NAME.fullmatch(message.name):
        return ChatMessage(message.role, message.content, name=message.name)
    return ChatMessage(message.role, f"{message.name}: {message.content}")


def messages_from(items: Iterable[SessionMessage | Mapping[str, Any]]) -> list[SessionMessage]:
    """``items`` as messages (dicts checked by :meth:`SessionMessage.from_dict`), all or none.

    The error names the first bad item by its position (1-based).
    """
    found: list[SessionMessage] = []
    for number, item in enumerate(items, start=1):
        try:
            found.append(
                item if isinstance(item, SessionMessage) else SessionMessage.from_dict(item)
            )
        except MessageError as exc:
            raise MessageError(f"message {number}: {exc}") from None
    return found


@dataclass(frozen=True)
class SessionSummary:
    """One session of a workspace: how many messages it holds, and when the first and
    the last were said (or recorded, see :attr:`RecordedMessage.when`)."""

    session_id: str
    messages: int
    first: str
    last: str


def session_summaries(events: SqliteEventStore, workspace_id: str | None) -> list[SessionSummary]:
    """The sessions holding messages (of ``workspace_id``; all when ``None``), the most
    recently active first."""
    found = []
    for session_id, count, first_id, last_id in events.sessions(
        MESSAGE_EVENTS, workspace_id=workspace_id
    ):
        first, last = message_at(events, first_id), message_at(events, last_id)
        assert first is not None and last is not None  # message events, never deleted
        found.append(SessionSummary(session_id, count, first.when, last.when))
    return found


# -- transcripts: JSON Lines, one message a line ------------------------------------------

# A file this bad is not a transcript: the first problems say so well enough.
_PROBLEMS_SHOWN: Final = 10


class TranscriptError(MessageError):
    """Lines of a transcript are not valid messages; ``problems`` holds ``(line, what)``."""

    def __init__(self, problems: list[tuple[int, str]], source: str = "the transcript") -> None:
        self.problems = problems
        shown = [f"line {number}: {what}" for number, what in problems[:_PROBLEMS_SHOWN]]
        if len(problems) > _PROBLEMS_SHOWN:
            shown.append(f"... and {len(problems) - _PROBLEMS_SHOWN} more bad lines")
        super().__init__(
            f"{source} has {len(problems)} bad line{'s' * (len(problems) != 1)}; nothing was "
            "imported. Each line must be a JSON object with role (user, assistant, system, "
            "tool), content, and optionally name and time (ISO 8601).\n" + "\n".join(shown)
        )


def read_transcript(
    lines: Iterable[bytes | str], source: str = "the transcript"
) -> list[SessionMessage]:
    """The messages of a JSON Lines transcript, one a line (blank lines are skipped).

    Every line is checked; :class:`TranscriptError` names each bad line (not JSON, not
    UTF-8, an unknown role or key, a bad time) and no message is returned.
    """
    found: list[SessionMessage] = []
    problems: list[tuple[int, str]] = []
    for number, raw in enumerate(lines, start=1):
        try:
            line = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        except UnicodeDecodeError as exc:
            problems.append((number, f"not UTF-8 (byte {exc.start + 1})"))
            continue
        if not line.strip():
            continue
        try:
            # Without its line ending: an error at the end of the line names its column.
            data = json.loads(line.rstrip("\r\n"))
        except json.JSONDecodeError as exc:
            problems.append((number, f"not valid JSON ({exc.msg} at column {exc.colno})"))
            continue
        try:
            found.append(SessionMessage.from_dict(data))
        except MessageError as exc:
            problems.append((number, str(exc)))
    if problems:
        raise TranscriptError(problems, source)
    return found


def transcript_line(recorded: RecordedMessage) -> str:
    """One line of a transcript for ``recorded`` (its ``time``: when said, else recorded).

    ASCII JSON: a control character in the content is escaped, never written raw.
    """
    message = dataclasses.replace(recorded.message, time=recorded.when)
    return json.dumps(message.to_dict(), ensure_ascii=True)
