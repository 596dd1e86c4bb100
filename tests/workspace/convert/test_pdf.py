"""The PDF converter: page regions, and refusals that say why."""

from __future__ import annotations

import pytest

from kairox.workspace.convert.base import ConversionError
from kairox.workspace.convert.pdf import convert_pdf
from kairox.workspace.convert.sections import chunk_converted

from .conftest import make_pdf


def test_two_pages_become_page_regions_and_chunks_name_their_page():
    data = make_pdf([["Anchors hold the ship."], ["Sails catch the wind."]])
    converted = convert_pdf(data, "guide.pdf")
    pages = converted.regions["page"]
    assert [converted.text[r.start : r.end] for r in pages] == [
        "Anchors hold the ship.",
        "Sails catch the wind.",
    ]
    assert [r.label for r in pages] == ["1", "2"]
    # Each page alone (tiny chunks): every chunk names the page it came from.
    chunks = chunk_converted(converted, max_tokens=8, overlap_tokens=0)
    assert [(c.text, c.metadata["page"]) for c in chunks] == [
        ("Anchors hold the ship.", 1),
        ("Sails catch the wind.", 2),
    ]
    # Both pages in one chunk: it says where it ends.
    [whole] = chunk_converted(converted, max_tokens=256)
    assert (whole.metadata["page"], whole.metadata["page_end"]) == (1, 2)
    assert "line_start" not in whole.metadata  # extracted lines are not the file's lines


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"%PDF-1.4\n1 0 obj garbage", "is not a readable PDF"),
        (make_pdf([["cut short"]])[:120], "is not a readable PDF"),
        (make_pdf([["secret"]], password="hunter2"), "encrypted with a password"),
        (make_pdf([[]]), "no text layer"),
    ],
)
def test_unreadable_pdfs_are_refused_with_the_reason(data, reason):
    with pytest.raises(ConversionError, match=reason):
        convert_pdf(data, "bad.pdf")
