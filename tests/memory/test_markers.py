"""Tests for the streaming ``<memory>`` marker extractor: syntax and streaming."""

from __future__ import annotations

import pytest

from kairox.memory import MarkerExtractor, extract_memory_markers
from tests.memory.conftest import MARK, only_marker, stream

# --------------------------------------------------------------------------------- syntax


def test_design_examples() -> None:
    text = (
        "Sure. "
        '<memory scope="session">User prefers explanations before code.</memory>'
        '<memory scope="user" key="editor.font">JetBrains Mono 14px.</memory>'
        '<memory scope="workspace" key="commit.style">Conventional Commits with scope prefix.'
        "</memory> Done."
    )
    visible, markers, rejected = extract_memory_markers(text)
    assert visible == "Sure.  Done."
    assert rejected == []
    assert [(m.scope, m.key, m.body) for m in markers] == [
        ("session", None, "User prefers explanations before code."),
        ("user", "editor.font", "JetBrains Mono 14px."),
        ("workspace", "commit.style", "Conventional Commits with scope prefix."),
    ]
    assert markers[1].raw == '<memory scope="user" key="editor.font">JetBrains Mono 14px.</memory>'


@pytest.mark.parametrize(
    "marker",
    [
        "<memory scope='user' key='editor.font'>Mono</memory>",
        "<memory key=\"editor.font\" scope='user'>Mono</memory>",
        '<MEMORY SCOPE="USER" KEY="editor.font">Mono</Memory>',
        "<Memory\n  key = 'editor.font'\n\tscope =\"user\"  >Mono</mEmOrY  >",
        '<memory scope="user" key="editor.font"\n>Mono</memory\n>',
        "<memory scope = ' user ' key='editor.font'>  Mono  </memory>",
    ],
)
def test_attribute_order_quotes_case_and_whitespace(marker: str) -> None:
    visible, markers, rejected = extract_memory_markers(f"a{marker}b")
    assert visible == "ab"
    assert rejected == []
    assert [(m.scope, m.key, m.body, m.raw) for m in markers] == [
        ("user", "editor.font", "Mono", marker)
    ]


def test_returns_a_named_tuple() -> None:
    result = extract_memory_markers('x<memory scope="session">y</memory>')
    assert result.visible == "x"
    assert result.markers[0].body == "y"
    assert result.rejected == []


def test_body_is_stripped_but_inner_text_verbatim() -> None:
    marker = only_marker('<memory scope="session">\n  line one\n\n  line  two `x` <b>\n</memory>')
    assert marker.body == "line one\n\n  line  two `x` <b>"


def test_session_marker_may_carry_a_key() -> None:
    marker = only_marker('<memory scope="session" key="Current Task">Fix the parser</memory>')
    assert (marker.scope, marker.key) == ("session", "current.task")


def test_stray_closing_tag_is_visible() -> None:
    visible, markers, rejected = extract_memory_markers("a </memory> b </MEMORY > c")
    assert visible == "a </memory> b </MEMORY > c"
    assert markers == [] and rejected == []


@pytest.mark.parametrize("text", ["<memoryless>", "<memo", "<memories>", "<mem ory>", "< memory>"])
def test_lookalikes_are_text(text: str) -> None:
    visible, markers, rejected = extract_memory_markers(f"x {text} y")
    assert visible == f"x {text} y"
    assert markers == [] and rejected == []


def test_text_after_a_marker_keeps_flowing() -> None:
    visible, markers, _ = extract_memory_markers(
        '<memory scope="session">a</memory><memory scope="session">b</memory>tail'
    )
    assert visible == "tail"
    assert [m.body for m in markers] == ["a", "b"]


# --------------------------------------------------------------------------------- streaming


def test_holds_back_only_a_possible_marker_start() -> None:
    ex = MarkerExtractor()
    assert ex.feed("abc<mem") == "abc"
    assert ex.feed("x and more") == "<memx and more"
    assert ex.feed("<") == ""
    assert ex.feed("b") == "<b"
    assert ex.feed("a < b") == "a < b"
    assert ex.feed("<MEMORY") == ""
    assert ex.feed("!") == "<MEMORY!"
    assert ex.close() == ""


def test_releases_trailing_prefix_at_close() -> None:
    ex = MarkerExtractor()
    assert ex.feed("end <memo") == "end "
    assert ex.close() == "<memo"
    assert ex.rejected == [] and ex.markers == []


def test_many_angle_brackets_are_not_buffered() -> None:
    ex = MarkerExtractor()
    released = [ex.feed("<") for _ in range(10_000)]
    assert released[0] == ""
    assert all(piece == "<" for piece in released[1:])
    assert ex.close() == "<"


def test_inline_code_without_markers_streams_immediately() -> None:
    ex = MarkerExtractor()
    assert ex.feed("run `ls -") == "run `ls -"
    assert ex.feed("la` now") == "la` now"


def test_marker_inside_open_inline_code_waits_for_the_span_to_close() -> None:
    ex = MarkerExtractor()
    assert ex.feed("try `x ") == "try `x "
    assert ex.feed(MARK) == ""  # may be code (if the span closes) or a marker (if not)
    assert ex.feed("`") == ""  # a run of one, unless the next character is another backtick
    assert ex.feed(" ok") == MARK + "` ok"
    assert ex.markers == []


def test_marker_is_available_before_close() -> None:
    ex = MarkerExtractor()
    ex.feed('a<memory scope="user" key="k">v</memo')
    assert ex.markers == []
    ex.feed("ry>")
    assert [(m.scope, m.key, m.body) for m in ex.markers] == [("user", "k", "v")]


def test_feed_after_close_raises_and_close_is_idempotent() -> None:
    ex = MarkerExtractor()
    ex.feed("x")
    assert ex.close() == ""
    assert ex.closed
    assert ex.close() == ""
    with pytest.raises(ValueError, match="after close"):
        ex.feed("more")


def test_feed_rejects_non_text() -> None:
    with pytest.raises(TypeError, match="expects str"):
        MarkerExtractor().feed(b"bytes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("prefix", "unit"),
    [
        ("", "plain text "),
        ("", "a < b "),
        ("", "x ` y "),  # every span attempt is unmatched and its line re-read
        ("` ", "<memory scope='session'>b "),  # text held inside an unmatched span
        ("<memory scope='session'>", "body "),  # one huge unterminated marker
        ("```\n", "code line\n"),
    ],
)
def test_large_pathological_streams_match_one_shot(prefix: str, unit: str) -> None:
    # The inputs that would make a naive extractor rescan its buffer; their throughput is
    # measured by `kairox bench markers`, not asserted here (tests never time things).
    large = prefix + unit * (400_000 // len(unit))
    chunked = stream([large[i : i + 3] for i in range(0, len(large), 3)])
    assert chunked[:3] == tuple(extract_memory_markers(large))
