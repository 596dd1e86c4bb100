"""Streaming extraction of ``<memory>`` markers from model output.

The model proposes memories inline::

    <memory scope="session">User prefers explanations before code.</memory>
    <memory scope="user" key="editor.font">JetBrains Mono 14px.</memory>

:class:`MarkerExtractor` strips these markers out of a token stream as it arrives, whatever the
chunk boundaries, and hands back the visible text that is safe to show *now*.
:func:`extract_memory_markers` does the same for a whole text. Both give identical results. What a
marker may say (scopes, keys, bodies) and why one is rejected is :mod:`kairox.memory.marker_rules`.

The grammar of a marker (tag, attributes, nesting) is in :mod:`kairox.memory.marker_rules`.

Code is literal
---------------
Markers are not recognised inside Markdown code, following CommonMark where it matters:

* Fenced code: a line starting with up to three spaces and at least three backticks or tildes
  opens a fence; a line of at least as many of the same character (then only spaces or tabs)
  closes it. An unclosed fence runs to the end of the text. (A backtick line whose info string
  contains a backtick is not a fence, as in CommonMark.)
* Inline code: a run of N backticks opens a code span only if a run of exactly N backticks
  follows *on the same line*; the span ends at that run. An unmatched run is literal text.
  (CommonMark lets spans cross single line breaks; model output rarely does that, and confining
  spans to one line bounds how long the extractor may have to wait.)
* Line starts are judged on the *visible* text, so a marker removed from the start of a line
  leaves that line start intact.
* Not modelled: indented (four-space) code blocks, backslash escapes, HTML blocks. Text there is
  ordinary text, so a marker in it is still extracted (the safe direction: it never shows).

Holding back
------------
The extractor withholds only text that could still turn out to be part of a marker: a trailing
``<`` to ``<memory`` (at most seven characters, released the moment it cannot be a marker), an
open marker, and, inside a not-yet-closed inline code span on the current line, the text from a
``<memory`` onwards (until the span closes or the line ends, when it is known whether that text was
code). Work is linear in the length of the stream.
"""

from __future__ import annotations

import re
from typing import Final

from kairox.memory.marker_rules import (
    KEY_MAX_LENGTH,
    SCOPES,
    WS,
    ExtractionResult,
    MemoryMarker,
    RejectedMarker,
    classify_marker,
    normalize_key,
)

__all__ = [
    "KEY_MAX_LENGTH",
    "SCOPES",
    "ExtractionResult",
    "MarkerExtractor",
    "MemoryMarker",
    "RejectedMarker",
    "extract_memory_markers",
    "normalize_key",
]

_TICK_RUN: Final = re.compile(r"`+")

_OPEN: Final = "<memory"
_CLOSE: Final = "</memory"
# Per-position accepted characters, ASCII case-insensitive. str.lower() is not used because a few
# non-ASCII characters lower-case to ASCII letters.
_OPEN_ALTS: Final = tuple(ch + ch.upper() for ch in _OPEN)
_CLOSE_ALTS: Final = tuple(ch + ch.upper() for ch in _CLOSE)
# What may follow the tag name for `<memory` to be a marker rather than e.g. `<memoryless>`.
_DELIMS: Final = WS + ">/"

# Fast-path scanners: the characters at which each mode has to look closer.
_NORMAL_STOP: Final = re.compile(r"[<`\n]")
_SPAN_STOP: Final = re.compile(r"[<`\n]")
_HELD_STOP: Final = re.compile(r"[`\n]")
_TAG_STOP: Final = re.compile(r"[<>]")

_NORMAL, _SPAN, _FENCE, _MARKER = range(4)
# Fence line states.
_F_REST, _F_LINE_START, _F_RUN, _F_TRAIL = range(4)


