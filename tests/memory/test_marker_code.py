"""``<memory>`` markers in Markdown code are literal: spans and fences."""

from __future__ import annotations

import pytest

from kairox.memory import extract_memory_markers
from tests.memory.conftest import MARK, one_char_at_a_time, stream

# --------------------------------------------------------------------------------- code


@pytest.mark.parametrize(
    "text",
    [
        f"```\n{MARK}\n```\n",
        f"```python\n{MARK}\n```",
        f"~~~\n{MARK}\n~~~\n",
        f"   ```\n{MARK}\n   ```\n",
        f"````\n```\n{MARK}\n````\n",  # a shorter fence line does not close a longer fence
        f"~~~\n```\n{MARK}\n~~~\n",  # nor does the other fence character
        f"```\n{MARK}",  # an unclosed fence runs to the end
        f"`{MARK}`",
        f"use `` {MARK} `` here",
        f"a ` b `` {MARK} `` c",  # an unmatched single backtick does not stop the `` span
        f"``{MARK}`x`{MARK}``",
    ],
)
def test_markers_inside_code_are_literal(text: str) -> None:
    for visible, markers, rejected in (extract_memory_markers(text), one_char_at_a_time(text)):
        assert visible == text
        assert markers == [] and rejected == []


@pytest.mark.parametrize(
    ("text", "visible"),
    [
        (f"```\ncode\n```\n{MARK}", "```\ncode\n```\n"),
        (f"~~~\ncode\n~~~~  \n{MARK}", "~~~\ncode\n~~~~  \n"),
        (f"    ```\n{MARK}\n", "    ```\n\n"),  # four spaces: not a fence
        (f"x ```\n{MARK}\n", "x ```\n\n"),  # not at a line start: an (unmatched) inline run
        (f"```a`b\n{MARK}\n", "```a`b\n\n"),  # backtick in the info string: not a fence
        (f"`code` {MARK} `more`", "`code`  `more`"),
        (f"don't ` {MARK} tick", "don't `  tick"),  # unmatched backtick is literal text
        (f"``a` {MARK}", "``a` "),  # a run of 1 does not close a run of 2
        (f"`a\n{MARK}`", "`a\n`"),  # inline code does not cross lines
        (f"~~ {MARK}", "~~ "),  # two tildes are not a fence
    ],
)
def test_markers_outside_code_are_extracted(text: str, visible: str) -> None:
    for shown, markers, rejected in (extract_memory_markers(text), one_char_at_a_time(text)):
        assert shown == visible
        assert [m.body for m in markers] == ["secret"]
        assert rejected == []


def test_a_removed_marker_keeps_the_line_start_for_a_fence() -> None:
    text = f"intro\n{MARK}```\n{MARK}\n```\n"
    visible, markers, _ = extract_memory_markers(text)
    assert visible == f"intro\n```\n{MARK}\n```\n"
    assert len(markers) == 1


def test_code_state_is_tracked_across_chunks() -> None:
    text = f"~~~\n{MARK}\n~~~\n{MARK}\n`{MARK}` {MARK}"
    expected = f"~~~\n{MARK}\n~~~\n\n`{MARK}` "
    for size in (1, 2, 3, 5, 7):
        chunks = [text[i : i + size] for i in range(0, len(text), size)]
        visible, markers, rejected, _ = stream(chunks)
        assert visible == expected
        assert [m.body for m in markers] == ["secret", "secret"]
        assert rejected == []
