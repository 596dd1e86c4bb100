"""The notebook converter: cells as regions, Markdown headings as sections."""

from __future__ import annotations

import json

import pytest

from kairox.workspace.convert.base import ConversionError
from kairox.workspace.convert.notebook import convert_notebook

from .conftest import make_notebook


def test_cells_are_regions_and_code_is_fenced_with_its_output():
    converted = convert_notebook(make_notebook(), "tides.ipynb")
    text = converted.text
    assert "```python\nheight = 2.5\nprint(height)\n```\n\nOutput:\n2.5" in text
    assert [r.label for r in converted.regions["cell"]] == ["1", "2", "3"]
    assert [s.label for s in converted.sections] == ["Tides", "Tides > Moon"]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"cells": [', "not valid JSON"),
        (json.dumps([1, 2]).encode(), "not an object"),
        (json.dumps({"cells": "nope"}).encode(), "'cells' is not a list"),
    ],
)
def test_broken_notebooks_are_refused(data, reason):
    with pytest.raises(ConversionError, match=reason):
        convert_notebook(data, "broken.ipynb")
