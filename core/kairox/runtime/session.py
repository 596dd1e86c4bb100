"""The session actor: one asyncio task per session, working through a queue in order.

Turns, compactions and profile switches are commands on one queue, so a compaction never
runs in the middle of a turn and a profile switch waits for a running compaction. Each
turn rebuilds the prompt from scratch (memories, summaries, retrieval, history) with the
:class:`~kairox.context.assembler.ContextAssembler`, streams the model's reply through
the marker extractor, records everything as events, and hands proposed memories to the
approval flow. When the next turn would overflow the window, the oldest tier of history
is compacted into a summary (:mod:`kairox.runtime.session_compaction`); original events are never
deleted. Another agent loop feeds the same pipeline by appending messages and recording
its model's replies (:mod:`kairox.runtime.session_recording`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kairox.context.assembler import (
    Assembly,
    AssemblyInput,
    CompactionSummaryItem,
    ContextAssembler,
    HistoryTurn,
    RecalledTurn,
)
from kairox.context.tokens import TokenCounter
from kairox.memory import MarkerExtractor, recorded_reply
from kairox.memory.approvals import TurnProposals
from kairox.runtime.session_compaction import (
    COMPACT_AT_SHARE,
    KEEP_RECENT_TURNS,
    SUMMARY_SHARE,
    CompactionResult,
    History,
)
from kairox.runtime.session_recording import (
    AppendResult,
    RecordingMixin,
    SessionBusyError,
    SessionError,
    TurnResult,
    assembled_event,
)
from kairox.store.events import (
    AssistantMessageCompleted,
    CompactionSummary,
    ModelTokenDelta,
    ProfileSwitched,
    UserMessageAdded,
)
from kairox.store.messages import (
    MESSAGE_EVENTS,
    SessionMessage,
    history_message,
    messages_from,
    recorded_message,
)
from kairox.support.models import ChatMessage, ModelBackend

if TYPE_CHECKING:
    from kairox.config.schema import ProfileConfig
    from kairox.runtime.facade import AppFacade
    from kairox.store.events import Event, SqliteEventStore

__all__ = [
    "COMPACT_AT_SHARE",
    "DELTA_BATCH",
    "KEEP_RECENT_TURNS",
    "SUMMARY_SHARE",
    "AppendResult",
    "CompactionResult",
    "Session",
    "SessionBusyError",
    "SessionError",
    "TurnResult",
    "open_session",
]

# Streamed text is written to the event log in batches of this many deltas, off the
# event loop; the completed message is still written once, whole.
DELTA_BATCH = 32
# How many archived messages recall offers the assembler each turn (best first); what
# fits its share of the budget is taken.
RECALL_CANDIDATES = 200


class _DeltaWriter:
    """Writes a turn's token deltas in batches on a worker thread, in order.

    Committing one row per streamed chunk on the event-loop thread stalls the loop for
    a disk sync each time; here at most one batch is in flight and the stream goes on.
    """

    def __init__(self, events: SqliteEventStore, session_id: str, workspace_id: str) -> None:
        self._events = events
        self._where = (session_id, workspace_id)
        self._buffer: list[Event] = []
        self._flushing: asyncio.Task[None] | None = None

    def add(self, event: Event) -> None:
        self._buffer.append(event)
        if len(self._buffer) >= DELTA_BATCH and (self._flushing is None or self._flushing.done()):
            self._flushing = asyncio.ensure_future(self._flush())

    async def _flush(self, *, rest: bool = False) -> None:
        # Only full batches while streaming: what arrived during a write waits for the
        # next full batch (or the close), so a slow disk never turns into many small ones.
        while self._buffer and (rest or len(self._buffer) >= DELTA_BATCH):
            batch, self._buffer = self._buffer, []
            await asyncio.to_thread(self._events.append_many, *self._where, batch)

    async def close(self) -> None:
        """Write whatever is left, after the batch in flight."""
        if self._flushing is not None:
            await self._flushing
        await self._flush(rest=True)


@dataclass
class _Command:
    run: Callable[[], Awaitable[Any]]
    done: asyncio.Future[Any] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class Session(RecordingMixin):
    """One conversation: an actor that owns its queue of commands.

    :param facade: the application facade (config, stores, retrieval).
    :param session_id: a stable id; events and session memories are keyed by it. A new
        id starts a new conversation; an existing one continues it.
    :param profile: the model profile (name or alias).
    :param backend: the model backend; by default the profile's ``backend``.
    """

    def __init__(
        self,
        facade: AppFacade,
        session_id: str | None = None,
        *,
        profile: str | None = None,
        backend: ModelBackend | None = None,
        retrieval_k: int = 8,
    ) -> None:
        self.facade = facade
        self.session_id = session_id or f"session-{uuid.uuid4().hex[:12]}"
        self.profile_name = facade.resolve_profile(profile)
        self._backend = backend
        self._backend_from_profile = backend is None
        self.retrieval_k = retrieval_k
        self.counter = TokenCounter(self.profile.encoding)
        self._queue: asyncio.Queue[_Command | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._compaction_queued = False

    # -- lifecycle ------------------------------------------------------------------

    @property
    def profile(self) -> ProfileConfig:
        return self.facade.config.profiles[self.profile_name]

    @property
    def events(self) -> SqliteEventStore:
        return self.facade.events

    def _assembler(self) -> ContextAssembler:
        """The profile's assembler; its counter's per-event cache is the one token ledger."""
        recall = self.facade.config.recall
        return ContextAssembler.for_profile(
            self.profile,
            self.counter,
            recall_share=recall.share,
            recall_max_tokens=recall.max_tokens,
        )

    @property
    def backend(self) -> ModelBackend:
        if self._backend is None:
            self._backend = self.facade.model_backend(self.profile)
        return self._backend

    async def __aenter__(self) -> Session:
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"kairox-{self.session_id}")

    async def close(self) -> None:
        """Finish queued work, then stop the actor."""
        if self._task is not None:
            await self._queue.put(None)
            await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            command = await self._queue.get()
            if command is None:
                return
            try:
                result = await command.run()
            except BaseException as exc:  # the caller gets it; the actor keeps going
                if not command.done.cancelled():
                    command.done.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
            else:
                if not command.done.cancelled():
                    command.done.set_result(result)

    async def _submit(self, run: Callable[[], Awaitable[Any]], *, records: bool = False) -> Any:
        """Queue ``run``; one that ``records`` into the session runs under the busy guard."""
        if self._task is None:
            raise SessionError("the session is not running; use `async with Session(...)`")
        command = _Command((lambda: self._guarded(run)) if records else run)
        await self._queue.put(command)
        return await command.done

    async def turn(
        self, prompt: str, *, on_text: Callable[[str], None] | None = None
    ) -> TurnResult:
        """Queue a turn; ``on_text`` receives visible text as it streams."""
        return await self._submit(lambda: self._turn(prompt, on_text), records=True)

    async def append(
        self, messages: Iterable[SessionMessage | Mapping[str, Any]], *, markers: bool = False
    ) -> AppendResult:
        """Queue appending ``messages`` as the session's history, in one transaction.

        Every message is checked first (a :class:`~kairox.store.messages.MessageError` names the
        first bad one and nothing is appended). After the append, the automatic
        compaction runs at each turn's end where a live conversation would have run it.
        Markers in assistant messages are stripped and proposed only with ``markers``;
        otherwise the text is kept verbatim and nothing is proposed.
        """
        checked = messages_from(messages)
        return await self._submit(lambda: self._append(checked, markers), records=True)

    async def record_reply(
        self,
        reply: SessionMessage,
        *,
        prompt: SessionMessage | None = None,
        assembly: Assembly | None = None,
        model: str | None = None,
        tainted_by: Sequence[str] = (),
    ) -> TurnResult:
        """Queue recording a reply the caller's own model gave: a chat turn's pipeline.

        The reply's markers are stripped and go through approval, with the taint of the
        ``assembly`` the model was given (its tool output and retrieved text) and of
        ``tainted_by``; the events are the ones a chat turn appends; the automatic
        compaction runs at the end. ``prompt`` is the turn's user message: recorded
        unless it is already the session's last message (so a turn's prompt is recorded
        once however the caller reached here); ``None`` answers the last message.
        """
        if reply.role != "assistant":
            raise SessionError(f"a reply is an assistant message, not a {reply.role} one")
        return await self._submit(
            lambda: self._record_reply(reply, prompt, assembly, model, tainted_by), records=True
        )

    async def compact(self) -> CompactionResult:
        """Queue a manual compaction (skipped if one is already queued)."""
        if self._compaction_queued:
            return await self._submit(lambda: self._skip("a compaction is already queued"))
        self._compaction_queued = True
        return await self._submit(lambda: self._compact("manual"), records=True)

    async def switch_profile(self, profile: str) -> str:
        """Queue a profile switch; it waits for anything queued before it."""
        return await self._submit(lambda: self._switch(profile))

    async def assemble(self, prompt: str) -> Assembly:
        """The prompt a turn with ``prompt`` would send now (nothing is recorded)."""
        return await self._submit(lambda: self._assemble(prompt))

    # -- history from events ----------------------------------------------------------

    def _read(self) -> History:
        """Summaries and whole turns after the last summarised event, oldest first."""
        summaries = self.events.list(session_id=self.session_id, types=[CompactionSummary])
        after = summaries[-1].payload["last_event_id"] if summaries else None
        stored = self.events.list(session_id=self.session_id, types=MESSAGE_EVENTS, after_id=after)
        turns: list[HistoryTurn] = []
        messages: list[ChatMessage] = []
        ids: list[int] = []
        tools = False

        def close_turn() -> None:
            if messages:
                turns.append(HistoryTurn(tuple(messages), tuple(ids), tools))

        for event in stored:
            found = recorded_message(event)
            assert found is not None  # only message events were asked for
            if found.message.role == "user":
                close_turn()
                messages, ids, tools = [], [], False
            tools = tools or found.message.role == "tool"
            messages.append(history_message(found.message))
            ids.append(event.id)
        close_turn()
        return History(summaries, turns)

    def _history(self) -> list[HistoryTurn]:
        """Whole turns after the last summarised event, oldest first."""
        return self._read().turns

    # -- turns ----------------------------------------------------------------------

    async def _assemble(self, prompt: str, history: History | None = None) -> Assembly:
        history = history or self._read()
        # Search and recall run side by side; recall's SQLite and numpy work in a thread,
        # started first: a search of local sources may run on this loop's thread meanwhile.
        (recalled, recall_stage), result = await asyncio.gather(
            asyncio.to_thread(self._recall, prompt),
            self.facade.search(prompt, profile=self.profile_name, k=self.retrieval_k),
        )
        data = AssemblyInput(
            system_prompt=self.profile.system_prompt,
            prompt=prompt,
            memories=self.facade.memory.store.visible_to(self.facade.workspace_id, self.session_id),
            summaries=[  # the latest summary already carries every earlier one
                CompactionSummaryItem(
                    e.payload["summary"], e.payload["first_event_id"], e.payload["last_event_id"]
                )
                for e in history.summaries[-1:]
            ],
            # Fusion's ranking as it came, each hit with its source's declared group.
            hits=result.hits,
            groups=result.groups,
            stages=[
                {
                    "stage": report.source,
                    "status": str(report.status),
                    "latency_ms": round(report.latency_ms, 2),
                    "error": report.error,
                }
                for report in result.stages
            ]
            + recall_stage,
            history=history.turns,
            recall=recalled,
        )
        return self._assembler().assemble(data)

    def _recall(self, prompt: str) -> tuple[list[RecalledTurn], list[dict[str, Any]]]:
        """Recall for ``prompt``; a failure leaves recall out and says so as a stage,
        as a failing source does (the turn goes on)."""
        started = time.perf_counter()
        try:
            found = self.facade.recall(
                prompt,
                session_id=self.session_id,
                k=RECALL_CANDIDATES,
                encoding=self.profile.encoding,
            )
        except Exception as exc:
            stage = {
                "stage": "recall",
                "status": "error",
                "latency_ms": round((time.perf_counter() - started) * 1000, 2),
                "error": f"{type(exc).__name__}: {exc}",
            }
            return [], [stage]
        return found, []

    async def _turn(self, prompt: str, on_text: Callable[[str], None] | None) -> TurnResult:
        turn_id = uuid.uuid4().hex[:12]
        workspace = self.facade.workspace_id
        history = self._read()  # the one read of this turn
        # Assemble before recording the message: a prompt the budget guard refuses leaves
        # no trace in the history it would otherwise clog.
        assembly = await self._assemble(prompt, history)
        asked, _ = self.events.append_many(
            self.session_id,
            workspace,
            [
                UserMessageAdded(prompt, turn_id=turn_id),
                assembled_event(assembly, turn_id),
            ],
        )
        extractor = MarkerExtractor()
        pieces: list[str] = []
        deltas = _DeltaWriter(self.events, self.session_id, workspace)

        def show(visible: str) -> None:
            if visible:
                pieces.append(visible)
                deltas.add(ModelTokenDelta(visible, turn_id))
                if on_text is not None:
                    on_text(visible)

        try:
            async for chunk in self.backend.stream(
                assembly.messages, model=self.profile.model, max_tokens=self.profile.headroom
            ):
                show(extractor.feed(chunk))
        finally:
            # Whatever arrived is kept, also when the backend failed part-way.
            show(extractor.close())
            await deltas.close()
            text = recorded_reply("".join(pieces))
            answered = self.events.append(
                self.session_id,
                workspace,
                AssistantMessageCompleted(
                    text, turn_id=turn_id, model=self.profile.model, profile=self.profile_name
                ),
            )
        # This turn joins the history read at its start: no second read.
        history.turns.append(
            HistoryTurn(
                (ChatMessage("user", prompt), ChatMessage("assistant", text)),
                (asked.id, answered.id),
            )
        )
        # Only what the model actually saw counts: tool output and retrieved text that
        # made it into the prompt.
        return await self._conclude(
            TurnResult(turn_id, text, assembly, TurnProposals()),
            extractor,
            assembly.tainted_by,
            history,
        )

    async def _switch(self, profile: str) -> str:
        name = self.facade.resolve_profile(profile)
        previous, self.profile_name = self.profile_name, name
        if self._backend_from_profile:
            self._backend = None  # built again from the new profile on next use
        self.counter = TokenCounter(self.profile.encoding)
        self.events.append(
            self.session_id,
            self.facade.workspace_id,
            ProfileSwitched(to_profile=name, from_profile=previous),
        )
        return name


@contextlib.asynccontextmanager
async def open_session(facade: AppFacade, session_id: str | None = None, **options: Any):
    """``async with open_session(facade) as session:`` — start, use, finish cleanly."""
    session = Session(facade, session_id, **options)
    session.start()
    try:
        yield session
    finally:
        await session.close()
