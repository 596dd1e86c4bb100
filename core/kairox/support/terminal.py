"""Untrusted text made safe to print on a terminal.

Memory bodies, hits, snippets and error bodies come from files, models and servers. Printed
as they are, ``ESC [ 8 m`` hides the rest of a line, a C1 ``CSI`` does the same on terminals
that honour 8-bit controls, and a bidi override (U+202E) shows text in an order other than
the one it is stored in. :func:`printable` turns each such character into a visible escape
(``\\x1b``, ``\\u202e``) and masks known secrets; :class:`SafeConsole` applies it to
everything a Rich console renders, so no command has to remember. JSON output is not made printable: it escapes
control characters itself and stays exact.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.segment import Segment

from kairox.support.secrets import scrub

__all__ = ["UNSAFE", "SafeConsole", "printable"]

#: C0 controls but tab and newline, DEL and C1, bidi embeddings, overrides and isolates,
#: the implicit direction marks, and lone surrogates (which no terminal encoding can write).
UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every terminal control, bidi control and lone surrogate escaped, and
    every known secret masked (:func:`kairox.support.secrets.scrub`)."""
    return UNSAFE.sub(_escape, scrub(text))


class SafeConsole(Console):
    """A Rich console that escapes unsafe characters in all the text it prints.

    Only the text of segments is touched: Rich's own control segments (cursor moves of a
    progress bar) and the styles it turns into escape codes at output pass through.
    """

    def render_str(self, text: str, **options: Any) -> Any:
        # Escaped before Rich makes a Text of it: Text() silently drops BEL, backspace,
        # vertical tab, form feed and CR, which would leave no trace for render() to show.
        return super().render_str(printable(text), **options)

    def render(self, renderable: Any, options: Any = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control:
                yield segment
                continue
            clean = printable(segment.text)
            yield segment if clean == segment.text else Segment(clean, segment.style)
