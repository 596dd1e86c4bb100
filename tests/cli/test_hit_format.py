"""Where a hit lies as people open it: lines for files, pages for documents."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kairox.cli.hit_format import location, numbered_lines
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


def test_numbered_lines_start_at_the_first_query_word_with_file_line_numbers():
    text = "\n".join(["import os", "", "def load():", "    return os.environ", "", "", "x = 1"])
    hit = dataclasses.replace(_hit(path="a.py", line_start=10, line_end=16), text=text)
    shown = numbered_lines(hit, "environ load", lines=3)
    assert shown == ["11 │", "12 │ def load():", "13 │     return os.environ"]
    # Without line numbers (a converted document) the lines come bare.
    bare = dataclasses.replace(_hit(), text="first\nsecond\n")
    assert numbered_lines(bare, "second") == ["first", "second"]
