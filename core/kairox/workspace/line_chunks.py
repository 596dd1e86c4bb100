"""Chunks made of whole lines, with their line ranges: the shape every workspace hit has.

:class:`SourceChunk` is what :func:`kairox.workspace.code_chunks.chunk_source` returns for
any text: character offsets (``text == original[start:end]``) *and* 1-based, inclusive
line numbers, so a hit can be opened at ``path:line_start``. :func:`line_windows` packs
whole lines into windows of at most ``max_tokens`` tokens, ending a window at a blank line
when one lies in its last fifth, and starting the next one about ``overlap_tokens``
earlier, always at the start of a line. A single line longer than a window (minified
code, a long paragraph) is the one case cut inside a line, by
:func:`kairox.workspace.chunking.chunk_text`.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from kairox.context.tokens import DEFAULT_ENCODING, get_encoding
from kairox.workspace.chunking import chunk_text

__all__ = ["LineTable", "SourceChunk", "line_windows"]

_BOUNDARY_SEARCH_FRACTION = 5
# As in kairox.workspace.chunking: tiktoken would replace lone surrogates anyway.
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class SourceChunk:
    """One chunk of a text, with where it lies in characters and in lines.

    ``line_start``/``line_end`` are 1-based and inclusive. ``symbol`` is the dotted path
    of the definition the chunk holds or lies in (``pkg.mod.Class.method``), None for
    line windows; ``language`` is the grammar used, None for line windows. ``context`` is
    what search sees besides the text (the symbol path and the header lines of the
    definitions around the chunk that it does not hold), ``""`` for line windows.
    """

    index: int
    text: str
    start: int
    end: int
    token_count: int
    line_start: int
    line_end: int
    symbol: str | None = None
    language: str | None = None
    context: str = ""


class LineTable:
    """The lines of one text: where each starts, and how many tokens each holds."""

    def __init__(self, text: str, encoding: str = DEFAULT_ENCODING) -> None:
        self.text = text
        self.encoding = encoding
        self._enc = get_encoding(encoding)
        starts = [0]
        find = text.find
        pos = find("\n")
        while pos >= 0:
            starts.append(pos + 1)
            pos = find("\n", pos + 1)
        if starts[-1] == len(text) and len(starts) > 1:
            starts.pop()  # a final newline does not open another line
        self.starts = starts
        self._tokens: list[int] | None = None
        self._prefix: list[int] = []

    def __len__(self) -> int:
        return len(self.starts)

    def span(self, first: int, last: int) -> tuple[int, int]:
        """Character span of lines ``first..last`` (0-based, inclusive), no final newline."""
        end = self.starts[last + 1] if last + 1 < len(self.starts) else len(self.text)
        if end > self.starts[first] and self.text[end - 1] == "\n":
            end -= 1
        return self.starts[first], end

    def line_of(self, offset: int) -> int:
        """The 0-based line holding character ``offset``."""
        return bisect.bisect_right(self.starts, offset) - 1

    def count(self, piece: str) -> int:
        return len(self._enc.encode_ordinary(_SURROGATE.sub("\ufffd", piece)))

    @property
    def tokens(self) -> list[int]:
        """Tokens of each line encoded on its own (newline included), computed once."""
        if self._tokens is None:
            ends = [*self.starts[1:], len(self.text)]
            self._tokens = [
                self.count(self.text[s:e]) for s, e in zip(self.starts, ends, strict=True)
            ]
            self._prefix = list(itertools.accumulate(self._tokens, initial=0))
        return self._tokens

    def size(self, first: int, last: int) -> int:
        """Tokens of lines ``first..last`` (0-based, inclusive), each line counted alone."""
        self.tokens  # noqa: B018 - fills the prefix sums
        return self._prefix[last + 1] - self._prefix[first]

    def is_blank(self, line: int) -> bool:
        start, end = self.span(line, line)
        return not self.text[start:end].strip()

    def chunk(
        self, index: int, first: int, last: int, symbol: str | None, language: str | None
    ) -> SourceChunk:
        start, end = self.span(first, last)
        piece = self.text[start:end]
        return SourceChunk(
            index, piece, start, end, self.count(piece), first + 1, last + 1, symbol, language
        )


def _long_line(
    table: LineTable, line: int, max_tokens: int, overlap_tokens: int, out: list[SourceChunk]
) -> None:
    """Cut one over-long line into token windows (the only chunks that split a line)."""
    start, end = table.span(line, line)
    for part in chunk_text(
        table.text[start:end],
        max_tokens=max_tokens,
        overlap_tokens=overlap_tokens,
        encoding=table.encoding,
    ):
        out.append(
            SourceChunk(
                len(out),
                part.text,
                start + part.start,
                start + part.end,
                part.token_count,
                line + 1,
                line + 1,
            )
        )


def line_windows(
    table: LineTable,
    first: int = 0,
    last: int | None = None,
    *,
    max_tokens: int = 256,
    overlap_tokens: int = 32,
    symbol: str | None = None,
    language: str | None = None,
    out: list[SourceChunk] | None = None,
) -> list[SourceChunk]:
    """Pack lines ``first..last`` (0-based, inclusive) into overlapping windows.

    Appends to ``out`` (numbering chunks after what it holds) and returns it. Windows
    that are whitespace only are left out.
    """
    out = [] if out is None else out
    last = len(table) - 1 if last is None else last
    tokens: Sequence[int] = table.tokens
    line = first
    while line <= last:
        if tokens[line] > max_tokens:
            if not table.is_blank(line):
                _long_line(table, line, max_tokens, overlap_tokens, out)
            line += 1
            continue
        total, end = 0, line
        while end <= last and total + tokens[end] <= max_tokens:
            total += tokens[end]
            end += 1
        end -= 1  # last line in the window
        if end < last:
            # Prefer ending after a blank line in the window's last fifth.
            floor = line + max(1, (end - line + 1) * (_BOUNDARY_SEARCH_FRACTION - 1) // 5)
            for candidate in range(end, floor - 1, -1):
                if table.is_blank(candidate):
                    end = candidate
                    break
        chunk = table.chunk(len(out), line, end, symbol, language)
        while chunk.token_count > max_tokens and end > line:
            # Lines encoded together can take more tokens than apart: drop a line.
            end -= 1
            chunk = table.chunk(len(out), line, end, symbol, language)
        if chunk.text.strip():
            out.append(chunk)
        if end >= last:
            break
        # The next window starts about overlap_tokens before this one ended, on a line start.
        following, carried = end + 1, 0
        while following - 1 > line and carried + tokens[following - 1] <= overlap_tokens:
            following -= 1
            carried += tokens[following]
        line = following
    return out
