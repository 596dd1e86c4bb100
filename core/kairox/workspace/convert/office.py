"""Word, PowerPoint and Excel files through their own libraries (python-docx,
python-pptx, openpyxl): headings as sections, a ``slide`` region per slide, a ``sheet``
region per worksheet.

Each format is a ZIP of XML parts; a truncated or foreign file fails to open and is
refused with the library's reason.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterable
from typing import Any

from kairox.support.lazy_imports import LazyImport
from kairox.workspace.convert.base import ConversionError, Converted, Region
from kairox.workspace.convert.blocks import Blocks
from kairox.workspace.convert.html import DOCUMENTS_EXTRA, documents_converter

DOCX = LazyImport(
    "docx",
    needed_by="the DOCX converter",
    install=DOCUMENTS_EXTRA,
    distributions={"docx": "python-docx"},
)
PPTX = LazyImport(
    "pptx",
    needed_by="the PPTX converter",
    install=DOCUMENTS_EXTRA,
    distributions={"pptx": "python-pptx"},
)
OPENPYXL = LazyImport("openpyxl", needed_by="the XLSX converter", install=DOCUMENTS_EXTRA)

_HEADING_STYLE = re.compile(r"^(?:heading\s*(\d)|title)$", re.IGNORECASE)
#: Rows of one sheet read at most (a data dump is not a document).
MAX_SHEET_ROWS = 10_000


def _add(blocks: Blocks, text: str, heading_level: int | None = None) -> tuple[int, int] | None:
    """Add ``text`` stripped (a heading if ``heading_level``); None, adding nothing, if empty."""
    text = text.strip()
    if not text:
        return None
    heading = None if heading_level is None else (heading_level, " ".join(text.split()))
    return blocks.add(text, heading=heading)


def _opened(load: Callable[[io.BytesIO], Any], data: bytes, what: str) -> Any:
    try:
        return load(io.BytesIO(data))
    except Exception as exc:  # zipfile.BadZipFile, KeyError, lxml errors...
        raise ConversionError(
            f"is not a readable {what} file ({type(exc).__name__}: {exc})"
        ) from exc


def _table_lines(rows: Iterable[Iterable[str]]) -> str:
    lines = []
    for row in rows:
        cells = [" ".join(c.split()) for c in row]
        if any(cells):
            lines.append(" | ".join(cells))
    return "\n".join(lines)


def convert_docx(data: bytes, filename: str) -> Converted:
    docx = DOCX.load()
    document = _opened(docx.Document, data, "DOCX")
    blocks = Blocks()
    try:
        for item in document.iter_inner_content():
            if isinstance(item, docx.table.Table):
                _add(blocks, _table_lines([c.text for c in row.cells] for row in item.rows))
                continue
            style = item.style.name if item.style is not None else ""
            match = _HEADING_STYLE.match(style or "")
            level = (int(match.group(1)) if match.group(1) else 1) if match else None
            _add(blocks, item.text, level)
    except Exception as exc:
        raise ConversionError(f"is not a readable DOCX file ({type(exc).__name__}: {exc})") from exc
    return blocks.converted("docx", title=(document.core_properties.title or "").strip())


def _shape_texts(shapes: Iterable[Any]) -> Iterable[str]:
    for shape in shapes:
        if getattr(shape, "has_text_frame", False) and shape.has_text_frame:
            yield shape.text_frame.text
        elif getattr(shape, "has_table", False) and shape.has_table:
            yield _table_lines([c.text for c in row.cells] for row in shape.table.rows)
        elif hasattr(shape, "shapes"):  # a group
            yield from _shape_texts(shape.shapes)


def convert_pptx(data: bytes, filename: str) -> Converted:
    pptx = PPTX.load()
    presentation = _opened(pptx.Presentation, data, "PPTX")
    blocks = Blocks()
    slides: list[Region] = []
    try:
        for number, slide in enumerate(presentation.slides, start=1):
            title_shape = slide.shapes.title
            title = title_shape.text_frame.text.strip() if title_shape is not None else ""
            first = _add(blocks, title or f"Slide {number}", heading_level=1)
            # Shape proxies are made anew on each access: compare ids, not objects.
            title_id = title_shape.shape_id if title_shape is not None else None
            others = [s for s in slide.shapes if s.shape_id != title_id]
            body = list(_shape_texts(others))
            if slide.has_notes_slide:
                body.append(slide.notes_slide.notes_text_frame.text)
            span = None
            for text in body:
                span = _add(blocks, text) or span
            if first is not None:
                slides.append(Region(first[0], (span or first)[1], str(number)))
    except Exception as exc:
        raise ConversionError(f"is not a readable PPTX file ({type(exc).__name__}: {exc})") from exc
    return blocks.converted("pptx", regions={"slide": tuple(slides)})


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def convert_xlsx(data: bytes, filename: str) -> Converted:
    openpyxl = OPENPYXL.load()
    workbook = _opened(
        lambda f: openpyxl.load_workbook(f, read_only=True, data_only=True), data, "XLSX"
    )
    blocks = Blocks()
    sheets: list[Region] = []
    try:
        for sheet in workbook.worksheets:
            rows = []
            for number, row in enumerate(sheet.iter_rows(values_only=True)):
                if number >= MAX_SHEET_ROWS:
                    break
                rows.append([_cell(v) for v in row])
            # A header row names the values: "name: Ada | year: 1843" reads better than
            # bare cells once a chunk no longer holds the first row.
            header = next((r for r in rows if any(r)), None)
            lines = []
            for row in rows:
                if row is header or not any(row):
                    continue
                pairs = [
                    f"{header[i]}: {v}" if i < len(header) and header[i] else v
                    for i, v in enumerate(row)
                    if v
                ]
                lines.append(" | ".join(pairs))
            if header is not None and not lines:
                lines.append(" | ".join(c for c in header if c))
            heading = _add(blocks, sheet.title, heading_level=1)
            span = _add(blocks, "\n".join(lines))
            if heading is not None:
                sheets.append(Region(heading[0], (span or heading)[1], sheet.title))
    except Exception as exc:
        raise ConversionError(f"is not a readable XLSX file ({type(exc).__name__}: {exc})") from exc
    finally:
        workbook.close()
    return blocks.converted("xlsx", regions={"sheet": tuple(sheets)})


DOCX_CONVERTER, PPTX_CONVERTER, XLSX_CONVERTER = (
    documents_converter(name, suffixes, convert, description, library)
    for name, suffixes, convert, description, library in [
        ("docx", (".docx",), convert_docx, "Word documents (python-docx): paragraphs and tables, headings as sections.", DOCX),
        ("pptx", (".pptx",), convert_pptx, "PowerPoint (python-pptx): slide text, tables and notes; slide numbers in hits.", PPTX),
        ("xlsx", (".xlsx", ".xlsm"), convert_xlsx, "Excel (openpyxl): rows with their header names; sheet names in hits.", OPENPYXL),
    ]
)  # fmt: skip
