"""The streaming extractor against a direct statement of the rules, and generated documents."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kairox.memory import MemoryMarker, RejectedMarker, extract_memory_markers
from tests.memory.conftest import MARK, one_char_at_a_time, split_at, stream

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
