"""The scripted demo behind the README screenshot keeps working."""

from __future__ import annotations

from kairox.testing import run
from kairox.tui.demo import screenshot


def test_the_demo_screenshot_shows_a_card_an_approval_and_the_accounting(tmp_path):
    svg = run(screenshot(tmp_path / "shots" / "tui.svg")).read_text(encoding="utf-8")
    # Rich's SVG writes spaces as &#160;: look for single words.
    for word in ("remember", "MemoryAccepted", "deploy.freeze", "workspace_retrieval", "⚠"):
        assert word in svg, word
