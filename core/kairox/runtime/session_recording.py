"""Recording into a session what another agent loop said: appended messages and replies.

The :class:`~kairox.runtime.session.Session` actor runs these commands from its queue, like its
own chat turns. Appending checks every message first and writes them in one transaction;
a recorded reply goes through the end of a chat turn (markers, approval with the turn's
taint, automatic compaction). While one actor records into a session, the busy guard
keeps every other one (another API call, an MCP client, another process) out of it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kairox.memory import MarkerExtractor, recorded_reply
from kairox.memory.approvals import TurnProposals
from kairox.runtime.session_compaction import CompactionMixin, CompactionResult, History
from kairox.store.events import AssistantMessageCompleted, ContextAssembled
from kairox.store.messages import SessionMessage, message_at, message_event
from kairox.support.errors import KairoxError
from kairox.support.paths import state_lock

if TYPE_CHECKING:
    from kairox.context.assembler import Assembly
    from kairox.store.events import Event


class SessionError(KairoxError, RuntimeError):
    """The session cannot do what was asked (closed, no model backend...)."""


class SessionBusyError(SessionError):
    """Another turn is being recorded in this session (in this process or another)."""


@dataclass
class AppendResult:
    """What appending messages to a session did."""

    event_ids: list[int]
    """The new message events, in the order of the messages."""
    proposals: TurnProposals = field(default_factory=TurnProposals)
    """Memories proposed by the markers of assistant messages (only when asked for)."""
    compactions: list[CompactionResult] = field(default_factory=list)
    """The automatic compactions the new turns set off, in order."""


@dataclass
class TurnResult:
    """What one turn produced."""

    turn_id: str
    text: str
    assembly: Assembly | None
    """The prompt the model was given (``None``: a recorded reply whose prompt Kairox
    did not assemble)."""
    proposals: TurnProposals
    compaction: CompactionResult | None = None


def assembled_event(assembly: Assembly, turn_id: str) -> ContextAssembled:
    """The event that records the trace of a turn's assembled prompt."""
    return ContextAssembled(
        trace=assembly.trace(),
        total_tokens=assembly.used_tokens,
        budget=assembly.budget,
        turn_id=turn_id,
    )


class PendingPrompts:
    """The prompt each session's model was last given, for recording its reply.

    A surface that assembles a prompt (``context``) and later records the reply to it
    remembers here what it assembled, so the reply gets the prompt's user message and
    the taint of what the prompt held.
    """

    def __init__(self) -> None:
        self._asked: dict[str, tuple[str, Assembly]] = {}

    def asked(self, session_id: str, prompt: str, assembly: Assembly) -> None:
        """``prompt`` was assembled into ``assembly`` for session ``session_id``."""
        self._asked[session_id] = (prompt, assembly)

    def for_reply(
        self, session_id: str, prompt: str | None
    ) -> tuple[SessionMessage | None, Assembly | None]:
        """The user message and assembly a reply in ``session_id`` answers: ``prompt``
        when given (with the assembly only if it was this prompt's), else the last prompt
        assembled."""
        asked, assembly = self._asked.get(session_id, (None, None))
        if prompt is not None and prompt != asked:
            asked, assembly = prompt, None  # the model was not given that assembly
        return (None if asked is None else SessionMessage("user", asked)), assembly

    def answered(self, session_id: str) -> None:
        """A reply was recorded: the session's turn is over."""
        self._asked.pop(session_id, None)


