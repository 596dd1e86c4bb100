"""What the ``<memory>`` extractor's modes share: the tag they match, the mode numbers.

:class:`kairox.memory.markers.MarkerExtractor` is one state machine whose modes live in three
modules (:mod:`~kairox.memory.markers` for plain text, :mod:`~kairox.memory.marker_code` for
code spans and fences, :mod:`~kairox.memory.marker_region` for an open marker); these are the
names they all use.
"""

from __future__ import annotations

import re
from typing import Final

from kairox.memory.marker_rules import WS

OPEN: Final = "<memory"
CLOSE: Final = "</memory"
# Per-position accepted characters, ASCII case-insensitive. str.lower() is not used because a few
# non-ASCII characters lower-case to ASCII letters.
OPEN_ALTS: Final = tuple(ch + ch.upper() for ch in OPEN)
CLOSE_ALTS: Final = tuple(ch + ch.upper() for ch in CLOSE)
# What may follow the tag name for `<memory` to be a marker rather than e.g. `<memoryless>`.
DELIMS: Final = WS + ">/"

# The extractor's modes.
NORMAL, SPAN, FENCE, MARKER = range(4)
# Fence line states.
F_REST, F_LINE_START, F_RUN, F_TRAIL = range(4)

#: What :func:`open_match` returns when a delimiter follows the whole tag name.
OPENED: Final = -1


def open_match(k: int, c: str) -> int:
    """Carry a match of ``<memory`` on by one character: ``k`` characters matched, then ``c``.

    ``k + 1`` while ``c`` continues the tag name, :data:`OPENED` when ``c`` is a delimiter
    after the whole name (a marker starts), ``0`` when the match breaks.
    """
    if k < len(OPEN):
        return k + 1 if c in OPEN_ALTS[k] else 0
    return OPENED if c in DELIMS else 0


def next_stop(stops: re.Pattern[str], text: str, i: int, n: int) -> int:
    """Where in ``text[i:n]`` the next of a mode's ``stops`` characters is (``n`` if none):
    what lies before it needs no closer look."""
    m = stops.search(text, i)
    return m.start() if m else n
