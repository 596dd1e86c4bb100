"""The session actor: one asyncio task per session, working through a queue in order.

Turns, compactions and profile switches are commands on one queue, so a compaction never
runs in the middle of a turn and a profile switch waits for a running compaction. Each
turn rebuilds the prompt from scratch (memories, summaries, retrieval, history) with the
:class:`~kairox.context.assembler.ContextAssembler`, streams the model's reply through
the marker extractor, records everything as events, and hands proposed memories to the
approval flow. When the next turn would overflow the window, the oldest tier of history
is compacted into a summary; original events are never deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
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
from kairox.context.summarizer import ReportingSummarizer, Summarizer, SummaryReport
from kairox.context.tokens import TokenCounter
from kairox.errors import KairoxError
from kairox.events import (
    AssistantMessageCompleted,
    CompactionSummary,
    ContextAssembled,
    ContextCompactionCompleted,
    ContextCompactionFailed,
    ContextCompactionSkipped,
    ContextCompactionStarted,
    ModelTokenDelta,
    ProfileSwitched,
    StoredEvent,
    UserMessageAdded,
)
from kairox.memory import MarkerExtractor
from kairox.memory.approvals import TurnProposals
from kairox.messages import (
    MESSAGE_EVENTS,
    SessionMessage,
    history_message,
    message_event,
    messages_from,
    recorded_message,
)
from kairox.models import ChatMessage, ModelBackend
from kairox.paths import state_lock

if TYPE_CHECKING:
    from kairox.config import ProfileConfig
    from kairox.events import Event, SqliteEventStore
    from kairox.facade import AppFacade

# The most recent turns always stay verbatim; compaction summarises what is older.
KEEP_RECENT_TURNS = 2
# Compact when history alone would take more than this share of the budget next turn,
# leaving room for the prompt, memories and retrieval hits.
COMPACT_AT_SHARE = 0.6
# A summary may use at most this share of the budget.
SUMMARY_SHARE = 0.2
# Streamed text is written to the event log in batches of this many deltas, off the
# event loop; the completed message is still written once, whole.
DELTA_BATCH = 32
# How many archived messages recall offers the assembler each turn (best first); what
# fits its share of the budget is taken.
RECALL_CANDIDATES = 200


class SessionError(KairoxError, RuntimeError):
    """The session cannot do what was asked (closed, no model backend...)."""


class SessionBusyError(SessionError):
    """Another turn is being recorded in this session (in this process or another)."""


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
class CompactionResult:
    """What a compaction did (or why it did nothing)."""

    status: str  # "completed", "failed", "skipped"
    reason: str = ""
    summary: str = ""
    summarizer: str | None = None
    fallback: bool = False
    events_summarised: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    kept: tuple[str, ...] = ()
    """The kept facts the summary holds (see :class:`~kairox.context.summarizer.SummaryReport`)."""
    dropped: tuple[tuple[str, str], ...] = ()
    """``(fact, why)`` for each fact the summary left out."""


@dataclass
class _History:
    """What the session's events say about the conversation, read once per command."""

    summaries: list[StoredEvent]
    turns: list[HistoryTurn]


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

    async def _flush(self) -> None:
        while self._buffer:
            batch, self._buffer = self._buffer, []
            await asyncio.to_thread(self._events.append_many, *self._where, batch)

    async def close(self) -> None:
        """Write whatever is left, after the batch in flight."""
        if self._flushing is not None:
            await self._flushing
        await self._flush()


