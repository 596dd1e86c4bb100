"""Fixtures for the TUI tests: a workspace with two scripted profiles, and a pilot driver.

The tests run the real Textual app headless (``App.run_test``) from plain sync tests via
:func:`kairox.testing.run`, so no pytest-asyncio is needed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from kairox.runtime.facade import AppFacade
from kairox.testing import run

CONFIG = """\
[profiles.default]
backend = "scripted"
context_window = 8000
headroom = 500

[profiles.small]
backend = "scripted"
model = "tiny-model"
context_window = 1200
headroom = 200
aliases = ["mini"]
"""

WIDE = (140, 45)


@pytest.fixture
def facade(workspace: Path) -> AppFacade:
    """A facade on the test workspace, with ``default`` and ``small`` scripted profiles."""
    (workspace / "kairox.toml").write_text(CONFIG)
    return AppFacade(cwd=workspace)


class Driver:
    """Runs scenarios against a headless app; ``settle`` and ``send`` are the common steps."""

    def run(
        self, app, scenario: Callable[..., Awaitable[None]], size: tuple[int, int] = WIDE
    ) -> None:
        """Run ``await scenario(pilot)`` inside ``app`` (headless, ``size`` columns x rows)."""

        async def main() -> None:
            async with app.run_test(size=size) as pilot:
                await scenario(pilot)

        run(main())

    @staticmethod
    async def settle(pilot) -> None:
        """Wait for every queued turn / compaction / switch, then for the screen to update."""
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()

    async def send(self, pilot, text: str) -> None:
        """Type ``text`` in the prompt, press Enter and wait for the turn to finish."""
        pilot.app.prompt_input.focus()
        pilot.app.prompt_input.value = text
        await pilot.press("enter")
        await self.settle(pilot)


@pytest.fixture
def ui() -> Driver:
    """The scenario driver."""
    return Driver()
