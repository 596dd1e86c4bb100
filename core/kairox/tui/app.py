"""The Textual application behind ``kairox tui``.

Layout: a header naming the profile and session, the chat stream (user messages, the
assistant's reply streaming in, "remember this?" cards, notes and error lines) above the
prompt input, the trace panel on the right, and a footer with the keys.

The app is a thin surface over :class:`~kairox.runtime.facade.AppFacade` and one
:class:`~kairox.runtime.session.Session` actor, exactly like ``kairox chat``: turns, compactions
and profile switches go to the session's queue; approvals go to ``facade.memory``. It
keeps no copy of any memory: cards re-read their proposal from the store on every
refresh, the trace panel tails the event store, and each turn's prompt is assembled by
the session from the store. So an edit made in another process (``kairox serve``,
``kairox memory edit``) is what the next turn sends, and a proposal decided elsewhere
shows as decided here.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, ClassVar

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.events import Resize
from textual.widget import Widget
from textual.widgets import Footer, Header, Input

from kairox.memory.approvals import MemoryNotFound
from kairox.runtime.session import Session
from kairox.tui.formatting import TRACE_EVENT_TYPES, compaction_note, trace_event_lines
from kairox.tui.screens import ProfilePicker
from kairox.tui.widgets import (
    AssistantMessage,
    ErrorLine,
    MemoryCard,
    Note,
    TracePanel,
    UserMessage,
)

if TYPE_CHECKING:
    from kairox.runtime.facade import AppFacade
    from kairox.runtime.session import TurnResult
    from kairox.store.events import StoredEvent
    from kairox.support.models import ModelBackend

__all__ = ["WIDE_SCREEN", "KairoxApp"]

#: From this many columns on, the trace panel is shown unless the user toggled it.
WIDE_SCREEN = 110
#: How often the app re-reads the store (decisions and edits made in other processes).
POLL_SECONDS = 1.0
#: How long quitting waits for a running turn before cancelling it.
CLOSE_TIMEOUT_S = 3.0
#: How many earlier messages of a continued session are shown on start.
REPLAY_MESSAGES = 40
MEMORY_DECISIONS = ("MemoryAccepted", "MemoryRejected")

HELP = (
    "Enter sends · Esc reviews proposals (a approve · r reject · s later) · "
    "/compact /profile [NAME] /pending /trace /quit"
)


class KairoxApp(App[None]):
    """Chat with a profile's model, approve proposed memories inline, watch the trace.

    :param facade: the application facade of the workspace.
    :param profile: the profile name or alias to start with (default: ``default``).
    :param backend: a model backend to use instead of the profile's (a ScriptedModel in
        tests and demos; ``--backend`` / ``--script`` on the command line).
    :param session_id: continue this session (its earlier messages are shown).
    :param poll_seconds: how often to re-read the store for changes made elsewhere.
    """

    TITLE = "kairox"
    # ctrl+p is the profile switcher here; the palette would only list these same actions.
    ENABLE_COMMAND_PALETTE = False

    CSS = """
    #main { height: 1fr; }
    #chat { width: 1fr; }
    #stream { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
    #prompt { margin: 0 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        # Priority: these must work while the prompt input has focus (Input binds ctrl+k).
        Binding("ctrl+k", "compact", "Compact", priority=True),
        Binding("ctrl+p", "pick_profile", "Profile", priority=True),
        Binding("ctrl+t", "toggle_trace", "Trace", priority=True),
        Binding("ctrl+q", "quit", "Quit", priority=True),
        # Plain letters act only when the input does not have focus (it types them).
        Binding("t", "toggle_trace", "Trace", show=False),
        Binding("a", "approve", "Approve", show=False),
        Binding("r", "reject", "Reject", show=False),
        Binding("escape", "review", "Review proposals", show=False),
    ]

    def __init__(
        self,
        facade: AppFacade,
        *,
        profile: str | None = None,
        backend: ModelBackend | None = None,
        session_id: str | None = None,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        super().__init__()
        self.facade = facade
        self.session = Session(facade, session_id, profile=profile, backend=backend)
        self.poll_seconds = poll_seconds
        self._continuing = session_id is not None
        self._last_event_id = 0
        self._turns_traced = 0
        # None until the user toggles the trace; until then the width decides.
        self._trace_choice: bool | None = None

    # -- layout -----------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header(icon="◆")
        with Horizontal(id="main"):
            with Vertical(id="chat"):
                yield VerticalScroll(id="stream")
                yield Input(placeholder="Message kairox (Enter to send; /help)", id="prompt")
            yield TracePanel(id="trace")
        yield Footer()

    @property
    def stream(self) -> VerticalScroll:
        return self.query_one("#stream", VerticalScroll)

    @property
    def trace(self) -> TracePanel:
        return self.query_one("#trace", TracePanel)

    @property
    def prompt_input(self) -> Input:
        return self.query_one("#prompt", Input)

    async def on_mount(self) -> None:
        self.session.start()
        self._show_profile()
        self._last_event_id = self._latest_event_id()
        await self.stream.mount(Note(HELP, style="dim"))
        if self._continuing:
            await self._replay_history()
        await self._show_waiting_proposals()
        self.trace.say(f"session {self.session.session_id}", "bold")
        self.trace.say(f"workspace {self.facade.workspace_id}", "dim")
        self.set_interval(self.poll_seconds, self._tick)
        self.prompt_input.focus()
        self._scroll_to_end()

    async def on_unmount(self) -> None:
        # Let a running turn finish briefly (its events complete the history), but never
        # hang the terminal on a slow backend: cancelling still records what streamed.
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(self.session.close(), timeout=CLOSE_TIMEOUT_S)

    def on_resize(self, event: Resize) -> None:
        if self._trace_choice is None:
            self.trace.display = event.size.width >= WIDE_SCREEN

    def _show_profile(self) -> None:
        profile = self.session.profile
        self.sub_title = (
            f"profile {self.session.profile_name} · {profile.model} · "
            f"{profile.context_window:,} tokens · session {self.session.session_id}"
        )

    # -- the stream ---------------------------------------------------------------------

    def _scroll_to_end(self) -> None:
        self.call_after_refresh(self.stream.scroll_end, animate=False)

    async def _add(self, *widgets: Widget, after: Widget | None = None) -> None:
        if after is not None and after.parent is self.stream:
            await self.stream.mount_all(widgets, after=after)
        else:
            await self.stream.mount_all(widgets)
        self._scroll_to_end()

    async def _replay_history(self) -> None:
        """Show the continued session's last messages, muted, so the user has the thread."""
        stored = self.facade.events.list(
            session_id=self.session.session_id,
            types=["UserMessageAdded", "AssistantMessageCompleted"],
        )[-REPLAY_MESSAGES:]
        if not stored:
            await self._add(Note(f"new session {self.session.session_id}"))
            return
        widgets: list[Widget] = [Note(f"continuing session {self.session.session_id}")]
        for event in stored:
            text = event.payload.get("text", "")
            if event.type == "UserMessageAdded":
                widgets.append(UserMessage(text, earlier=True))
            else:
                widgets.append(AssistantMessage(text, earlier=True))
        await self._add(*widgets)

    async def _show_waiting_proposals(self) -> None:
        """Cards for proposals still pending in the store (they survive restarts)."""
        shown = {card.memory_id for card in self.query(MemoryCard)}
        waiting = [
            r for r in self.facade.memory.pending(self.facade.workspace_id) if r.id not in shown
        ]
        if not waiting:
            return
        count = len(waiting)
        note = Note(
            f"{count} memory proposal{'s' if count != 1 else ''} waiting for a decision "
            "(Esc to review)"
        )
        cards = [MemoryCard(self.facade, r.id, session_id=self.session.session_id) for r in waiting]
        await self._add(note, *cards)

    # -- turns --------------------------------------------------------------------------

    @on(Input.Submitted, "#prompt")
    async def _submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        event.input.value = ""
        if not text:
            return
        if text.startswith("/"):
            await self._command(text)
            return
        await self.start_turn(text)

    async def start_turn(self, prompt: str) -> None:
        """Show the prompt and queue the turn; the reply streams into its own widget.

        Turns queue in the session actor, so a second prompt sent while a reply streams
        gets its own reply widget below and runs after the first.
        """
        reply = AssistantMessage(streaming=True)
        await self._add(UserMessage(prompt), reply)
        self.run_worker(self._turn(prompt, reply), group="turns", exit_on_error=False)

    async def _turn(self, prompt: str, reply: AssistantMessage) -> None:
        def on_text(chunk: str) -> None:
            if not reply.is_attached:  # the app is closing while the turn finishes
                return
            reply.append(chunk)
            self._scroll_to_end()

        try:
            result = await self.session.turn(prompt, on_text=on_text)
        except Exception as exc:  # shown in the stream; the app and the session go on
            await self._turn_failed(reply, exc)
        else:
            reply.finish()
            await self._turn_done(reply, result)
        finally:
            self.poll_trace()

    async def _turn_failed(self, reply: AssistantMessage, exc: Exception) -> None:
        message = f"{type(exc).__name__}: {exc}"
        self.poll_trace()  # the turn's accounting (assembled before the model failed) first
        error = ErrorLine(message + (" (the partial reply above was kept)" if reply.text else ""))
        await self._add(error, after=reply)
        if reply.text:
            reply.finish(cut_off=True)
        else:
            await reply.remove()
        self.trace.say(f"turn failed: {message}", "bold red")

    async def _turn_done(self, reply: AssistantMessage, result: TurnResult) -> None:
        widgets: list[Widget] = []
        for record in result.proposals.accepted:
            key = f" ({record.key})" if record.key else ""
            widgets.append(Note(f"session memory noted{key}: {record.body}"))
        for _raw, reason in result.proposals.rejected:
            widgets.append(Note(f"a memory proposal was not kept: {reason}", style="italic red"))
        for record in result.proposals.merged:
            widgets.append(Note(f"already known: restates {record.scope} memory #{record.id}"))
        cards = [
            MemoryCard(self.facade, record.id, session_id=self.session.session_id)
            for record in result.proposals.pending
        ]
        widgets += cards
        if result.compaction is not None and result.compaction.status != "skipped":
            widgets.append(Note("history " + compaction_note(result.compaction)))
        if widgets:
            await self._add(*widgets, after=reply)
        if cards:
            self._offer(cards[0])

    def _offer(self, card: MemoryCard) -> None:
        """Put a new proposal in front of the user, like the line chat's immediate question.

        Focus moves to the card (so ``a`` / ``r`` act on it) unless the user is already
        typing the next message: then only a notification says it waits.
        """
        if self.prompt_input.value:
            self.notify("A memory proposal waits: Esc to review it.", title="remember this?")
        else:
            card.focus()

    # -- approvals ----------------------------------------------------------------------

    def _pending_cards(self) -> list[MemoryCard]:
        return [card for card in self.query(MemoryCard) if card.is_pending()]

    def _target_card(self) -> MemoryCard | None:
        """The card with focus (or holding it, e.g. via a button), else the newest pending."""
        if self.focused is not None:
            for node in self.focused.ancestors_with_self:
                if isinstance(node, MemoryCard):
                    return node
        pending = self._pending_cards()
        return pending[-1] if pending else None

    def action_approve(self) -> None:
        self._decide_target("approve")

    def action_reject(self) -> None:
        self._decide_target("reject")

    def _decide_target(self, verdict: str) -> None:
        card = self._target_card()
        if card is None:
            self.notify("No memory proposal is waiting.", severity="warning")
            return
        self.decide(card, verdict)

    @on(MemoryCard.Decide)
    def _card_decided(self, event: MemoryCard.Decide) -> None:
        self.decide(event.card, event.verdict)

    @on(MemoryCard.Skip)
    def _card_skipped(self, event: MemoryCard.Skip) -> None:
        self.prompt_input.focus()

    def decide(self, card: MemoryCard, verdict: str) -> None:
        """Approve or reject the card's proposal through the facade, then move on."""
        memory = self.facade.memory
        try:
            if verdict == "approve":
                record = memory.approve(card.memory_id, actor="tui")
                card.outcome = f"approved: saved as {record.scope} memory {record.key}"
            elif verdict == "reject":
                memory.reject(card.memory_id, actor="tui")
                card.outcome = "rejected: it will not be used"
            else:
                raise ValueError(f"unknown verdict {verdict!r}")
        except MemoryNotFound as exc:
            # Decided (or deleted) in another process since the card was drawn.
            self.notify(str(exc), severity="warning")
        card.refresh_from_store()
        self.poll_trace()
        self._focus_after(card)

    def _focus_after(self, card: MemoryCard) -> None:
        pending = self._pending_cards()
        cards = list(self.query(MemoryCard))
        later = [c for c in pending if cards.index(c) > cards.index(card)]
        if later:
            later[0].focus()
        elif pending:
            pending[-1].focus()
        else:
            self.prompt_input.focus()

    def action_review(self) -> None:
        pending = self._pending_cards()
        if pending:
            pending[0].focus()
        else:
            self.notify("No memory proposal is waiting.")

    # -- compaction, profiles, trace ------------------------------------------------------

    def action_compact(self) -> None:
        self.run_worker(self._compact(), group="compact", exit_on_error=False)

    async def _compact(self) -> None:
        note = Note("compacting history…", style="dim italic")
        await self._add(note)
        try:
            result = await self.session.compact()
        except Exception as exc:
            await self._add(ErrorLine(f"compaction: {type(exc).__name__}: {exc}"), after=note)
        else:
            await self._add(Note(compaction_note(result), style="italic"), after=note)
        finally:
            await note.remove()
            self.poll_trace()

    def action_pick_profile(self) -> None:
        if isinstance(self.screen, ProfilePicker):
            return

        def chosen(name: str | None) -> None:
            if name is not None and name != self.session.profile_name:
                self.run_worker(self._switch(name), group="profile", exit_on_error=False)

        self.push_screen(
            ProfilePicker(self.facade.config.profiles, self.session.profile_name), chosen
        )

    async def switch_profile(self, name: str) -> None:
        """Queue a profile switch (it waits for a running turn or compaction)."""
        await self._switch(name)

    async def _switch(self, name: str) -> None:
        try:
            switched = await self.session.switch_profile(name)
        except Exception as exc:
            await self._add(ErrorLine(f"profile switch: {type(exc).__name__}: {exc}"))
        else:
            self._show_profile()
            profile = self.session.profile
            await self._add(
                Note(
                    f"switched to profile {switched} ({profile.model}, "
                    f"{profile.context_window:,} tokens)"
                )
            )
        finally:
            self.poll_trace()

    def action_toggle_trace(self) -> None:
        self._trace_choice = not self.trace.display
        self.trace.display = self._trace_choice

    async def _command(self, line: str) -> None:
        """The line chat's slash commands, for people used to ``kairox chat``."""
        name, _, argument = line.partition(" ")
        argument = argument.strip()
        if name in ("/quit", "/exit"):
            self.exit()
        elif name == "/compact":
            self.action_compact()
        elif name == "/profile":
            if argument:
                self.run_worker(self._switch(argument), group="profile", exit_on_error=False)
            else:
                self.action_pick_profile()
        elif name == "/trace":
            self.action_toggle_trace()
        elif name == "/pending":
            await self._show_waiting_proposals()
            self.action_review()
        elif name == "/help":
            await self._add(Note(HELP, style="dim"))
        else:
            await self._add(ErrorLine(f"unknown command {name}; {HELP}"))

    # -- reading the store ----------------------------------------------------------------

    def _trace_query(self, after_id: int | None) -> list[StoredEvent]:
        # One query (not one per kind) so no event can slip between two reads. Not
        # filtered by workspace in SQL: a user memory decided anywhere applies here too.
        return self.facade.events.list(
            types=(*TRACE_EVENT_TYPES, *MEMORY_DECISIONS), after_id=after_id
        )

    def _latest_event_id(self) -> int:
        found = self._trace_query(None)
        return found[-1].id if found else 0

    def _concerns_us(self, stored: StoredEvent) -> bool:
        if stored.session_id == self.session.session_id:
            return True
        if stored.type not in MEMORY_DECISIONS:
            return False  # another session's accounting, compactions and switches
        scope = stored.payload.get("scope")
        # User memories reach every workspace; workspace memories only their own.
        return scope == "user" or (
            scope is not None and stored.workspace_id == self.facade.workspace_id
        )

    def poll_trace(self) -> None:
        """Print what happened since the last look: this session's context accounting,
        compactions and switches, and every memory decision that reaches this session
        (also those made in another process)."""
        for stored in self._trace_query(self._last_event_id):
            self._last_event_id = stored.id
            if not self._concerns_us(stored):
                continue
            if stored.type == "ContextAssembled":
                self._turns_traced += 1
            self.trace.add_lines(trace_event_lines(stored, self._turns_traced))

    def _tick(self) -> None:
        self.poll_trace()
        for card in self.query(MemoryCard):
            if card.ready and not card.has_class("decided"):
                card.refresh_from_store()
