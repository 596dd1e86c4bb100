"""Tests for the streaming ``<memory>`` marker extractor."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kairox.memory import (
    KEY_MAX_LENGTH,
    MarkerExtractor,
    MemoryMarker,
    RejectedMarker,
    extract_memory_markers,
    normalize_key,
)

# --------------------------------------------------------------------------------- helpers


def stream(chunks: list[str]) -> tuple[str, list[MemoryMarker], list[RejectedMarker], list[str]]:
    """Feed chunks one by one; also return what each feed() call released."""
    ex = MarkerExtractor()
    released = [ex.feed(chunk) for chunk in chunks]
    released.append(ex.close())
    return "".join(released), ex.markers, ex.rejected, released


def split_at(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *sorted(cuts), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def one_char_at_a_time(text: str) -> tuple[str, list[MemoryMarker], list[RejectedMarker]]:
    visible, markers, rejected, _ = stream(list(text))
    return visible, markers, rejected


def only_marker(text: str) -> MemoryMarker:
    _, markers, rejected = extract_memory_markers(text)
    assert rejected == []
    assert len(markers) == 1
    return markers[0]


def only_rejection(text: str) -> RejectedMarker:
    visible, markers, rejected = extract_memory_markers(text)
    assert markers == []
    assert len(rejected) == 1
    assert "<memory" not in visible.lower()
    return rejected[0]


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


# --------------------------------------------------------------------------------- code


MARK = '<memory scope="session">secret</memory>'


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


# --------------------------------------------------------------------------------- reference

# A direct, non-streaming statement of the rules (full lookahead, no buffering concerns), used
# as the oracle for the streaming state machine.

_OPEN_AT = re.compile(r"<memory", re.I | re.A)
_BODY_TOKEN = re.compile(
    r"(?P<open><memory[ \t\n\r\f\v/>])|(?P<close></memory[ \t\n\r\f\v]*>)", re.I | re.A
)
_CLOSER = re.compile(r"</memory[ \t\n\r\f\v]*>", re.I | re.A)


def _marker_end(text: str, start: int) -> int:
    delim = start + len("<memory")
    gt = text.find(">", delim)
    if gt < 0:
        return len(text)
    closer = _CLOSER.search(text, delim)
    if closer is not None and closer.end() - 1 == gt:
        return closer.end()
    if gt > delim and text[gt - 1] == "/":
        return gt + 1
    depth = 1
    for token in _BODY_TOKEN.finditer(text, gt + 1):
        depth += 1 if token.group("open") else -1
        if depth == 0:
            return token.end()
    return len(text)


def reference(text: str) -> tuple[str, list[MemoryMarker], list[RejectedMarker]]:
    out: list[str] = []
    regions: list[str] = []
    i, n = 0, len(text)
    line_start, indent = True, 0

    def fence_body(i: int, char: str, length: int) -> int:
        closing = re.compile(rf" {{0,3}}{re.escape(char)}{{{length},}}[ \t\r]*\n")
        while i < n:
            nl = text.find("\n", i)
            end = n if nl < 0 else nl + 1
            out.append(text[i:end])
            line = text[i:end]
            i = end
            if closing.fullmatch(line):
                break
        return i

    while i < n:
        c = text[i]
        if c == "<" and _OPEN_AT.match(text, i):
            delim = i + len("<memory")
            if delim == n or text[delim] in " \t\n\r\f\v/>":
                end = _marker_end(text, i)
                regions.append(text[i:end])
                i = end
                continue
            out.append(c)
            line_start = False
            i += 1
        elif c == "`" or (c == "~" and line_start and indent <= 3):
            run_end = i
            while run_end < n and text[run_end] == c:
                run_end += 1
            length = run_end - i
            nl = text.find("\n", run_end)
            line_end = n if nl < 0 else nl
            rest = text[run_end:line_end]
            at_start = line_start and indent <= 3
            line_start = False
            if at_start and length >= 3 and (c == "~" or "`" not in rest):
                out.append(text[i : line_end + 1])
                i = fence_body(line_end + 1, c, length)
                line_start, indent = True, 0
            elif c == "`" and (
                closing := re.compile(rf"(?<!`)`{{{length}}}(?!`)").search(text, run_end, line_end)
            ):
                out.append(text[i : closing.end()])
                i = closing.end()
            else:
                out.append(text[i:run_end])
                i = run_end
        elif c == "\n":
            out.append(c)
            line_start, indent = True, 0
            i += 1
        else:
            if line_start and c == " ":
                indent += 1
            else:
                line_start = False
            out.append(c)
            i += 1

    markers: list[MemoryMarker] = []
    rejected: list[RejectedMarker] = []
    for region in regions:
        # A region on its own is classified exactly as in context.
        _, found, refused = extract_memory_markers(region)
        assert len(found) + len(refused) == 1
        assert [m.raw for m in found + refused] == [region]  # type: ignore[operator]
        markers += found
        rejected += refused
    return "".join(out), markers, rejected


TOKENS = [
    *("<", ">", "/", "=", '"', "'", " ", "  ", "   ", "    ", "\t", "\n", "\r\n", "x", "abc"),
    *("é", "日本", "🙂", "y", "memory", "<memory", "<MEMORY", "<Memory ", "<memory>", "<memory/>"),
    *("</memory>", "</MEMORY >", "</memory", "<memo", " scope=", 'scope="session"', "scope='user'"),
    *('scope="workspace"', "scope=global", ' key="a.b"', " key='Bad Key!'", ' key=""'),
    *("`", "``", "```", "~", "~~~", "```py\n", "\n```\n", "~~~\n", "\n````", "```a`b\n"),
    *("\n   ```", "\n    ```", "\n  ~~~~", "\n~~~ \n", "\n``` \t\n", "\n```x```\n"),
    *('<memory scope="session">', "<memory scope='user' key='k'>", "<memory scope='session'>"),
    '<memory scope="session">note</memory>',
    "\n<memory scope='session'>a\nb</memory>",
]

token_soup = st.lists(st.one_of(st.sampled_from(TOKENS), st.text(max_size=4)), max_size=40).map(
    "".join
)
# Line-shaped text, so fence openers, closers and indentation come up often.
line = st.tuples(
    st.sampled_from(["", " ", "  ", "   ", "    "]),
    st.sampled_from(["", "`", "``", "```", "````", "~~", "~~~", "~~~~"]),
    st.lists(st.sampled_from(TOKENS), max_size=5).map("".join),
).map("".join)
markdownish = st.lists(line, max_size=10).map("\n".join)
texts = st.one_of(token_soup, markdownish)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_matches_reference(text: str) -> None:
    assert tuple(extract_memory_markers(text)) == reference(text)


@settings(max_examples=300, deadline=None)
@given(text=texts, data=st.data())
def test_any_chunking_matches_one_shot(text: str, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=20).map(sorted))
    chunks = split_at(text, cuts)
    visible, markers, rejected, _ = stream(chunks)
    assert (visible, markers, rejected) == tuple(extract_memory_markers(text))
    # Nothing is lost or invented: visible text and marker texts add up to the input.
    assert len(visible) + sum(len(m.raw) for m in [*markers, *rejected]) == len(text)


@settings(max_examples=100, deadline=None)
@given(texts)
def test_one_char_chunks_match_one_shot(text: str) -> None:
    assert one_char_at_a_time(text) == tuple(extract_memory_markers(text))


# --------------------------------------------------------------------------------- generated


def _case_variants(word: str) -> st.SearchStrategy[str]:
    return st.lists(st.booleans(), min_size=len(word), max_size=len(word)).map(
        lambda flags: "".join(ch.upper() if up else ch for ch, up in zip(word, flags, strict=True))
    )


TAG_WS = st.text(alphabet=" \t\n\r", max_size=3)
TAG_WS1 = st.text(alphabet=" \t\n\r", min_size=1, max_size=3)
# Plain text: no backticks or tildes (they are generated as code pieces) and no "y", so plain
# pieces can never spell an accidental "<memory".
PLAIN = st.text(alphabet=st.sampled_from(list("<>/=\"' \n\tmemorabc.é日🙂MEMOR-")), max_size=12)
BODY = st.text(
    alphabet=st.sampled_from(list("abc xyz\n\t`~>=/'\"é日🙂.")), min_size=1, max_size=20
).filter(lambda s: s.strip())
CODE_TEXT = st.text(alphabet=st.sampled_from(list("abc <>/=\"' xyz")), max_size=8)
KEYS = st.from_regex(r"[A-Za-z0-9._-]{1,12}( [A-Za-z0-9]{1,4})?", fullmatch=True)


@st.composite
def valid_marker(draw: st.DrawFn) -> tuple[str, MemoryMarker]:
    scope = draw(st.sampled_from(["session", "user", "workspace"]))
    key = draw(KEYS) if scope != "session" else draw(st.none() | KEYS)
    attrs = [("scope", draw(_case_variants(scope)))]
    if key is not None:
        attrs.append(("key", key))
    attrs = draw(st.permutations(attrs))
    parts = []
    for name, value in attrs:
        quote = draw(st.sampled_from(["'", '"']))
        parts.append(
            f"{draw(_case_variants(name))}{draw(TAG_WS)}={draw(TAG_WS)}{quote}{value}{quote}"
        )
    gaps = [draw(TAG_WS1) for _ in parts]
    opening = (
        f"<{draw(_case_variants('memory'))}"
        + "".join(gap + part for gap, part in zip(gaps, parts, strict=True))
        + f"{draw(TAG_WS)}>"
    )
    body = draw(BODY)
    raw = f"{opening}{body}</{draw(_case_variants('memory'))}{draw(TAG_WS)}>"
    expected_key = None if key is None else key.strip().lower().replace(" ", ".")
    return raw, MemoryMarker(scope=scope, key=expected_key, body=body.strip(), raw=raw)


MALFORMED = [
    ('<memory scope="global">x</memory>', "unknown scope"),
    ('<memory scope="user">x</memory>', "needs a key"),
    ("<MEMORY SCOPE='workspace'>x</MEMORY>", "needs a key"),
    ('<memory scope="session">  </memory>', "empty marker body"),
    ('<memory scope="user" key="a">x <memory scope="session">y</memory> z</memory>', "nested"),
    ('<memory scope="session" kind="x">x</memory>', "unknown attribute"),
    ('<memory key="a">x</memory>', "missing required attribute 'scope'"),
    ('<memory scope="session" scope="user">x</memory>', "duplicate attribute"),
    ("<memory scope=session>x</memory>", "must be quoted"),
    ('<memory scope="user" key="bad/key">x</memory>', "invalid key"),
    ("<Memory Scope='user' key=''>x</memory>", "invalid key"),
    ('<memory scope="session"/>', "self-closing"),
    ('<memory scope="session" </memory>', "no '>'"),
]


Piece = tuple[str, str]  # (kind, text)


@st.composite
def document(
    draw: st.DrawFn,
) -> tuple[list[Piece], list[MemoryMarker], list[tuple[str, str]]]:
    """A document as pieces, with the markers and rejections the extractor must find."""
    pieces: list[Piece] = []
    markers: list[MemoryMarker] = []
    rejected: list[tuple[str, str]] = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["plain", "marker", "bad", "inline", "fence", "stray"]))
        if kind == "plain":
            piece = draw(PLAIN)
        elif kind == "marker":
            piece, marker = draw(valid_marker())
            markers.append(marker)
        elif kind == "bad":
            piece, fragment = draw(st.sampled_from(MALFORMED))
            rejected.append((piece, fragment))
        elif kind == "stray":
            piece = draw(st.sampled_from(["</memory>", "</MEMORY >"]))
        elif kind == "inline":
            # Non-empty content, so an empty `` can never pair up with a later span's ticks.
            inner = (
                "c" + draw(CODE_TEXT) + draw(st.sampled_from(["", MARK, "<memory ", "<MEMORY>"]))
            )
            ticks = draw(st.sampled_from(["`", "``"]))
            piece = f"{ticks}{inner}{draw(CODE_TEXT)}{ticks}"
        else:
            char = draw(st.sampled_from("`~"))
            length = draw(st.integers(3, 5))
            indent = " " * draw(st.integers(0, 3))
            content = draw(st.lists(st.one_of(CODE_TEXT, st.just(MARK)), max_size=3))
            closing = char * (length + draw(st.integers(0, 2)))
            piece = (
                f"\n{indent}{char * length}{draw(CODE_TEXT)}\n"
                + "".join(line + "\n" for line in content)
                + f"{indent}{closing}\n"
            )
        pieces.append((kind, piece))
    if draw(st.booleans()):
        tail = '<memory scope="session">never closed ' + draw(PLAIN)
        pieces.append(("bad", tail))
        rejected.append((tail, "unterminated"))
    return pieces, markers, rejected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=document(), data=st.data())
def test_generated_documents(
    doc: tuple[list[Piece], list[MemoryMarker], list[tuple[str, str]]], data: st.DataObject
) -> None:
    pieces, markers, rejected = doc
    # A separator keeps neighbouring pieces from fusing (two code spans into one longer run).
    text = " ".join(piece for _, piece in pieces)
    expected = " ".join("" if kind in ("marker", "bad") else piece for kind, piece in pieces)
    code = [piece for kind, piece in pieces if kind in ("inline", "fence")]
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=30).map(sorted))
    chunks = split_at(text, cuts)

    for visible, found, refused in (extract_memory_markers(text), stream(chunks)[:3]):
        assert visible == expected
        assert found == markers
        assert [r.raw for r in refused] == [raw for raw, _ in rejected]
        for refusal, (_, fragment) in zip(refused, rejected, strict=True):
            assert fragment in refusal.reason
        # No marker opening ever shows outside code.
        outside = visible
        for piece in code:
            outside = outside.replace(piece, "", 1)
        assert "<memory" not in outside.lower()
        # A rejected marker never comes back as a (session) marker.
        assert not {m.raw for m in found} & {raw for raw, _ in rejected}
