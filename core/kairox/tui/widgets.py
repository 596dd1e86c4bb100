"""The widgets of the chat stream and the trace panel.

Every widget keeps the plain text it shows in ``.text`` (or ``.lines`` for the trace):
the tests read that instead of scraping the screen, and it is the text the widget renders,
so it cannot drift from what the user sees (except that terminal controls and bidi
overrides are shown escaped, by :func:`kairox.support.terminal.printable`). Text always goes in as
:class:`rich.text.Text`, never as a markup string: a model reply or a memory body holding
``[b]`` or ``[/]`` must be shown as typed, not interpreted (or fail to parse).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, RichLog, Static

from kairox.support.terminal import printable
from kairox.tui.formatting import Line, injection_warning, provenance_line, scope_reach

if TYPE_CHECKING:
    from kairox.memory.store import MemoryRecord
    from kairox.runtime.facade import AppFacade

__all__ = [
    "AssistantMessage",
    "ErrorLine",
    "MemoryCard",
    "Note",
    "TracePanel",
    "UserMessage",
]


class UserMessage(Static):
    """A message the user sent."""

    DEFAULT_CSS = """
    UserMessage {
        margin: 1 0 0 0;
        padding: 0 1;
        background: $boost;
        border-left: thick $primary;
    }
    UserMessage.earlier { color: $text-muted; border-left: thick $primary-darken-3; }
    """

    def __init__(self, text: str, *, earlier: bool = False) -> None:
        self.text = text
        super().__init__(
            Text("you  ", style="bold") + Text(printable(text)),
            classes="earlier" if earlier else "",
        )


class AssistantMessage(Static):
    """The assistant's reply; grows chunk by chunk while the model streams."""

    DEFAULT_CSS = """
    AssistantMessage {
        margin: 1 0 0 0;
        padding: 0 1;
        border-left: thick $success;
    }
    AssistantMessage.streaming { border-left: thick $warning; }
    AssistantMessage.cut-off { border-left: thick $error; }
    AssistantMessage.earlier { color: $text-muted; border-left: thick $success-darken-3; }
    """

    def __init__(self, text: str = "", *, streaming: bool = False, earlier: bool = False) -> None:
        self.text = text
        classes = [name for name, on in (("streaming", streaming), ("earlier", earlier)) if on]
        super().__init__(classes=" ".join(classes))
        self.update(self._render_text())

    def _render_text(self) -> Text:
        label = Text("kairox  ", style="bold")
        if not self.text and self.has_class("streaming"):
            return label + Text("…", style="dim")
        return label + Text(printable(self.text))

    def append(self, chunk: str) -> None:
        """Add streamed visible text (markers were already stripped by the session)."""
        self.text += chunk
        self.update(self._render_text())

    def finish(self, *, cut_off: bool = False) -> None:
        """The stream ended; ``cut_off`` when the backend failed part-way."""
        self.remove_class("streaming")
        if cut_off:
            self.add_class("cut-off")
        self.update(self._render_text())


class Note(Static):
    """A small line in the stream: a session memory, a compaction result, a switch."""

    DEFAULT_CSS = """
    Note {
        margin: 0 0 0 2;
        color: $text-muted;
    }
    """

    def __init__(self, text: str, *, style: str = "italic") -> None:
        self.text = text
        super().__init__(Text(printable(text), style=style))


class ErrorLine(Static):
    """An error in the stream (backend failure, budget exceeded); the app keeps going."""

    DEFAULT_CSS = """
    ErrorLine {
        margin: 0 0 0 2;
        color: $error;
        text-style: bold;
    }
    """

    def __init__(self, text: str) -> None:
        self.text = f"error: {text}"
        super().__init__(Text(printable(self.text)))


