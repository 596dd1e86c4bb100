"""Two processes, one store: what another process writes is what the TUI uses next.

The other process is a real subprocess with its own ``AppFacade`` on the same workspace
and ``$KAIROX_HOME`` (as ``kairox serve``'s memory browser or ``kairox memory edit`` would
be), so nothing in this process's objects can stand in for the shared SQLite file.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

from kairox.default_plugins.scripted_model import ScriptedModel
from kairox.tui import KairoxApp
from kairox.tui.widgets import MemoryCard

PROPOSE = 'Noted.<memory scope="workspace" key="deploy.day">Fridays are frozen.</memory>'


async def other_process(workspace: Path, code: str) -> None:
    """Run ``code`` with ``facade`` (an AppFacade on ``workspace``) in a new Python process."""
    script = (
        "from kairox.runtime.facade import AppFacade\nfacade = AppFacade()\n"
        + textwrap.dedent(code)
    )
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", script],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


def test_an_edit_made_in_another_process_is_what_the_next_turn_sends(facade, workspace, ui):
    model = ScriptedModel([PROPOSE, "ok", "ok again"])
    app = KairoxApp(facade, backend=model)

    async def scenario(pilot):
        await ui.send(pilot, "we never deploy on Fridays")
        await pilot.press("a")
        await pilot.pause()
        await ui.send(pilot, "when can we deploy?")
        assert "Fridays are frozen." in model.requests[-1][0].content

        await other_process(
            workspace,
            """
            facade.memory.edit(
                "deploy.day", "Thursdays and Fridays are frozen.",
                workspace_id=facade.workspace_id,
            )
            """,
        )
        await ui.send(pilot, "and now?")
        system = model.requests[-1][0]
        assert system.role == "system"
        assert "Thursdays and Fridays are frozen." in system.content

    ui.run(app, scenario)


def test_a_proposal_decided_in_another_process_shows_as_decided(facade, workspace, ui):
    model = ScriptedModel([PROPOSE])
    app = KairoxApp(facade, backend=model, poll_seconds=0.05)

    async def scenario(pilot):
        await ui.send(pilot, "we never deploy on Fridays")
        card = app.stream.query_one(MemoryCard)
        await other_process(
            workspace,
            f"facade.memory.approve({card.memory_id})",
        )
        # The periodic refresh re-reads the store; the bound only stops a broken refresh
        # from hanging the test, so it is generous for a loaded machine.
        for _ in range(600):
            await pilot.pause(0.05)
            if not card.is_pending() and "elsewhere" in card.text:
                break
        assert "✓ approved elsewhere" in card.text
        assert app.trace.contains("MemoryAccepted  workspace · deploy.day")
        # `a` has nothing left to act on: a warning, no crash, no second decision.
        app.stream.focus()
        await pilot.press("a")
        await pilot.pause()
        assert app.is_running

    ui.run(app, scenario)
    assert facade.memory.find("deploy.day", workspace_id=facade.workspace_id).status == "approved"
