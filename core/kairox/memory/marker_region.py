"""The open-marker mode of the ``<memory>`` extractor: from ``<memory`` to its ``</memory>``.

A mixin of :class:`kairox.memory.markers.MarkerExtractor` (it shares the extractor's state).
It collects the marker's raw text, tracks nesting and where the opening tag ends, and hands
the parts to :func:`kairox.memory.marker_rules.classify_marker` for the verdict.
"""

from __future__ import annotations

import re
from typing import Final

from kairox.memory.marker_rules import WS, MemoryMarker, RejectedMarker, classify_marker
from kairox.memory.marker_scan import (
    CLOSE,
    CLOSE_ALTS,
    MARKER,
    NORMAL,
    OPEN,
    OPENED,
    next_stop,
    open_match,
)

# The characters at which an opening tag has to be looked at closer.
_TAG_STOP: Final = re.compile(r"[<>]")


class MarkerRegion:
    """The MARKER mode of :class:`~kairox.memory.markers.MarkerExtractor`."""

    markers: list[MemoryMarker]
    rejected: list[RejectedMarker]

    def _start_marker(self, opening: str) -> None:
        self._mode = MARKER
        self._cand, self._cand_buf = 0, ""
        self._reset_region(opening, depth=1)

    def _reset_region(self, opening: str, *, depth: int) -> None:
        """Open marker state: its raw text so far (``opening``), and ``depth`` levels open."""
        self._region = [opening] if opening else []
        self._rlen = len(opening)
        self._in_tag = True
        self._tag_end = -1
        self._close_m = 0
        self._close_start = -1
        self._open_m = 0
        self._depth = depth
        self._nested = False
        self._prev = ""

    def _step_marker(self, text: str, i: int, n: int) -> int:
        if self._close_m == 0 and self._open_m == 0:
            if self._in_tag:
                j = next_stop(_TAG_STOP, text, i, n)
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
        if k == len(CLOSE):
            if c == ">":
                closed = True
                self._close_m = 0
            elif c not in WS:
                self._close_m = 0
        elif c in CLOSE_ALTS[k]:
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

        k = open_match(self._open_m, c)
        if k == OPENED:
            self._depth += 1
            self._nested = True
        self._open_m = max(k, 0)
        if self._open_m == 0 and c == "<":
            self._open_m = 1
        self._prev = c
        return i + 1

    def _finish_marker(self, *, terminated: bool, self_closing: bool = False) -> None:
        raw = "".join(self._region)
        tag_closed = self._tag_end >= 0
        body_end = self._close_start if terminated and not self_closing else len(raw)
        attr_end = self._tag_end if tag_closed else body_end
        attr_text = raw[len(OPEN) : attr_end]
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
        self._mode = NORMAL
