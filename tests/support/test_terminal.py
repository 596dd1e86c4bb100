"""Untrusted text on the terminal: the helper, the console, and every printing path."""

from __future__ import annotations

import asyncio
import io
import re
from collections.abc import Callable, Iterator

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kairox.cli.chat_cmd import _review
from kairox.cli.memory_cmd import print_record, print_records
from kairox.cli.search_cmd import print_result
from kairox.memory.store import MemoryRecord
from kairox.retrieval import FusedHit, RetrievalResult
from kairox.retrieval.model import Provenance, SourceReport, SourceStatus
from kairox.support.terminal import SafeConsole, printable
from tests.conftest import memory_record

#: What must never reach stdout: ESC, the other C0 controls but tab and newline, DEL, C1,
#: bidi embeddings/overrides/isolates and marks, and lone surrogates.
FORBIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)

HOSTILE = st.lists(
    st.one_of(
        st.text(st.characters(codec=None), max_size=8),  # every code point, surrogates too
        st.sampled_from(
            ["\x1b[8m", "\x1b]0;pwned\x07", "\x9b2J", "\x85", "\u202e", "\u2066", "\ud800"]
        ),
    ),
    min_size=1,
    max_size=8,
).map("".join)


def test_printable_escapes_controls_bidi_and_surrogates():
    assert printable("a\x1b[8mb") == "a\\x1b[8mb"
    assert printable("\x9b2J\u202eevil\u2069") == "\\x9b2J\\u202eevil\\u2069"
    assert printable("lone \ud800") == "lone \\ud800"
    assert printable("tab\tand\nnewline, ünïcödé, 漢字") == "tab\tand\nnewline, ünïcödé, 漢字"


def test_safe_console_escapes_what_a_caller_forgot():
    out = io.StringIO()
    console = SafeConsole(file=out, force_terminal=True, color_system="standard", highlight=False)
    console.print("[bold]body[/] \x1b[8mhidden \u202eright-to-left", style="red")
    text = out.getvalue()
    assert "\\x1b[8mhidden" in text and "\\u202e" in text
    # Rich's own styling still comes out as escape codes.
    assert "\x1b[1" in text and "body" in text
    assert "\x1b[8m" not in text


def test_safe_console_shows_the_controls_rich_would_drop():
    out = io.StringIO()
    SafeConsole(file=out, highlight=False).print("p\x1b]0;t\x07.html \b\x0b\x0c\r", markup=False)
    assert out.getvalue() == "p\\x1b]0;t\\x07.html \\x08\\x0b\\x0c\\x0d\n"


@pytest.fixture
def captured_stdout() -> Iterator[Callable[[str], bytes]]:
    """Run code with sys.stdin/stdout swapped for byte streams, like a real process's."""

    def run(call: Callable[[], object], input: str = "") -> bytes:
        runner = CliRunner()
        with runner.isolation(input=input) as (out, _err, _):
            call()
            return out.getvalue()

    return run


def _decoded(raw: bytes) -> str:
    # Strict: a lone surrogate written out would not even be valid UTF-8.
    return raw.decode("utf-8")


def _record(body: str, key: str, warned: bool) -> MemoryRecord:
    return memory_record(
        id=7, key=key, body=body, provenance={"injection_warning": warned, "note": body}
    )


SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SETTINGS
@given(body=HOSTILE, key=HOSTILE)
def test_memory_list_and_show_print_no_control(captured_stdout, body, key):
    record = _record(body, key, warned=True)
    listed = _decoded(captured_stdout(lambda: print_records([record], pending=True)))
    assert not FORBIDDEN.search(listed)
    # The flag that an escape once hid still shows.
    assert "⚠ proposed after tool output" in listed
    shown = _decoded(captured_stdout(lambda: print_record(record)))
    assert not FORBIDDEN.search(shown)
    assert "injection_warning" in shown


@SETTINGS
@given(text=HOSTILE, uri=HOSTILE, source=HOSTILE, error=HOSTILE)
def test_search_table_prints_no_control(captured_stdout, text, uri, source, error):
    hit = FusedHit(
        id="h1",
        text=text,
        score=0.5,
        uri=uri,
        metadata={},
        sources=(Provenance(source=source, rank=1, score=1.0),),
    )
    result = RetrievalResult(
        hits=[hit],
        reports=[SourceReport(source=source, status=SourceStatus.ERROR, error=error)],
    )
    printed = _decoded(captured_stdout(lambda: print_result(result, "query")))
    assert not FORBIDDEN.search(printed)
    assert "0.5000" in printed


@SETTINGS
@given(body=HOSTILE, key=HOSTILE)
def test_chat_approval_prompt_prints_no_control(captured_stdout, body, key):
    record = _record(body, key, warned=True)
    # "s" leaves the proposal pending, so the session is never asked to decide.
    printed = _decoded(captured_stdout(lambda: asyncio.run(_review(None, [record])), "s\n"))
    assert not FORBIDDEN.search(printed)
    assert "could be prompt injection" in printed
    assert "left pending" in printed
