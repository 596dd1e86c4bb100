"""What a ``<memory>`` marker may say: keys, and the reasons a marker is rejected."""

from __future__ import annotations

import re

import pytest

from kairox.memory import KEY_MAX_LENGTH, MarkerExtractor, extract_memory_markers, normalize_key
from tests.memory.conftest import one_char_at_a_time, only_marker, only_rejection

# --------------------------------------------------------------------------------- keys


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("editor.font", "editor.font"),
        ("  Editor Font  ", "editor.font"),
        ("editor \t\n font", "editor.font"),
        ("A_B-c.D9", "a_b-c.d9"),
        ("x" * KEY_MAX_LENGTH, "x" * KEY_MAX_LENGTH),
    ],
)
def test_key_normalisation(raw: str, normal: str) -> None:
    assert normalize_key(raw) == normal
    marker = only_marker(f'<memory scope="user" key="{raw}">v</memory>')
    assert marker.key == normal


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("a/b", "'/'"),
        ("ключ", "outside [a-z0-9._-]"),
        ("semi;colon", "';'"),
        ("x" * (KEY_MAX_LENGTH + 1), "at most 128"),
    ],
)
def test_invalid_keys_are_rejected(raw: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=re.escape(fragment)):
        normalize_key(raw)
    for scope in ("user", "workspace", "session"):
        rejection = only_rejection(f'<memory scope="{scope}" key="{raw}">v</memory>')
        assert rejection.reason.startswith("invalid key")
        assert fragment in rejection.reason


# --------------------------------------------------------------------------------- rejections


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('<memory scope="global">x</memory>', "unknown scope 'global'"),
        ('<memory scope="">x</memory>', "unknown scope ''"),
        ('<memory scope="user">x</memory>', "user memory needs a key"),
        ('<memory scope="workspace">x</memory>', "workspace memory needs a key"),
        ('<memory scope="session">   \n </memory>', "empty marker body"),
        ('<memory scope="session"></memory>', "empty marker body"),
        ('<memory scope="session" kind="x">x</memory>', "unknown attribute 'kind'"),
        ('<memory key="a">x</memory>', "missing required attribute 'scope'"),
        ("<memory>x</memory>", "missing required attribute 'scope'"),
        ('<memory scope="session" scope="user">x</memory>', "duplicate attribute 'scope'"),
        ('<memory scope="user" KEY="a" key="b">x</memory>', "duplicate attribute 'key'"),
        ("<memory scope=session>x</memory>", "must be quoted"),
        ('<memory scope="user" key>x</memory>', "attribute 'key' has no value"),
        ('<memory scope="user"key="a">x</memory>', "separated by whitespace"),
        ("<memory scope=\"user' key='a'>x</memory>", 'no closing "'),
        ('<memory scope="session" / >x</memory>', "unexpected '/'"),
        ('<memory scope="session"/>', "self-closing"),
        ('<memory scope="session" </memory>', "no '>' before </memory>"),
        (
            '<memory scope="user" key="a">x <memory scope="session">y</memory> z</memory>',
            "nested <memory>",
        ),
    ],
)
def test_rejections_have_reasons_and_never_show(text: str, fragment: str) -> None:
    visible, markers, rejected = extract_memory_markers(f"before {text} after")
    assert visible == "before  after"
    assert markers == []
    assert [r.raw for r in rejected] == [text]
    assert fragment in rejected[0].reason
    # Same outcome when the marker arrives one character at a time.
    assert one_char_at_a_time(f"before {text} after") == (visible, markers, rejected)


@pytest.mark.parametrize(
    "text",
    [
        '<memory scope="global">x</memory>',
        '<memory scope="user">x</memory>',
        '<memory scope="workspace">x</memory>',
        '<memory scope="Session " kind="x">x</memory>',
    ],
)
def test_bad_markers_are_never_downgraded_to_session(text: str) -> None:
    _, markers, rejected = extract_memory_markers(text)
    assert markers == []
    assert not any(m.scope == "session" for m in markers)
    assert len(rejected) == 1 and rejected[0].reason


def test_unterminated_marker_is_rejected_at_close_and_withheld_meanwhile() -> None:
    ex = MarkerExtractor()
    assert ex.feed("Hello <memory scope=") == "Hello "
    assert ex.feed('"session">half a thought') == ""
    assert ex.rejected == []  # not known to be unterminated until the stream ends
    assert ex.close() == ""
    assert ex.markers == []
    assert [r.raw for r in ex.rejected] == ['<memory scope="session">half a thought']
    assert "unterminated" in ex.rejected[0].reason


def test_bare_opening_at_the_end_is_an_unterminated_marker() -> None:
    visible, markers, rejected = extract_memory_markers("see <Memory")
    assert visible == "see "
    assert markers == []
    assert [r.raw for r in rejected] == ["<Memory"]
    assert "unterminated" in rejected[0].reason


def test_nested_marker_swallows_the_whole_outer_marker() -> None:
    text = 'a<memory scope="session">x<memory scope="session">y</memory>z</memory>b</memory>'
    visible, markers, rejected = extract_memory_markers(text)
    assert visible == "ab</memory>"
    assert markers == []
    assert len(rejected) == 1 and "nested" in rejected[0].reason
