"""The HTML converter: main content only, headings as sections."""

from __future__ import annotations

import pytest

from kairox.workspace.convert.base import ConversionError
from kairox.workspace.convert.html import convert_html

from .conftest import HTML_PAGE


def test_main_content_without_scripts_navigation_or_chrome():
    converted = convert_html(HTML_PAGE, "guide.html")
    text = converted.text
    assert converted.title == "Harbour guide"
    assert "Tie the bow line first, then the stern." in text
    assert "Cleat hitch" in text
    assert 'def tie():\n    return "knot"' in text  # <pre> keeps its lines and indentation
    for junk in ("SECRET", "Navigation link", "About us", "Sponsored", "Copyright", "color"):
        assert junk not in text, junk
    assert [s.label for s in converted.sections] == ["Mooring", "Mooring > Knots"]
    knots = converted.sections[1]
    assert text[knots.start : knots.end].startswith("Knots")


def test_a_page_without_main_uses_the_body():
    page = b"<html><body><nav>menu</nav><h2>Only</h2><p>Body text.</p></body></html>"
    assert convert_html(page, "p.html").text == "Only\n\nBody text."


def test_binary_data_is_refused():
    with pytest.raises(ConversionError, match="binary data"):
        convert_html(b"\x89PNG\r\n\x1a\n\x00\x00\x00", "image.html")
