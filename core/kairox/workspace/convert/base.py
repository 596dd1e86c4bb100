"""What a converter is, and what it returns: text plus where its structure lies in it.

A converter turns one file's bytes into plain text and spans over that text: the
heading path of each section, and labelled regions (``page`` 3, ``sheet`` "Q3",
``slide`` 2, ``cell`` 7). Chunkers cut at those spans and hits carry their labels, so a
PDF hit names its page and a Markdown hit its heading path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kairox.support.errors import KairoxError

__all__ = ["ConversionError", "Converted", "ConverterSpec", "Region"]


class ConversionError(KairoxError, ValueError):
    """A file its converter cannot read (corrupt, encrypted, truncated); says why."""


@dataclass(frozen=True, slots=True)
class Region:
    """``text[start:end]`` is one labelled part: a section (``label`` its heading path,
    outermost first, joined by " > "), a page, a sheet, a slide or a cell."""

    start: int
    end: int
    label: str


@dataclass(frozen=True, slots=True)
class Converted:
    """A file as text, with its structure.

    :param sections: heading sections in order; a section runs to the next heading.
    :param regions: other structure by kind (``"page"``, ``"sheet"``, ``"slide"``,
        ``"cell"``), each kind's regions in order and not overlapping.
    :param source_lines: whether line *n* of ``text`` is line *n* of the file (plain
        text and Markdown), so hits can give line ranges into the file itself.
    :param title: the document's own title, when it has one (HTML ``<title>``).
    """

    text: str
    sections: tuple[Region, ...] = ()
    regions: Mapping[str, tuple[Region, ...]] = field(default_factory=dict)
    source_lines: bool = False
    title: str = ""
    format: str = "text"


@dataclass(frozen=True, slots=True)
class ConverterSpec:
    """A converter registered through ``kairox_register_converters``.

    :param name: unique among converters (``"pdf"``, ``"html"``...).
    :param suffixes: the file name endings it claims, lower case with the dot
        (``(".html", ".htm")``). A later plugin's claim on a suffix replaces an earlier
        one's, so a plugin can replace a built-in converter.
    :param convert: ``convert(data, filename)`` returns :class:`Converted`; raises
        :class:`ConversionError` for a file it cannot read and :class:`ImportError`
        (with the install hint, see :class:`kairox.support.lazy_imports.LazyImport`) when its
        library is missing.
    :param install: how to install what it needs, for ``kairox plugins`` and errors.
    :param installed: whether what it needs can be imported, checked without importing it
        (``LazyImport.available``); ``kairox plugins`` lists a converter whose library is
        missing as not installed, with :attr:`install`.
    """

    name: str
    suffixes: tuple[str, ...]
    convert: Callable[[bytes, str], Converted]
    description: str = ""
    install: str = ""
    installed: Callable[[], bool] = field(default=lambda: True, compare=False)
