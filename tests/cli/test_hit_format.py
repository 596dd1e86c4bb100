"""Where a hit lies as people open it: lines for files, pages for documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from kairox.cli.hit_format import location
from kairox.retrieval import FusedHit
from kairox.retrieval.model import Provenance


def _hit(**metadata) -> FusedHit:
    return FusedHit(
        id="x#0",
        text="t",
        score=1.0,
        uri="/w/docs/a.pdf",
        metadata=metadata,
        sources=(Provenance("workspace", 1, 1.0),),
    )


@pytest.mark.parametrize(
    ("metadata", "shown"),
    [
        ({"path": "src/a.py", "line_start": 12, "line_end": 40}, "src/a.py:12-40"),
        ({"path": "src/a.py", "line_start": 7, "line_end": 7}, "src/a.py:7"),
        ({"path": "docs/a.pdf", "page": 3}, "docs/a.pdf:p3"),
        ({"path": "docs/a.pdf", "page": 3, "page_end": 5}, "docs/a.pdf:p3-5"),
        ({"page": 2}, "docs/a.pdf:p2"),  # no path: the uri, relative to the root
        ({}, "docs/a.pdf"),
    ],
)
def test_location_names_lines_or_pages(metadata, shown):
    assert location(_hit(**metadata), Path("/w")) == shown