def _backtick_table(segment: str) -> dict[int, bool]:
    """For each backtick run in ``segment`` (by start index): is a same-length run after it?"""
    runs = [(m.start(), m.end() - m.start()) for m in _TICK_RUN.finditer(segment)]
    seen: set[int] = set()
    table: dict[int, bool] = {}
    for start, length in reversed(runs):
        table[start] = length in seen
        seen.add(length)
    return table


class MarkerExtractor:
    """Incrementally strip ``<memory>`` markers from a stream of text chunks.

    ``feed(chunk)`` returns the visible text that is now safe to show; ``close()`` returns the
    rest and settles anything still open (an unterminated marker is rejected). Accepted markers
    accumulate in :attr:`markers` and rejected ones in :attr:`rejected`, in stream order.
    The module docstring gives the exact rules.
    """

    def __init__(self) -> None:
        self.markers: list[MemoryMarker] = []
        self.rejected: list[RejectedMarker] = []
        self._out: list[str] = []
        self._closed = False
        self._mode = _NORMAL
        # Set only while re-reading a line whose inline-code opener proved unmatched.
        self._table: dict[int, bool] | None = None

        # Visible-line state, for fence detection.
        self._line_start = True
        self._indent = 0

        # A `<`..`<memory` prefix being matched outside code (its length, and its text).
        self._cand = 0
        self._cand_buf = ""

        # A run of backticks (or tildes at a line start) whose length is not known yet.
        self._run_char = ""
        self._run_len = 0
        self._run_fence_ok = False
        self._run_matched: bool | None = None

        # Inline code span (or a backtick line that may turn out to be a fence opener).
        self._span_n = 0
        self._span_confirmed = False
        self._span_fence = False
        self._span_tick_seen = False
        self._replay: list[str] = []
        self._replay_emitted = 0
        self._held: list[str] = []
        self._holding = False
        self._span_cand = 0

        # Fenced code block.
        self._f_char = ""
        self._f_len = 0
        self._f_state = _F_REST
        self._f_indent = 0
        self._f_run = 0

        # Open marker.
        self._region: list[str] = []
        self._rlen = 0
        self._in_tag = True
        self._tag_end = -1
        self._close_m = 0
        self._close_start = -1
        self._open_m = 0
        self._depth = 0
        self._nested = False
        self._prev = ""

    # ----------------------------------------------------------------------------- public API

    def feed(self, chunk: str) -> str:
        """Consume the next chunk; return the visible text that can be shown now."""
        if self._closed:
            raise ValueError("MarkerExtractor.feed() called after close()")
        if not isinstance(chunk, str):
            raise TypeError(f"MarkerExtractor.feed() expects str, not {type(chunk).__name__}")
        self._run(chunk)
        return self._drain()

    def close(self) -> str:
        """End the stream: return the remaining visible text and settle open markers."""
        if self._closed:
            return ""
        self._closed = True
        while True:
            if self._mode == _NORMAL:
                if self._run_len:
                    self._end_run()
                elif self._cand:
                    if self._cand == len(_OPEN):
                        # A bare `<memory` at the very end: a marker cut off, not prose.
                        self._start_marker(self._cand_buf)
                    else:
                        self._emit(self._cand_buf)
                        self._cand, self._cand_buf = 0, ""
                else:
                    break
            elif self._mode == _SPAN:
                self._close_span_at_end()
            elif self._mode == _MARKER:
                self._finish_marker(terminated=False)
            else:  # _FENCE: an unclosed fence simply runs to the end
                break
        return self._drain()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._closed

    # ----------------------------------------------------------------------------- machinery

    def _drain(self) -> str:
        text = "".join(self._out)
        self._out.clear()
        return text

    def _emit(self, text: str) -> None:
        self._out.append(text)

    def _run(self, text: str) -> None:
        i, n = 0, len(text)
        while i < n:
            mode = self._mode
            if mode == _NORMAL:
                i = self._step_normal(text, i, n)
            elif mode == _MARKER:
                i = self._step_marker(text, i, n)
            elif mode == _SPAN:
                i = self._step_span(text, i, n)
            else:
                i = self._step_fence(text, i, n)

    # NORMAL ---------------------------------------------------------------------------------

    def _step_normal(self, text: str, i: int, n: int) -> int:
        c = text[i]
        if self._run_len:
            if c == self._run_char:
                self._run_len += 1
                self._emit(c)
                return i + 1
            self._end_run()
            return i  # re-read c in whatever mode the run opened
        if self._cand:
            k = self._cand
            if k < len(_OPEN) and c in _OPEN_ALTS[k]:
                self._cand += 1
                self._cand_buf += c
                return i + 1
            if k == len(_OPEN) and c in _DELIMS:
                self._start_marker(self._cand_buf)
                return i  # the delimiter belongs to the marker
            # Not a marker after all: release at once so `<` never piles up.
            self._emit(self._cand_buf)
            self._cand, self._cand_buf = 0, ""
            self._line_start = False
            return i
        if c == "<":
            # Line state is left alone: a marker is invisible, so if this `<` starts one, the
            # visible line carries on afterwards as if it was never there.
            self._cand, self._cand_buf = 1, c
            return i + 1
        if c == "`" or (c == "~" and self._line_start and self._indent <= 3):
            self._run_char = c
            self._run_len = 1
            self._run_fence_ok = self._line_start and self._indent <= 3
            self._run_matched = self._table.get(i) if self._table is not None else None
            self._line_start = False
            self._emit(c)
            return i + 1
        if c == "\n":
            self._line_start, self._indent = True, 0
            self._emit(c)
            return i + 1
        if self._line_start:
            if c == " ":
                self._indent += 1
            else:
                self._line_start = False
            self._emit(c)
            return i + 1
        m = _NORMAL_STOP.search(text, i)
        j = m.start() if m else n
        self._emit(text[i:j])
        return j

    def _end_run(self) -> None:
        """A backtick/tilde run just ended: decide what it opens."""
        char, length = self._run_char, self._run_len
        fence_ok, matched = self._run_fence_ok, self._run_matched
        self._run_len = 0
        if char == "~":
            if length >= 3:
                self._enter_fence("~", length, _F_REST)
            return
        if matched is not None:  # re-reading a line: we already know whether it closes
            if matched:
                self._enter_span(length, confirmed=True, fence=False)
            return
        self._enter_span(length, confirmed=False, fence=fence_ok and length >= 3)

    # SPAN -----------------------------------------------------------------------------------

    def _enter_span(self, n: int, *, confirmed: bool, fence: bool) -> None:
        self._mode = _SPAN
        self._span_n = n
        self._span_confirmed = confirmed
        self._span_fence = fence
        self._span_tick_seen = False
        self._replay = []
        self._replay_emitted = 0
        self._held = []
        self._holding = False
        self._span_cand = 0

    def _span_take(self, text: str) -> None:
        """Add text inside a tentative span: shown now unless it may be a marker."""
        self._replay.append(text)
        if self._holding or self._span_cand:
            self._held.append(text)
        else:
            self._replay_emitted += len(text)
            self._emit(text)

    def _release_held(self) -> None:
        if self._held:
            held = "".join(self._held)
            self._held = []
            self._replay_emitted += len(held)
            self._emit(held)
        self._holding = False
        self._span_cand = 0

    def _leave_span(self) -> None:
        self._mode = _NORMAL
        self._replay = []
        self._held = []
        self._holding = False
        self._span_cand = 0
        self._line_start = False

    def _step_span(self, text: str, i: int, n: int) -> int:
        c = text[i]
        if self._run_len:
            if c == "`":
                self._run_len += 1
                self._span_out(c)
                return i + 1
            length, self._run_len = self._run_len, 0
            if length == self._span_n:
                # The closing run: everything since the opener was code.
                self._release_held()
                self._leave_span()
                return i
        if self._span_confirmed:
            if c == "`":
                self._run_len = 1
                self._emit(c)
                return i + 1
            j = text.find("`", i)
            j = n if j < 0 else j
            self._emit(text[i:j])
            return j
        if c == "`":
            self._span_tick_seen = True
            if self._span_cand:
                self._release_held()
            self._run_len = 1
            self._span_take(c)
            return i + 1
        if c == "\n":
            self._end_span_line("\n")
            return i + 1
        if self._holding:
            m = _HELD_STOP.search(text, i)
            j = m.start() if m else n
            self._span_take(text[i:j])
            return j
        if self._span_cand:
            k = self._span_cand
            if k < len(_OPEN) and c in _OPEN_ALTS[k]:
                self._span_cand += 1
                self._span_take(c)
                return i + 1
            if k == len(_OPEN) and c in _DELIMS:
                self._holding = True
                self._span_cand = 0
                self._span_take(c)
                return i + 1
            self._release_held()
            return i
        if c == "<":
            self._span_cand = 1
            self._span_take(c)
            return i + 1
        m = _SPAN_STOP.search(text, i)
        j = m.start() if m else n
        self._span_take(text[i:j])
        return j

    def _span_out(self, text: str) -> None:
        if self._span_confirmed:
            self._emit(text)
        else:
            self._span_take(text)

    def _end_span_line(self, tail: str) -> None:
        """The line ended (``tail`` is ``"\\n"``, or ``""`` at the end) with the span open."""
        if self._span_fence and not self._span_tick_seen:
            # A fence opener line: its info string was literal, and code starts on the next line.
            n = self._span_n
            self._release_held()
            self._leave_span()
            self._emit(tail)
            self._enter_fence("`", n, _F_LINE_START if tail else _F_REST)
            return
        # The opener was never closed, so it was literal text: re-read the line after it.
        segment = "".join(self._replay) + tail
        skip = self._replay_emitted
        self._leave_span()
        saved_out, saved_table = self._out, self._table
        self._out, self._table = [], _backtick_table(segment)
        try:
            self._run(segment)
        finally:
            produced = "".join(self._out)
            self._out, self._table = saved_out, saved_table
        # The first `skip` characters were already shown, and re-reading cannot change them: no
        # marker can start before the first text we withheld.
        self._emit(produced[skip:])

    def _close_span_at_end(self) -> None:
        if self._run_len:
            length, self._run_len = self._run_len, 0
            if length == self._span_n:
                self._release_held()
                self._leave_span()
                return
        self._end_span_line("")

    # FENCE ----------------------------------------------------------------------------------

    def _enter_fence(self, char: str, length: int, state: int) -> None:
        self._mode = _FENCE
        self._f_char = char
        self._f_len = length
        self._f_state = state
        self._f_indent = 0
        self._f_run = 0

    def _step_fence(self, text: str, i: int, n: int) -> int:
        state = self._f_state
        if state == _F_REST:
            j = text.find("\n", i)
            if j < 0:
                self._emit(text[i:])
                return n
            self._emit(text[i : j + 1])
            self._f_state, self._f_indent = _F_LINE_START, 0
            return j + 1
        c = text[i]
        self._emit(c)
        if state == _F_LINE_START:
            if c == " " and self._f_indent < 3:
                self._f_indent += 1
            elif c == self._f_char:
                self._f_state, self._f_run = _F_RUN, 1
            elif c == "\n":
                self._f_indent = 0
            else:
                self._f_state = _F_REST
        elif state == _F_RUN:
            if c == self._f_char:
                self._f_run += 1
            elif self._f_run >= self._f_len and c in " \t\r":
                self._f_state = _F_TRAIL
            elif self._f_run >= self._f_len and c == "\n":
                self._leave_fence()
            else:
                self._fence_other(c)
        else:  # _F_TRAIL
            if c == "\n":
                self._leave_fence()
            elif c not in " \t\r":
                self._f_state = _F_REST
        return i + 1

    def _fence_other(self, c: str) -> None:
        if c == "\n":
            self._f_state, self._f_indent = _F_LINE_START, 0
        else:
            self._f_state = _F_REST

    def _leave_fence(self) -> None:
        self._mode = _NORMAL
        self._line_start, self._indent = True, 0

    # MARKER ---------------------------------------------------------------------------------

    def _start_marker(self, opening: str) -> None:
        self._mode = _MARKER
        self._cand, self._cand_buf = 0, ""
        self._region = [opening]
        self._rlen = len(opening)
        self._in_tag = True
        self._tag_end = -1
        self._close_m = 0
        self._close_start = -1
        self._open_m = 0
        self._depth = 1
        self._nested = False
        self._prev = ""

    def _step_marker(self, text: str, i: int, n: int) -> int:
        if self._close_m == 0 and self._open_m == 0:
            if self._in_tag:
                m = _TAG_STOP.search(text, i)
                j = m.start() if m else n
            else:
                j = text.find("<", i)
                j = n if j < 0 else j
            if j > i:
                self._region.append(text[i:j])
                self._rlen += j - i
                self._prev = text[j - 1]
                return j
        c = text[i]
        pos = self._rlen
        self._region.append(c)
        self._rlen += 1

        closed = False
        k = self._close_m
        if k == len(_CLOSE):
            if c == ">":
                closed = True
                self._close_m = 0
            elif c not in WS:
                self._close_m = 0
        elif c in _CLOSE_ALTS[k]:
            self._close_m = k + 1
        else:
            self._close_m = 0
        if self._close_m == 0 and not closed and c == "<":
            self._close_m = 1
        if self._close_m == 1 and c == "<":
            self._close_start = pos

        if closed:
            self._depth -= 1
            if self._depth == 0:
                self._finish_marker(terminated=True)
            self._open_m = 0
            self._prev = c
            return i + 1
        if self._in_tag:
            if c == ">":
                self._in_tag = False
                self._tag_end = pos
                if self._prev == "/":
                    self._finish_marker(terminated=True, self_closing=True)
                    return i + 1
            self._prev = c
            return i + 1

        k = self._open_m
        if k == len(_OPEN):
            self._open_m = 0
            if c in _DELIMS:
                self._depth += 1
                self._nested = True
        elif c in _OPEN_ALTS[k]:
            self._open_m = k + 1
        else:
            self._open_m = 0
        if self._open_m == 0 and c == "<":
            self._open_m = 1
        self._prev = c
        return i + 1

    def _finish_marker(self, *, terminated: bool, self_closing: bool = False) -> None:
        raw = "".join(self._region)
        tag_closed = self._tag_end >= 0
        body_end = self._close_start if terminated and not self_closing else len(raw)
        attr_end = self._tag_end if tag_closed else body_end
        attr_text = raw[len(_OPEN) : attr_end]
        if self_closing:
            attr_text = attr_text[:-1]  # drop the `/` of `/>`
        body = raw[self._tag_end + 1 : body_end] if tag_closed else ""
        result = classify_marker(
            raw,
            attr_text,
            body,
            terminated=terminated,
            tag_closed=tag_closed,
            self_closing=self_closing,
            nested=self._nested,
        )
        if isinstance(result, MemoryMarker):
            self.markers.append(result)
        else:
            self.rejected.append(result)
        self._region = []
        self._rlen = 0
        self._mode = _NORMAL


def extract_memory_markers(text: str) -> ExtractionResult:
    """Strip markers from a whole text: ``visible, markers, rejected = extract_memory_markers(t)``.

    Same result as feeding ``text`` to a :class:`MarkerExtractor` in any number of chunks.
    """
    extractor = MarkerExtractor()
    visible = extractor.feed(text) + extractor.close()
    return ExtractionResult(visible, extractor.markers, extractor.rejected)
