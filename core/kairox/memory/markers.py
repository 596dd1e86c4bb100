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

from kairox.memory.marker_code import CodeModes
from kairox.memory.marker_region import MarkerRegion
from kairox.memory.marker_rules import (
    KEY_MAX_LENGTH,
    SCOPES,
    ExtractionResult,
    MemoryMarker,
    RejectedMarker,
    normalize_key,
)
from kairox.memory.marker_scan import (
    F_REST,
    MARKER,
    NORMAL,
    OPEN,
    OPENED,
    SPAN,
    next_stop,
    open_match,
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

# Fast-path scanner: the characters at which plain text has to be looked at closer.
_NORMAL_STOP: Final = re.compile(r"[<`\n]")


class MarkerExtractor(CodeModes, MarkerRegion):
    """Incrementally strip ``<memory>`` markers from a stream of text chunks.

    ``feed(chunk)`` returns the visible text that is now safe to show; ``close()`` returns the
    rest and settles anything still open (an unterminated marker is rejected). Accepted markers
    accumulate in :attr:`markers` and rejected ones in :attr:`rejected`, in stream order.
    The module docstring gives the exact rules. The modes for code and for an open marker are
    mixins (:mod:`~kairox.memory.marker_code`, :mod:`~kairox.memory.marker_region`).
    """

    def __init__(self) -> None:
        self.markers: list[MemoryMarker] = []
        self.rejected: list[RejectedMarker] = []
        self._out: list[str] = []
        self._closed = False
        self._mode = NORMAL
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

        self._reset_span(0, confirmed=False, fence=False)
        self._reset_fence("", 0, F_REST)
        self._reset_region("", depth=0)

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
            if self._mode == NORMAL:
                if self._run_len:
                    self._end_run()
                elif self._cand:
                    if self._cand == len(OPEN):
                        # A bare `<memory` at the very end: a marker cut off, not prose.
                        self._start_marker(self._cand_buf)
                    else:
                        self._emit(self._cand_buf)
                        self._cand, self._cand_buf = 0, ""
                else:
                    break
            elif self._mode == SPAN:
                self._close_span_at_end()
            elif self._mode == MARKER:
                self._finish_marker(terminated=False)
            else:  # FENCE: an unclosed fence simply runs to the end
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
            if mode == NORMAL:
                i = self._step_normal(text, i, n)
            elif mode == MARKER:
                i = self._step_marker(text, i, n)
            elif mode == SPAN:
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
            k = open_match(self._cand, c)
            if k == OPENED:
                self._start_marker(self._cand_buf)
                return i  # the delimiter belongs to the marker
            if k:
                self._cand, self._cand_buf = k, self._cand_buf + c
                return i + 1
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
        j = next_stop(_NORMAL_STOP, text, i, n)
        self._emit(text[i:j])
        return j

    def _end_run(self) -> None:
        """A backtick/tilde run just ended: decide what it opens."""
        char, length = self._run_char, self._run_len
        fence_ok, matched = self._run_fence_ok, self._run_matched
        self._run_len = 0
        if char == "~":
            if length >= 3:
                self._enter_fence("~", length, F_REST)
            return
        if matched is not None:  # re-reading a line: we already know whether it closes
            if matched:
                self._enter_span(length, confirmed=True, fence=False)
            return
        self._enter_span(length, confirmed=False, fence=fence_ok and length >= 3)


def extract_memory_markers(text: str) -> ExtractionResult:
    """Strip markers from a whole text: ``visible, markers, rejected = extract_memory_markers(t)``.

    Same result as feeding ``text`` to a :class:`MarkerExtractor` in any number of chunks.
    """
    extractor = MarkerExtractor()
    visible = extractor.feed(text) + extractor.close()
    return ExtractionResult(visible, extractor.markers, extractor.rejected)


def recorded_reply(visible: str) -> str:
    """A reply's visible text as it is recorded: without the whitespace that removed markers
    (or the model) left at its end; the text before is kept as it is."""
    return visible.rstrip()