class RecordingMixin(CompactionMixin):
    """The recording commands of :class:`~kairox.runtime.session.Session` (which provides the
    attributes declared here and in :class:`CompactionMixin`)."""

    profile_name: str

    async def _conclude(
        self,
        result: TurnResult,
        extractor: MarkerExtractor,
        tainted_by: Sequence[str],
        history: History,
    ) -> TurnResult:
        """The end of every turn, however its reply arrived: the reply's markers go to
        the approval flow, then the automatic compaction runs if the next turn would
        overflow (``history`` holds this turn)."""
        result.proposals = self.facade.memory.handle_turn(
            extractor.markers,
            extractor.rejected,
            session_id=self.session_id,
            workspace_id=self.facade.workspace_id,
            turn_id=result.turn_id,
            tainted_by=tainted_by,
        )
        if self._needs_compaction(history.turns):
            result.compaction = await self._compact("auto", history)
        return result

    async def _guarded(self, run: Callable[[], Awaitable[Any]]) -> Any:
        """``run()`` while no other actor records into this session (the busy guard).

        Commands of one actor never overlap; this keeps a second actor on the same
        session id (another API call, an MCP client, another process) from interleaving
        its turn with this one's, which would garble both turns' history.
        """
        with contextlib.ExitStack() as held:
            try:
                held.enter_context(
                    state_lock(self.facade.database, "session", self.session_id, wait=False)
                )
            except BlockingIOError:
                raise SessionBusyError(
                    f"session {self.session_id!r} is busy: another turn is being recorded in "
                    "it (here or in another process); try again when that turn has finished"
                ) from None
            return await run()

    # -- the commands Session.record_reply and Session.append queue ------------------

    async def _record_reply(
        self,
        reply: SessionMessage,
        prompt: SessionMessage | None,
        assembly: Assembly | None,
        model: str | None,
        tainted_by: Sequence[str],
    ) -> TurnResult:
        history = self._read()
        unanswered = self._unanswered(history)
        recorded: list[Event] = []
        if prompt is not None and (unanswered is None or unanswered[1] != prompt.content):
            turn_id = uuid.uuid4().hex[:12]
            recorded.append(message_event(prompt, turn_id=turn_id))
        else:  # the reply answers the last message, which may open this turn
            turn_id = (unanswered and unanswered[0]) or uuid.uuid4().hex[:12]
        if assembly is not None:
            recorded.append(assembled_event(assembly, turn_id))
        extractor = MarkerExtractor()
        text = recorded_reply(extractor.feed(reply.content) + extractor.close())
        recorded.append(
            AssistantMessageCompleted(
                text,
                turn_id=turn_id,
                model=model,
                profile=self.profile_name,
                name=reply.name,
                time=reply.time,
            )
        )
        self.events.append_many(self.session_id, self.facade.workspace_id, recorded)
        history = self._read()
        # The model saw the assembly's unvetted text, and any tool output of this turn.
        own_tools = bool(history.turns) and history.turns[-1].had_tool_output
        taint = [
            *(assembly.tainted_by if assembly is not None else []),
            *(["tool output"] if own_tools else []),
            *tainted_by,
        ]
        return await self._conclude(
            TurnResult(turn_id, text, assembly, TurnProposals()),
            extractor,
            list(dict.fromkeys(taint)),
            history,
        )

    def _unanswered(self, history: History) -> tuple[str | None, str] | None:
        """``(turn_id, text)`` of the session's last message if it is a user message."""
        if not history.turns:
            return None
        found = message_at(self.events, history.turns[-1].event_ids[-1])
        if found is None or found.message.role != "user":
            return None
        return found.turn_id, found.message.content

    async def _append(self, messages: list[SessionMessage], markers: bool) -> AppendResult:
        if not messages:
            return AppendResult([])
        recorded: list[Event] = []
        extracted: list[tuple[str, MarkerExtractor, list[str]]] = []
        turn_id, tools = uuid.uuid4().hex[:12], False
        for message in messages:
            if message.role == "user":
                turn_id, tools = uuid.uuid4().hex[:12], False
            tools = tools or message.role == "tool"
            if markers and message.role == "assistant":
                extractor = MarkerExtractor()
                text = recorded_reply(extractor.feed(message.content) + extractor.close())
                message = dataclasses.replace(message, content=text)
                extracted.append((turn_id, extractor, ["tool output"] if tools else []))
            recorded.append(message_event(message, turn_id=turn_id))
        stored = self.events.append_many(self.session_id, self.facade.workspace_id, recorded)
        result = AppendResult([event.id for event in stored])
        for turn, extractor, taint in extracted:
            found = self.facade.memory.handle_turn(
                extractor.markers,
                extractor.rejected,
                session_id=self.session_id,
                workspace_id=self.facade.workspace_id,
                turn_id=turn,
                tainted_by=taint,
            )
            result.proposals.accepted += found.accepted
            result.proposals.pending += found.pending
            result.proposals.rejected += found.rejected
        result.compactions = await self._compact_as_recorded()
        return result
