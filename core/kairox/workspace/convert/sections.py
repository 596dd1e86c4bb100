"""Chunking converted text along its structure.

The text is cut at every section and region start (a heading, a page, a slide, a
sheet, a cell); neighbouring pieces are joined again while they fit in one chunk, and a
piece larger than a chunk is cut by :func:`kairox.workspace.chunking.chunk_text` (token
windows that prefer paragraph, line and sentence ends). So a chunk starts at a heading
whenever it can, and each names what it came from: its heading path, its page (and the
last page when it runs on), and line numbers when the text's lines are the file's.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from kairox.context.tokens import DEFAULT_ENCODING, get_encoding
from kairox.workspace.chunking import chunk_text
from kairox.workspace.convert.base import Converted, Region
from kairox.workspace.convert.markdown import line_starts

__all__ = ["DocumentChunk", "chunk_converted"]


@dataclass(frozen=True)
class DocumentChunk:
    """``text == converted.text[start:end]``, with what it came from in ``metadata``
    (``heading``, ``page``/``page_end`` and the like, ``line_start``/``line_end``)."""

    index: int
    text: str
    start: int
    end: int
    token_count: int
    metadata: dict[str, Any] = field(default_factory=dict)


def _label_value(label: str) -> int | str:
    return int(label) if label.isdigit() else label


def _containing(regions: tuple[Region, ...], starts: list[int], offset: int) -> Region | None:
    at = bisect.bisect_right(starts, offset) - 1
    if at >= 0 and regions[at].start <= offset < max(regions[at].end, regions[at].start + 1):
        return regions[at]
    return None


class _Describer:
    """The metadata of a span of one converted text."""

    def __init__(self, converted: Converted) -> None:
        self.converted = converted
        self.sections = converted.sections
        self.section_starts = [s.start for s in self.sections]
        self.regions = {
            kind: (regions, [r.start for r in regions])
            for kind, regions in converted.regions.items()
            if regions
        }
        self.lines = line_starts(converted.text) if converted.source_lines else None

    def describe(self, start: int, end: int) -> dict[str, Any]:
        metadata: dict[str, Any] = {}
        section = _containing(self.sections, self.section_starts, start)
        if section is not None:
            metadata["heading"] = section.label
        last = max(start, end - 1)
        for kind, (regions, starts) in self.regions.items():
            first = _containing(regions, starts, start)
            if first is None:  # the span starts between regions: take the next one
                at = bisect.bisect_left(starts, start)
                first = regions[at] if at < len(regions) and regions[at].start < end else None
            if first is None:
                continue
            metadata[kind] = _label_value(first.label)
            final = _containing(regions, starts, last)
            if final is not None and final is not first:
                metadata[f"{kind}_end"] = _label_value(final.label)
        if self.lines is not None:
            metadata["line_start"] = bisect.bisect_right(self.lines, start)
            metadata["line_end"] = bisect.bisect_right(self.lines, last)
        return metadata


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    piece = text[start:end]
    lead = len(piece) - len(piece.lstrip())
    return start + lead, start + len(piece.rstrip())


def chunk_converted(
    converted: Converted,
    *,
    max_tokens: int = 256,
    overlap_tokens: int = 32,
    encoding: str = DEFAULT_ENCODING,
) -> list[DocumentChunk]:
    """The chunks of ``converted``, none over ``max_tokens`` tokens (see the module doc)."""
    text = converted.text
    if not text or text.isspace():
        return []
    enc = get_encoding(encoding)

    def count(piece: str) -> int:
        return len(enc.encode_ordinary(piece))

    cuts = {0, len(text)}
    cuts.update(s.start for s in converted.sections if 0 < s.start < len(text))
    for regions in converted.regions.values():
        cuts.update(r.start for r in regions if 0 < r.start < len(text))
    groups: list[tuple[int, int, int]] = []  # (start, end, tokens), trimmed
    for lo, hi in pairwise(sorted(cuts)):
        lo, hi = _trimmed(text, lo, hi)
        if lo >= hi:
            continue
        tokens = count(text[lo:hi])
        if groups and groups[-1][2] + tokens <= max_tokens:
            joined = (groups[-1][0], hi)
            joined_tokens = count(text[joined[0] : hi])
            if joined_tokens <= max_tokens:
                groups[-1] = (*joined, joined_tokens)
                continue
        groups.append((lo, hi, tokens))

    spans: list[tuple[int, int, int]] = []
    for lo, hi, tokens in groups:
        if tokens <= max_tokens:
            spans.append((lo, hi, tokens))
            continue
        for part in chunk_text(
            text[lo:hi], max_tokens=max_tokens, overlap_tokens=overlap_tokens, encoding=encoding
        ):
            start, end = _trimmed(text, lo + part.start, lo + part.end)
            if start < end:
                spans.append((start, end, count(text[start:end])))
    describer = _Describer(converted)
    return [
        DocumentChunk(index, text[start:end], start, end, tokens, describer.describe(start, end))
        for index, (start, end, tokens) in enumerate(spans)
    ]
