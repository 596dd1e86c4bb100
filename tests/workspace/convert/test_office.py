"""The DOCX, PPTX and XLSX converters, on files their own libraries wrote."""

from __future__ import annotations

import pytest

from kairox.workspace.convert.base import ConversionError
from kairox.workspace.convert.office import convert_docx, convert_pptx, convert_xlsx
from kairox.workspace.convert.sections import chunk_converted

from .conftest import make_docx, make_pptx, make_xlsx


def test_docx_headings_become_heading_paths():
    converted = convert_docx(make_docx(), "manual.docx")
    assert converted.title == "Field manual"
    assert [s.label for s in converted.sections] == [
        "Installation",
        "Installation > Calibration",
        "Maintenance",
    ]
    assert "flange bolt | 40 Nm" in converted.text  # tables are kept, row by row
    chunks = chunk_converted(converted, max_tokens=20, overlap_tokens=0)
    oil = next(c for c in chunks if "Oil the hinges" in c.text)
    assert oil.metadata["heading"] == "Maintenance"
    needle = next(c for c in chunks if "needle" in c.text)
    assert needle.metadata["heading"] == "Installation > Calibration"


def test_pptx_slides_are_regions_with_their_titles():
    converted = convert_pptx(make_pptx(), "deck.pptx")
    assert converted.text == "Roadmap\n\nShip the harbour crane in May.\n\nRisks\n\nStorms."
    chunks = chunk_converted(converted, max_tokens=12, overlap_tokens=0)
    assert [(c.metadata["slide"], c.metadata["heading"]) for c in chunks] == [
        (1, "Roadmap"),
        (2, "Risks"),
    ]


def test_xlsx_rows_carry_their_header_and_sheet():
    converted = convert_xlsx(make_xlsx(), "stock.xlsx")
    assert "item: rope | count: 12" in converted.text
    assert [r.label for r in converted.regions["sheet"]] == ["Inventory", "Crew"]
    chunks = chunk_converted(converted, max_tokens=24, overlap_tokens=0)
    crew = next(c for c in chunks if "navigator" in c.text)
    assert crew.metadata["sheet"] == "Crew"


@pytest.mark.parametrize(
    ("convert", "data", "what"),
    [
        (convert_docx, make_docx()[:600], "DOCX"),
        (convert_pptx, make_pptx()[:-300], "PPTX"),
        (convert_xlsx, b"PK\x03\x04 not really a zip", "XLSX"),
    ],
)
def test_truncated_office_files_are_refused_with_the_reason(convert, data, what):
    with pytest.raises(ConversionError, match=f"is not a readable {what} file"):
        convert(data, "broken")
