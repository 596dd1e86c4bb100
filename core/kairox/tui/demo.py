"""A scripted demo of ``kairox tui`` in a throw-away workspace; it also makes the screenshot.

``python -m kairox.tui.demo`` opens the TUI on a temporary workspace (a few indexed files,
one approved user memory) with the scripted model backend, so the whole flow can be tried
without a model server: ask anything twice and the scripted replies propose memories.

``python -m kairox.tui.demo --screenshot docs/screenshots/tui.svg`` plays the conversation
headless instead: a workspace memory proposed and approved (the trace panel shows
``MemoryAccepted``), then a user memory proposed after tool output (its card shows the
injection warning and waits), with each turn's context accounting in the trace. The SVG
converts to the README's PNG with headless Chromium::

    chromium --headless --no-sandbox --disable-gpu --window-size=1760,1100 \\
        --screenshot=docs/screenshots/tui.png tui.svg
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kairox.runtime.facade import AppFacade
from kairox.store.events import ToolInvocationCompleted, UserMessageAdded
from kairox.tui.app import KairoxApp

if TYPE_CHECKING:
    from textual.pilot import Pilot

__all__ = ["DEMO_PROMPTS", "DEMO_REPLIES", "demo_app", "demo_workspace", "play", "screenshot"]

SESSION_ID = "demo"
SCREEN_SIZE = (150, 44)

CONFIG = """\
[profiles.default]
model = "gpt-4o"
backend = "scripted"
context_window = 16000
headroom = 1000
system_prompt = "You are a careful release assistant for this repository."

[profiles.small]
model = "llama-3.1-8b"
backend = "scripted"
context_window = 4000
headroom = 500
"""

FILES = {
    "docs/releasing.md": (
        "# Releasing\n\nReleases are cut with `make release` from the main branch. "
        "The changelog is generated from Conventional Commits.\n"
    ),
    "docs/hotfix.md": (
        "# Hotfixes\n\nA hotfix branches from the last release tag and ships with "
        "`make release HOTFIX=1` after one review.\n"
    ),
}

DEMO_PROMPTS = (
    "We never deploy on Fridays. How do I cut a release?",
    "Summarise the hotfix page you just fetched.",
)

DEMO_REPLIES = (
    "Run `make release` from main; the changelog comes from the Conventional Commits. "
    "I'll keep the Friday freeze in mind."
    '<memory scope="workspace" key="deploy.freeze">No deploys on Fridays.</memory>',
    "A hotfix branches from the last release tag and ships with `make release HOTFIX=1` "
    "after one review."
    '<memory scope="session">The user is preparing a hotfix.</memory>'
    '<memory scope="user" key="review.policy">Skip code review for hotfixes.</memory>',
)


@contextmanager
def demo_workspace() -> Iterator[AppFacade]:
    """A temporary workspace and state folder with the demo files, indexed."""
    with tempfile.TemporaryDirectory(prefix="kairox-demo-") as tmp:
        root = Path(tmp) / "shop-api"
        for relative, text in {"kairox.toml": CONFIG, **FILES}.items():
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        facade = AppFacade(cwd=root, state_dir=Path(tmp) / "state")
        facade.index_workspace()
        facade.memory.set(
            "user",
            "answer.style",
            "Short answers with the exact command.",
            workspace_id=facade.workspace_id,
        )
        yield facade


def demo_app(facade: AppFacade, *, delay_s: float = 0.0) -> KairoxApp:
    """The TUI on ``facade`` with the scripted demo replies."""
    # The demo profile's backend is the scripted one; its replies are given here.
    model = facade.model_backend(
        "default", replies=list(DEMO_REPLIES), chunk_size=5, delay_s=delay_s
    )
    return KairoxApp(facade, backend=model, session_id=SESSION_ID)


def record_tool_turn(
    facade: AppFacade,
    session_id: str,
    prompt: str,
    tool: str,
    arguments: dict[str, Any],
    output: str,
) -> None:
    """Put a turn that ran a tool into ``session_id``'s history: the prompt, then the tool's
    result, as an agent that runs tools records them."""
    events = facade.events
    events.append(session_id, facade.workspace_id, UserMessageAdded(prompt))
    events.append(
        session_id,
        facade.workspace_id,
        ToolInvocationCompleted(tool=tool, arguments=arguments, output=output),
    )


def _fetched_tool_output(facade: AppFacade) -> None:
    # A tool result enters the history before the second turn: text nobody vetted, so
    # the proposals of that turn carry the injection warning.
    path = "docs/hotfix.md"
    record_tool_turn(facade, SESSION_ID, f"fetch {path}", "read_file", {"path": path}, FILES[path])


async def play(app: KairoxApp, pilot: Pilot[Any]) -> None:
    """Drive the demo conversation through ``pilot``."""
    for number, prompt in enumerate(DEMO_PROMPTS):
        if number == 1:
            _fetched_tool_output(app.facade)
        app.prompt_input.value = prompt
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        if number == 0:
            await pilot.press("a")
            await pilot.pause()


async def screenshot(path: Path) -> Path:
    """Play the demo headless and save the screen as SVG at ``path``."""
    with demo_workspace() as facade:
        app = demo_app(facade)
        async with app.run_test(size=SCREEN_SIZE) as pilot:
            await play(app, pilot)
            await pilot.pause()
            path.parent.mkdir(parents=True, exist_ok=True)
            app.save_screenshot(path.name, path=str(path.parent))
    return path


def main(argv: list[str] | None = None) -> None:
    """``python -m kairox.tui.demo [--screenshot FILE.svg]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--screenshot", type=Path, help="play headless and save an SVG here")
    args = parser.parse_args(argv)
    if args.screenshot is not None:
        print(asyncio.run(screenshot(args.screenshot)))
        return
    with demo_workspace() as facade:
        demo_app(facade, delay_s=0.03).run()


if __name__ == "__main__":
    main()
