"""Text built from blocks joined by blank lines, remembering where blocks and headings start.

HTML, the Office formats, PDF and notebooks build their text this way, so every offset
they record (a heading, a page, a cell) is an offset into the text they return.
"""

from __future__ import annotations

from collections.abc import Mapping

from kairox.workspace.convert.base import Converted, Region
from kairox.workspace.convert.markdown import heading_sections

__all__ = ["BLOCK_SEPARATOR", "Blocks"]

BLOCK_SEPARATOR = "\n\n"


class Blocks:
    """Blocks of text in order, with the offsets of the headings and regions among them."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        #: the length of :attr:`text` so far.
        self.length = 0
        #: ``(offset, level, title)`` of each heading block, in order.
        self.headings: list[tuple[int, int, str]] = []
        #: a region per block added with a ``region`` label (a page, a cell), in order.
        self.regions: list[Region] = []

    def add(
        self, text: str, *, heading: tuple[int, str] | None = None, region: str | None = None
    ) -> tuple[int, int]:
        """Append ``text`` as it is, and return where it lies in :attr:`text`.

        :param heading: ``(level, title)`` when the block is a heading.
        :param region: the label of the region this block is (``"3"`` for page 3).
        """
        if self.parts:
            self.length += len(BLOCK_SEPARATOR)
        start = self.length
        self.parts.append(text)
        self.length += len(text)
        if heading is not None:
            self.headings.append((start, *heading))
        if region is not None:
            self.regions.append(Region(start, self.length, region))
        return start, self.length

    @property
    def text(self) -> str:
        return BLOCK_SEPARATOR.join(self.parts)

    def converted(
        self,
        format: str,
        *,
        regions: Mapping[str, tuple[Region, ...]] | None = None,
        title: str = "",
    ) -> Converted:
        """The blocks as a :class:`Converted`, a section per heading."""
        return Converted(
            text=self.text,
            sections=heading_sections(self.headings, self.length),
            regions=dict(regions or {}),
            title=title,
            format=format,
        )
