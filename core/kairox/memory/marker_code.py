"""The code modes of the ``<memory>`` extractor: inline code spans and fenced code blocks.

A mixin of :class:`kairox.memory.markers.MarkerExtractor` (it shares the extractor's state);
the rules it follows are under "Code is literal" in :mod:`kairox.memory.markers`. Inside
code a ``<memory`` is text, so these modes only have to know where code ends, and hold back
text from a ``<memory`` in a span that may yet turn out not to be code.
"""

from __future__ import annotations

import re
from typing import Final

from kairox.memory.marker_scan import (
    F_LINE_START,
    F_REST,
    F_RUN,
    F_TRAIL,
    FENCE,
    NORMAL,
    OPENED,
    SPAN,
    next_stop,
    open_match,
)

_TICK_RUN: Final = re.compile(r"`+")
# Fast-path scanners: the characters at which each mode has to look closer.
_SPAN_STOP: Final = re.compile(r"[<`\n]")
_HELD_STOP: Final = re.compile(r"[`\n]")


def _backtick_table(segment: str) -> dict[int, bool]:
    """For each backtick run in ``segment`` (by start index): is a same-length run after it?"""
    runs = [(m.start(), m.end() - m.start()) for m in _TICK_RUN.finditer(segment)]
    seen: set[int] = set()
    table: dict[int, bool] = {}
    for start, length in reversed(runs):
        table[start] = length in seen
        seen.add(length)
    return table


class CodeModes:
    """The SPAN and FENCE modes of :class:`~kairox.memory.markers.MarkerExtractor`."""

    # SPAN -----------------------------------------------------------------------------------

    def _enter_span(self, n: int, *, confirmed: bool, fence: bool) -> None:
        self._mode = SPAN
        self._reset_span(n, confirmed=confirmed, fence=fence)

    def _reset_span(self, n: int, *, confirmed: bool, fence: bool) -> None:
        """Inline code span state (or a backtick line that may turn out to be a fence opener)."""
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
        self._mode = NORMAL
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
            j = next_stop(_HELD_STOP, text, i, n)
            self._span_take(text[i:j])
            return j
        if self._span_cand:
            k = open_match(self._span_cand, c)
            if k == OPENED:
                self._holding = True
                self._span_cand = 0
                self._span_take(c)
                return i + 1
            if k:
                self._span_cand = k
                self._span_take(c)
                return i + 1
            self._release_held()
            return i
        if c == "<":
            self._span_cand = 1
            self._span_take(c)
            return i + 1
        j = next_stop(_SPAN_STOP, text, i, n)
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
            self._enter_fence("`", n, F_LINE_START if tail else F_REST)
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
        self._mode = FENCE
        self._reset_fence(char, length, state)

    def _reset_fence(self, char: str, length: int, state: int) -> None:
        """Fenced code block state: its character, its opening length, the line state."""
        self._f_char = char
        self._f_len = length
        self._f_state = state
        self._f_indent = 0
        self._f_run = 0

    def _step_fence(self, text: str, i: int, n: int) -> int:
        state = self._f_state
        if state == F_REST:
            j = text.find("\n", i)
            if j < 0:
                self._emit(text[i:])
                return n
            self._emit(text[i : j + 1])
            self._f_state, self._f_indent = F_LINE_START, 0
            return j + 1
        c = text[i]
        self._emit(c)
        if state == F_LINE_START:
            if c == " " and self._f_indent < 3:
                self._f_indent += 1
            elif c == self._f_char:
                self._f_state, self._f_run = F_RUN, 1
            elif c == "\n":
                self._f_indent = 0
            else:
                self._f_state = F_REST
        elif state == F_RUN:
            if c == self._f_char:
                self._f_run += 1
            elif self._f_run >= self._f_len and c in " \t\r":
                self._f_state = F_TRAIL
            elif self._f_run >= self._f_len and c == "\n":
                self._leave_fence()
            else:
                self._fence_other(c)
        else:  # F_TRAIL
            if c == "\n":
                self._leave_fence()
            elif c not in " \t\r":
                self._f_state = F_REST
        return i + 1

    def _fence_other(self, c: str) -> None:
        if c == "\n":
            self._f_state, self._f_indent = F_LINE_START, 0
        else:
            self._f_state = F_REST

    def _leave_fence(self) -> None:
        self._mode = NORMAL
        self._line_start, self._indent = True, 0
