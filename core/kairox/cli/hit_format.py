"""Where a hit lies, in the forms people open: ``path:12-40``, vimgrep lines, code excerpts.

Workspace hits carry their path relative to the workspace root and their line range;
other hits whose ``uri`` is a file inside the workspace are shown relative to it too.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

from kairox.retrieval import FusedHit

__all__ = ["code_excerpt", "first_match", "location", "numbered_lines", "vimgrep_line"]

_WORD = re.compile(r"\w+", re.UNICODE)
#: Lines of a code excerpt shown around the first query word.
EXCERPT_LINES = 6


def _relative(uri: str, root: Path | None) -> str:
    if root is None or not uri.startswith("/"):
        return uri
    try:
        return Path(uri).relative_to(root).as_posix()
    except ValueError:
        return uri


def _lines(meta: Any) -> tuple[int, int] | None:
    try:
        return int(meta["line_start"]), int(meta["line_end"])
    except (KeyError, TypeError, ValueError):
        return None


def _where(hit: FusedHit, root: Path | None) -> str:
    path = hit.metadata.get("path")
    if isinstance(path, str) and path:
        return path
    return _relative(hit.uri, root) if hit.uri else hit.id


def location(hit: FusedHit, root: Path | None) -> str:
    """``path:12-40`` (or ``path:12``) when the hit knows its lines, ``path:p3`` (or
    ``path:p3-4``) when it knows its pages (a PDF); else its uri or id."""
    meta = hit.metadata
    where = _where(hit, root)
    lines = _lines(meta)
    if lines is None:
        page, page_end = meta.get("page"), meta.get("page_end")
        if page is None:
            return where
        return f"{where}:p{page}" + (f"-{page_end}" if page_end not in (None, page) else "")
    first, last = lines
    return f"{where}:{first}" if first == last else f"{where}:{first}-{last}"


def first_match(text: str, query: str) -> tuple[int, int]:
    """``(line, column)``, 0-based, of the first query word in ``text`` (else the first
    non-blank line's start)."""
    lowered = text.casefold()
    positions = [lowered.find(w) for w in _WORD.findall(query.casefold())]
    found = min((p for p in positions if p >= 0), default=-1)
    if found < 0:
        stripped = text.lstrip("\n")
        line = text.count("\n", 0, len(text) - len(stripped))
        return line, len(stripped) - len(stripped.lstrip(" \t"))
    line = text.count("\n", 0, found)
    column = found - (text.rfind("\n", 0, found) + 1)
    return line, column


def vimgrep_line(hit: FusedHit, root: Path | None, query: str) -> str:
    """``path:line:col:text`` for quickfix lists (1-based line and column)."""
    meta = hit.metadata
    where = _where(hit, root)
    line, column = first_match(hit.text, query)
    lines = _lines(meta)
    first = lines[0] if lines else 1
    text = hit.text.split("\n")[line].rstrip("\r")
    return f"{where}:{first + line}:{column + 1}:{text}"


def code_excerpt(text: str, query: str, lines: int = EXCERPT_LINES) -> str:
    """A few lines around the first query word, indentation kept (common indent removed)."""
    rows = text.split("\n")
    line, _ = first_match(text, query)
    start = max(0, min(line - 1, len(rows) - lines))
    shown = textwrap.dedent("\n".join(r.rstrip() for r in rows[start : start + lines]))
    return (
        ("…\n" if start else "") + shown.strip("\n") + ("\n…" if start + lines < len(rows) else "")
    )


def numbered_lines(hit: FusedHit, query: str, lines: int = EXCERPT_LINES) -> list[str]:
    """A few lines of the hit around the first query word, each prefixed with its line
    number in the file when the hit knows its lines (``  120 │ def f():``)."""
    rows = hit.text.split("\n")
    line, _ = first_match(hit.text, query)
    start = max(0, min(line - 1, len(rows) - lines))
    shown = rows[start : start + lines]
    while shown and not shown[-1].strip():
        shown.pop()
    known = _lines(hit.metadata)
    if known is None:
        return [row.rstrip() for row in shown]
    first = known[0] + start
    width = len(str(first + len(shown)))
    return [f"{first + n:>{width}} │ {row}".rstrip() for n, row in enumerate(shown)]
