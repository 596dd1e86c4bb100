"""HTML: the page's main content as text, headings as sections; no scripts, styles,
navigation, headers, footers or forms.

Parsed with Beautiful Soup over the standard library's parser (tolerant of broken
markup, nothing compiled). The main content is ``<main>``, else ``[role=main]``, else
the only ``<article>``, else ``<body>``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kairox.support.lazy_imports import LazyImport
from kairox.workspace.convert.base import ConversionError, Converted, ConverterSpec
from kairox.workspace.convert.blocks import Blocks
from kairox.workspace.convert.text import decode_text

DOCUMENTS_EXTRA = "pip install 'kairox[documents]'"


def documents_converter(
    name: str,
    suffixes: tuple[str, ...],
    convert: Callable[[bytes, str], Converted],
    description: str,
    library: LazyImport,
) -> ConverterSpec:
    """A converter whose ``library`` comes with the ``documents`` extra."""
    return ConverterSpec(
        name,
        suffixes,
        convert,
        description,
        install=DOCUMENTS_EXTRA,
        installed=library.available,
    )


BS4 = LazyImport(
    "bs4",
    needed_by="the HTML converter",
    install=DOCUMENTS_EXTRA,
    distributions={"bs4": "beautifulsoup4"},
)

#: Never content: dropped with everything inside them.
_DROPPED = (
    "script",
    "style",
    "noscript",
    "template",
    "nav",
    "header",
    "footer",
    "aside",
    "form",
    "iframe",
    "svg",
    "canvas",
    "button",
    "select",
    "dialog",
)
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
#: Elements that end a line of text (a paragraph, a list item, a table row...).
_BLOCKS = frozenset(
    [
        "p",
        "div",
        "section",
        "article",
        "main",
        "li",
        "ul",
        "ol",
        "dl",
        "dt",
        "dd",
        "pre",
        "blockquote",
        "table",
        "tr",
        "thead",
        "tbody",
        "tfoot",
        "caption",
        "figure",
        "figcaption",
        "details",
        "summary",
        "address",
        "hr",
        "br",
    ]
)
_SPACE = re.compile(r"\s+")


def _main(soup: Any) -> Any:
    main = soup.find("main") or soup.find(attrs={"role": "main"})
    if main is None:
        articles = soup.find_all("article")
        main = articles[0] if len(articles) == 1 else None
    return main or soup.body or soup


class _Writer(Blocks):
    """Collects blocks of text, and the headings among them, from an HTML tree."""

    def __init__(self) -> None:
        super().__init__()
        self.line: list[str] = []

    def flush(self) -> None:
        text = _SPACE.sub(" ", "".join(self.line)).strip()
        self.line = []
        if text:
            self.add(text)

    def heading(self, level: int, text: str) -> None:
        self.flush()
        text = _SPACE.sub(" ", text).strip()
        if text:
            self.add(text, heading=(level, text))

    def walk(self, node: Any, bs4: Any) -> None:
        for child in node.children:
            if isinstance(child, bs4.Comment | bs4.Doctype | bs4.ProcessingInstruction):
                continue
            if isinstance(child, bs4.NavigableString):
                self.line.append(str(child))
            elif child.name in _HEADINGS:
                self.heading(_HEADINGS[child.name], child.get_text(" "))
            elif child.name == "pre":
                self.flush()
                code = child.get_text().strip("\n")
                if code.strip():
                    self.add(code)
            elif child.name in _BLOCKS:
                self.flush()
                self.walk(child, bs4)
                self.flush()
            elif child.name in ("td", "th"):
                self.walk(child, bs4)
                self.line.append(" | ")
            else:
                self.walk(child, bs4)


def convert_html(data: bytes, filename: str) -> Converted:
    bs4 = BS4.load()
    if b"\x00" in data[:8192]:
        raise ConversionError("holds binary data (NUL bytes), not HTML")
    try:
        markup = decode_text(data, filename)
    except ConversionError:
        markup = data.decode("latin-1")  # old pages: the parser still reads the markup
    soup = bs4.BeautifulSoup(markup, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for element in soup.find_all(_DROPPED):
        element.decompose()
    writer = _Writer()
    writer.walk(_main(soup), bs4)
    writer.flush()
    return writer.converted("html", title=title)


HTML = documents_converter(
    "html",
    (".html", ".htm", ".xhtml"),
    convert_html,
    "HTML main content (no scripts or navigation), a section per heading.",
    BS4,
)
