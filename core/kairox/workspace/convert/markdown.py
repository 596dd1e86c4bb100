"""Markdown: the text as it is, with a section per heading (ATX or setext).

Headings are found by a real CommonMark parser (markdown-it-py, which rich already
needs), so a ``#`` line inside a fenced code block is not taken for a heading.
"""

from __future__ import annotations

from collections.abc import Sequence

from kairox.workspace.convert.base import Converted, ConverterSpec, Region

HEADING_SEPARATOR = " > "


def line_starts(text: str) -> list[int]:
    """The character offset where each line of ``text`` starts (line 1 at index 0)."""
    starts = [0]
    position = text.find("\n")
    while position != -1:
        starts.append(position + 1)
        position = text.find("\n", position + 1)
    return starts


def heading_sections(headings: Sequence[tuple[int, int, str]], length: int) -> tuple[Region, ...]:
    """Sections from ``(offset, level, title)`` headings in order: each runs to the next
    heading and is labelled with its heading path (the open headings above it)."""
    sections: list[Region] = []
    path: list[tuple[int, str]] = []
    for number, (offset, level, title) in enumerate(headings):
        while path and path[-1][0] >= level:
            path.pop()
        path.append((level, title))
        end = headings[number + 1][0] if number + 1 < len(headings) else length
        label = HEADING_SEPARATOR.join(t for _, t in path)
        sections.append(Region(offset, end, label))
    return tuple(sections)


def markdown_headings(text: str) -> list[tuple[int, int, str]]:
    """``(offset, level, title)`` of every heading in the Markdown ``text``."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(text)
    starts = line_starts(text)
    found = []
    for number, token in enumerate(tokens):
        if token.type != "heading_open" or token.map is None:
            continue
        inline = tokens[number + 1]
        title = " ".join(inline.content.split())
        if title:
            found.append((starts[token.map[0]], int(token.tag[1:]), title))
    return found


def markdown_sections(text: str) -> tuple[Region, ...]:
    """The sections of Markdown ``text``, one per heading."""
    return heading_sections(markdown_headings(text), len(text))


def convert_markdown(data: bytes, filename: str) -> Converted:
    from kairox.workspace.convert.text import decode_text

    text = decode_text(data, filename)
    return Converted(
        text=text,
        sections=markdown_sections(text),
        source_lines=True,
        format="markdown",
    )


MARKDOWN = ConverterSpec(
    name="markdown",
    suffixes=(".md", ".markdown", ".mdx"),
    convert=convert_markdown,
    description="Markdown as is, a section per heading (the heading path in each hit).",
)
