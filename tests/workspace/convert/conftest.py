"""Documents made with each format's own library, for the converter tests."""

from __future__ import annotations

import io
import json
import zipfile

import pytest


def make_pdf(pages: list[list[str]], *, password: str | None = None) -> bytes:
    """A PDF with one page per item, each line drawn in Helvetica (pypdf alone)."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    for lines in pages:
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        shown = " T* ".join(f"({line}) Tj" for line in lines)
        stream = DecodedStreamObject()
        stream.set_data(f"BT /F1 12 Tf 14 TL 72 720 Td {shown} ET".encode("latin-1"))
        page.replace_contents(stream)
    if password is not None:
        writer.encrypt(password)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def make_docx() -> bytes:
    import docx

    document = docx.Document()
    document.core_properties.title = "Field manual"
    document.add_heading("Installation", level=1)
    document.add_paragraph("Unpack the crate and bolt the frame to the floor.")
    document.add_heading("Calibration", level=2)
    document.add_paragraph("Turn the dial until the needle rests on zero.")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "part"
    table.cell(0, 1).text = "torque"
    table.cell(1, 0).text = "flange bolt"
    table.cell(1, 1).text = "40 Nm"
    document.add_heading("Maintenance", level=1)
    document.add_paragraph("Oil the hinges every spring.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def make_pptx() -> bytes:
    import pptx

    presentation = pptx.Presentation()
    for title, body in [("Roadmap", "Ship the harbour crane in May."), ("Risks", "Storms.")]:
        slide = presentation.slides.add_slide(presentation.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()


def make_xlsx() -> bytes:
    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Inventory"
    sheet.append(["item", "count"])
    sheet.append(["anchor", 3])
    sheet.append(["rope", 12])
    other = workbook.create_sheet("Crew")
    other.append(["name", "role"])
    other.append(["Ada", "navigator"])
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def make_notebook() -> bytes:
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"language_info": {"name": "python"}},
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Tides\n", "Water rises."]},
            {
                "cell_type": "code",
                "metadata": {},
                "execution_count": 1,
                "source": ["height = 2.5\n", "print(height)"],
                "outputs": [{"output_type": "stream", "name": "stdout", "text": ["2.5\n"]}],
            },
            {"cell_type": "markdown", "metadata": {}, "source": "## Moon\nIt pulls."},
        ],
    }
    return json.dumps(notebook).encode()


HTML_PAGE = b"""<!doctype html>
<html><head><title>Harbour guide</title>
<style>body { color: red }</style>
<script>var tracking = "SECRET_SCRIPT";</script></head>
<body>
<header><a href="/">Home</a> <a href="/about">About us</a></header>
<nav><ul><li><a href="/a">Navigation link one</a></li><li>Menu two</li></ul></nav>
<main>
<h1>Mooring</h1>
<p>Tie the bow line <b>first</b>, then the stern.</p>
<h2>Knots</h2>
<ul><li>Bowline</li><li>Cleat hitch</li></ul>
<pre>def tie():
    return "knot"</pre>
<script>console.log("SECRET_INLINE")</script>
</main>
<aside>Sponsored: buy boats</aside>
<footer>Copyright footer text</footer>
</body></html>"""


def make_bomb(container: bytes, member: str, padding: int) -> bytes:
    """``container`` (a DOCX, PPTX or XLSX) with ``padding`` spaces inside ``member``
    before its closing tag: still valid XML, and it compresses about a thousandfold."""
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(container)) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bomb,
    ):
        for info in source.infolist():
            data = source.read(info)
            if info.filename == member:
                cut = data.rindex(b"</")
                data = data[:cut] + b" " * padding + data[cut:]
            bomb.writestr(info.filename, data)
    return out.getvalue()


@pytest.fixture
def write(tmp_path):
    """``write(name, data)`` puts a file in a temporary folder and returns its path."""

    def write(name: str, data: bytes):
        path = tmp_path / name
        path.write_bytes(data)
        return path

    return write
