"""Modal screens of the TUI: the profile switcher."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

if TYPE_CHECKING:
    from kairox.config.schema import ProfileConfig

__all__ = ["ProfilePicker"]


class ProfilePicker(ModalScreen[str | None]):
    """A list of the configured profiles; dismisses with the chosen name (``None``: cancel).

    Each entry shows what a switch changes (model, window, backend), since switching to a
    smaller window can make the next turn compact or refuse an oversized prompt.
    """

    DEFAULT_CSS = """
    ProfilePicker { align: center middle; }
    ProfilePicker > Vertical {
        width: 72;
        max-width: 90%;
        height: auto;
        max-height: 80%;
        border: round $accent;
        background: $surface;
        padding: 0 1;
    }
    ProfilePicker OptionList { height: auto; max-height: 20; border: none; }
    ProfilePicker .hint { color: $text-muted; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, profiles: Mapping[str, ProfileConfig], current: str) -> None:
        super().__init__()
        self.profiles = dict(profiles)
        self.current = current

    def compose(self) -> ComposeResult:
        options = []
        for name, profile in self.profiles.items():
            label = Text(name, style="bold")
            if name == self.current:
                label.append("  (current)", style="green")
            aliases = f" · aliases {', '.join(profile.aliases)}" if profile.aliases else ""
            label.append(
                f"\n  {profile.model} · {profile.context_window:,} tokens"
                f" · {profile.backend}{aliases}",
                style="dim",
            )
            options.append(Option(label, id=name))
        with Vertical() as box:
            box.border_title = "switch profile"
            yield OptionList(*options)
            yield Static("enter: switch · esc: cancel", classes="hint")

    def on_mount(self) -> None:
        option_list = self.query_one(OptionList)
        names = list(self.profiles)
        if self.current in names:
            option_list.highlighted = names.index(self.current)
        option_list.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option_id)

    def action_cancel(self) -> None:
        self.dismiss(None)