class MemoryCard(Vertical, can_focus=True):
    """A "remember this?" card for one proposed memory, with approve / reject.

    The card holds only the proposal's id: every render reads the record from the store,
    so a decision made elsewhere (``kairox memory approve``, the web browser) shows up on
    the next refresh, and nothing here can go stale and be acted on.
    """

    DEFAULT_CSS = """
    MemoryCard {
        height: auto;
        margin: 1 0 0 2;
        padding: 0 1;
        border: round $accent;
        border-title-style: bold;
    }
    MemoryCard:focus, MemoryCard:focus-within { border: double $accent; }
    MemoryCard.injection { border: round $warning; }
    MemoryCard.injection:focus, MemoryCard.injection:focus-within { border: double $warning; }
    MemoryCard.decided { border: round $panel-lighten-2; color: $text-muted; }
    MemoryCard .card-body { text-style: bold; }
    MemoryCard .card-meta { color: $text-muted; }
    MemoryCard .card-warning { color: $warning; text-style: bold; }
    MemoryCard .card-status { color: $text-muted; }
    MemoryCard Horizontal { height: auto; }
    MemoryCard Button { margin: 0 1 0 0; min-width: 14; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "decide('approve')", "Approve"),
        Binding("r", "decide('reject')", "Reject"),
        Binding("s,escape", "skip", "Later"),
    ]

    class Decide(Message):
        """The user asked to approve or reject this card's proposal."""

        def __init__(self, card: MemoryCard, verdict: str) -> None:
            super().__init__()
            self.card = card
            self.verdict = verdict

    class Skip(Message):
        """The user left the proposal pending for now."""

        def __init__(self, card: MemoryCard) -> None:
            super().__init__()
            self.card = card

    def __init__(self, facade: AppFacade, memory_id: int, *, session_id: str | None = None) -> None:
        super().__init__()
        self.facade = facade
        self.memory_id = memory_id
        self.session_id = session_id
        # What this UI decided, if it did: a proposal approved over an existing memory
        # leaves the store (its row is consumed), and the card should still say so.
        self.outcome: str | None = None
        # The last proposal text read from the store, only to keep showing what was
        # proposed after its row is gone; it is never used to decide or to build a prompt.
        self._shown: MemoryRecord | None = None
        #: Whether its parts exist: a card is in the DOM (and found by queries) a moment
        #: before they are composed, and the periodic refresh must not reach it then.
        self.ready = False

    def compose(self) -> ComposeResult:
        yield Static(classes="card-body")
        yield Static(classes="card-meta card-reach")
        yield Static(classes="card-meta card-provenance")
        yield Static(classes="card-meta card-replaces")
        yield Static(classes="card-warning")
        with Horizontal(classes="card-buttons"):
            yield Button("Approve (a)", variant="success", id="approve", compact=True)
            yield Button("Reject (r)", variant="error", id="reject", compact=True)
            yield Static(Text("s: later", style="dim"), classes="card-meta")
        yield Static(classes="card-status")

    def on_mount(self) -> None:
        self.ready = True
        self.refresh_from_store()

    # -- reading the store ------------------------------------------------------------

    def record(self) -> MemoryRecord | None:
        """The proposal as stored now (``None`` once its row is gone)."""
        return self.facade.memory.store.get(self.memory_id)

    def is_pending(self) -> bool:
        record = self.record()
        return record is not None and record.status == "pending"

    def refresh_from_store(self) -> None:
        """Re-read the proposal and redraw: status, buttons, what it would replace."""
        record = self.record()
        if record is not None:
            self._shown = record
        shown = self._shown
        if shown is None:
            self._set_part(".card-body", "(this proposal no longer exists)")
            self._finish("gone")
            return
        self.border_title = f"remember this?  {shown.scope} · {shown.key or '(no key)'}"
        self._set_part(".card-body", shown.body)
        self._set_part(".card-reach", scope_reach(shown))
        self._set_part(".card-provenance", provenance_line(shown, self.session_id))
        self._set_part(".card-warning", injection_warning(shown))
        self.set_class(shown.injection_warning, "injection")
        if record is None:
            # Consumed: approved over an existing memory (here or elsewhere) or deleted.
            self._set_part(".card-replaces", "")
            self._finish(
                self.outcome or "no longer pending: decided or deleted elsewhere",
            )
        elif record.status == "pending":
            self._set_part(".card-replaces", self._replaces(record))
            self._set_part(".card-status", "")
            self.remove_class("decided")
            self.query_one(".card-buttons").display = True
        else:
            self._set_part(".card-replaces", "")
            self._finish(self.outcome or f"{record.status} elsewhere")

    def _replaces(self, record: MemoryRecord) -> str:
        if record.key is None or record.scope == "session":
            return ""
        current = self.facade.memory.store.get_by_key(
            record.scope,
            record.key,
            workspace_id=record.workspace_id if record.scope == "workspace" else None,
        )
        return f"replaces the current memory: {current.body}" if current is not None else ""

    def _finish(self, status: str) -> None:
        self.add_class("decided")
        self.query_one(".card-buttons").display = False
        mark = (
            "✓ " if status.startswith("approved") else "✗ " if status.startswith("rejected") else ""
        )
        self._set_part(".card-status", mark + status)

    def _set_part(self, selector: str, text: str) -> None:
        part = self.query_one(selector, Static)
        part.update(Text(printable(text)))
        part.display = bool(text)

    @property
    def text(self) -> str:
        """Everything the card shows, as plain text."""
        parts = [str(self.border_title or "")]
        for selector in _CARD_PARTS:
            part = self.query_one(selector, Static)
            if part.display:
                parts.append(_plain(part))
        return "\n".join(p for p in parts if p)

    # -- input ------------------------------------------------------------------------

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.post_message(self.Decide(self, event.button.id or ""))

    def action_decide(self, verdict: str) -> None:
        self.post_message(self.Decide(self, verdict))

    def action_skip(self) -> None:
        self.post_message(self.Skip(self))


_CARD_PARTS = (
    ".card-body",
    ".card-reach",
    ".card-provenance",
    ".card-replaces",
    ".card-warning",
    ".card-status",
)


def _plain(widget: Static) -> str:
    content = widget.content
    return content.plain if isinstance(content, Text) else str(content)


class TracePanel(RichLog):
    """The trace: context accounting per turn, memory decisions, compactions, switches.

    ``lines_text`` holds every line written, as plain text, also while the panel is hidden
    (a hidden RichLog defers rendering until it has a size).
    """

    DEFAULT_CSS = """
    TracePanel {
        width: 46%;
        max-width: 72;
        min-width: 36;
        border: round $panel-lighten-2;
        border-title-color: $text-muted;
        padding: 0 1;
        background: $surface;
        scrollbar-size-vertical: 1;
        scrollbar-background: $surface;
        scrollbar-background-hover: $surface;
        scrollbar-background-active: $surface;
        overflow-x: hidden;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        # min_width: RichLog renders at least 78 columns wide by default, which would give
        # a narrow side panel a horizontal scrollbar instead of wrapped lines.
        super().__init__(wrap=True, markup=False, highlight=False, min_width=20, id=id)
        self.lines_text: list[str] = []
        self.border_title = "trace"

    def add_lines(self, lines: Iterable[Line]) -> None:
        """Append ``(text, style)`` lines."""
        for text, style in lines:
            self.lines_text.append(text)
            self.write(Text(printable(text), style=style))

    def say(self, text: str, style: str = "") -> None:
        """Append one line."""
        self.add_lines([(text, style)])

    def contains(self, needle: str) -> bool:
        """Whether any line written so far contains ``needle`` (for tests and checks)."""
        return any(needle in line for line in self.lines_text)