@dataclass
class _Command:
    run: Callable[[], Awaitable[Any]]
    done: asyncio.Future[Any] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class Session:
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

    # -- public commands ------------------------------------------------------------

    async def turn(
        self, prompt: str, *, on_text: Callable[[str], None] | None = None
    ) -> TurnResult:
        """Queue a turn; ``on_text`` receives visible text as it streams."""
        return await self._submit(lambda: self._turn(prompt, on_text), records=True)

    async def append(
        self, messages: Iterable[SessionMessage | Mapping[str, Any]], *, markers: bool = False
    ) -> AppendResult:
        """Queue appending ``messages`` as the session's history, in one transaction.

        Every message is checked first (a :class:`~kairox.messages.MessageError` names the
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

    def _read(self) -> _History:
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
        return _History(summaries, turns)

    def _history(self) -> list[HistoryTurn]:
        """Whole turns after the last summarised event, oldest first."""
        return self._read().turns

    # -- turns ----------------------------------------------------------------------

    async def _assemble(self, prompt: str, history: _History | None = None) -> Assembly:
        history = history or self._read()
        # Search and recall run side by side; recall's SQLite and numpy work in a thread.
        result, (recalled, recall_stage) = await asyncio.gather(
            self.facade.search(prompt, profile=self.profile_name, k=self.retrieval_k),
            asyncio.to_thread(self._recall, prompt),
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
                ContextAssembled(
                    trace=assembly.trace(),
                    total_tokens=assembly.used_tokens,
                    budget=assembly.budget,
                    turn_id=turn_id,
                ),
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
            text = "".join(pieces)
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

    async def _conclude(
        self,
        result: TurnResult,
        extractor: MarkerExtractor,
        tainted_by: Sequence[str],
        history: _History,
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
            recorded.append(
                ContextAssembled(
                    trace=assembly.trace(),
                    total_tokens=assembly.used_tokens,
                    budget=assembly.budget,
                    turn_id=turn_id,
                )
            )
        extractor = MarkerExtractor()
        text = extractor.feed(reply.content) + extractor.close()
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

    def _unanswered(self, history: _History) -> tuple[str | None, str] | None:
        """``(turn_id, text)`` of the session's last message if it is a user message."""
        if not history.turns:
            return None
        stored = self.events.get(history.turns[-1].event_ids[-1])
        found = None if stored is None else recorded_message(stored)
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
                text = extractor.feed(message.content) + extractor.close()
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

    async def _compact_as_recorded(self) -> list[CompactionResult]:
        """The automatic compactions a live conversation would have run at the end of
        each turn of the history (after an append of many turns at once)."""
        if not self.profile.auto_compact:
            return []
        history = self._read()
        done: list[CompactionResult] = []
        live: list[HistoryTurn] = []
        for turn in history.turns:
            live.append(turn)
            if not self._needs_compaction(live):
                continue
            result = await self._compact("auto", _History(history.summaries, list(live)))
            done.append(result)
            if result.status == "failed":
                break  # the next live turn tries again; a broken summariser fails each time
            if result.status == "completed":
                live = live[-KEEP_RECENT_TURNS:]
                history.summaries = self.events.list(
                    session_id=self.session_id, types=[CompactionSummary]
                )
        return done

    def _history_tokens(self, turns: Sequence[HistoryTurn]) -> int:
        return self._assembler().history_tokens(turns)

    def _budget(self) -> int:
        return self.profile.context_window - self.profile.headroom

    def _summary_tokens(self, summaries: Sequence[StoredEvent]) -> int:
        assembler = self._assembler()
        return sum(
            assembler.summary_tokens(
                CompactionSummaryItem(
                    e.payload["summary"], e.payload["first_event_id"], e.payload["last_event_id"]
                )
            )
            for e in summaries
        )

    def _needs_compaction(self, turns: Sequence[HistoryTurn]) -> bool:
        if len(turns) <= KEEP_RECENT_TURNS:
            return False
        return self._history_tokens(turns) > COMPACT_AT_SHARE * self._budget()

    # -- compaction -----------------------------------------------------------------

    async def _skip(self, reason: str, **details: Any) -> CompactionResult:
        self.events.append(
            self.session_id, self.facade.workspace_id, ContextCompactionSkipped(reason)
        )
        return CompactionResult("skipped", reason=reason, **details)

    async def _compact(self, trigger: str, history: _History | None = None) -> CompactionResult:
        try:
            return await self._compact_now(trigger, history)
        finally:
            if trigger == "manual":
                self._compaction_queued = False

    async def _compact_now(self, trigger: str, history: _History | None) -> CompactionResult:
        if trigger == "auto" and not self.profile.auto_compact:
            return await self._skip("auto_compact is off for this profile")
        history = history or self._read()
        turns = history.turns
        older = turns[:-KEEP_RECENT_TURNS] if len(turns) > KEEP_RECENT_TURNS else []
        if not older:
            return await self._skip(
                f"nothing to compact: the last {KEEP_RECENT_TURNS} turns always stay verbatim"
            )
        workspace = self.facade.workspace_id
        # What the prompt pays now for history and the summary compaction would replace:
        # the same ledger as ``after`` below, so the two compare like for like.
        before = self._history_tokens(turns) + self._summary_tokens(history.summaries[-1:])
        self.events.append(
            self.session_id,
            workspace,
            ContextCompactionStarted(trigger=trigger, tokens_before=before),
        )
        # Rolling summary: the previous summary is summarised again together with the
        # turns after it, so one summary stands for everything before the live history.
        # Separate summaries would pile up until they crowd out the history itself.
        previous = history.summaries
        carried = (
            [ChatMessage("assistant", previous[-1].payload["summary"], name="summary")]
            if previous
            else []
        )
        messages = carried + [m for turn in older for m in turn.messages]
        first = (
            previous[-1].payload["first_event_id"]
            if previous
            else min(i for turn in older for i in turn.event_ids)
        )
        last = max(i for turn in older for i in turn.event_ids)
        limit = max(64, int(SUMMARY_SHARE * self._budget()))
        name = self.profile.summarizer
        fallback = False
        try:
            summarizer = self.facade.summarizer(name, self.profile, self._backend)
            summary, report = await _summarize(
                summarizer, messages, max_tokens=limit, encoding=self.profile.encoding
            )
        except Exception as exc:
            self.events.append(
                self.session_id,
                workspace,
                ContextCompactionFailed(
                    error=f"{type(exc).__name__}: {exc}; falling back to a sliding window",
                    summarizer=name,
                ),
            )
            fallback = True
            name = "sliding-window"
            try:
                window = self.facade.summarizer(name, self.profile, None)
                summary, report = await _summarize(
                    window, messages, max_tokens=limit, encoding=self.profile.encoding
                )
            except Exception as second:  # even the fallback failed: the session goes on
                self.events.append(
                    self.session_id,
                    workspace,
                    ContextCompactionFailed(
                        error=f"{type(second).__name__}: {second}", summarizer=name
                    ),
                )
                return CompactionResult("failed", reason=str(second), summarizer=name)
        # The same ledger as the prompt's: the turns kept verbatim, plus the summary with
        # the framing it gets there.
        after = self._history_tokens(turns[-KEEP_RECENT_TURNS:]) + self._assembler().summary_tokens(
            CompactionSummaryItem(summary, first, last)
        )
        if after >= before:
            # A summary no smaller than what it replaces only loses detail: keep the history.
            return await self._skip(
                f"the summary would not shrink the history ({before:,} -> {after:,} tokens); "
                "history kept as it was",
                summarizer=name,
                fallback=fallback,
                tokens_before=before,
                tokens_after=before,
            )
        stored = self.events.append(
            self.session_id,
            workspace,
            CompactionSummary(
                summary,
                first,
                last,
                summarizer=name,
                fallback=fallback,
                kept=list(report.kept),
                dropped=[{"fact": fact, "why": why} for fact, why in report.dropped],
            ),
        )
        self.events.append(
            self.session_id,
            workspace,
            ContextCompactionCompleted(
                summary_event_id=stored.id, tokens_before=before, tokens_after=after
            ),
        )
        return CompactionResult(
            "completed",
            summary=summary,
            summarizer=name,
            fallback=fallback,
            events_summarised=sum(len(t.event_ids) for t in older),
            tokens_before=before,
            tokens_after=after,
            kept=report.kept,
            dropped=report.dropped,
        )

    # -- profiles -------------------------------------------------------------------

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


async def _summarize(
    summarizer: Summarizer, messages: list[ChatMessage], *, max_tokens: int, encoding: str
) -> tuple[str, SummaryReport]:
    """The summary, and what it kept and dropped when the summariser says so."""
    if isinstance(summarizer, ReportingSummarizer):
        return await summarizer.summarize_with_report(
            messages, max_tokens=max_tokens, encoding=encoding
        )
    return await summarizer.summarize(messages, max_tokens=max_tokens, encoding=encoding), (
        SummaryReport()
    )


@contextlib.asynccontextmanager
async def open_session(facade: AppFacade, session_id: str | None = None, **options: Any):
    """``async with open_session(facade) as session:`` — start, use, finish cleanly."""
    session = Session(facade, session_id, **options)
    session.start()
    try:
        yield session
    finally:
        await session.close()
