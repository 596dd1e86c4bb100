"""The Markdown converter: heading paths from a real parser, lines kept."""

from __future__ import annotations

from kairox.workspace.convert.markdown import convert_markdown
from kairox.workspace.convert.sections import chunk_converted

DOC = """# Guide

Intro words.

## Install

```bash
# not a heading: a shell comment
pip install thing
```

Setext heading
--------------

### Deep

Deep words.
"""


def test_heading_paths_ignore_code_fences_and_know_setext():
    converted = convert_markdown(DOC.encode(), "guide.md")
    assert [s.label for s in converted.sections] == [
        "Guide",
        "Guide > Install",
        "Guide > Setext heading",
        "Guide > Setext heading > Deep",
    ]


def test_chunks_start_at_headings_and_give_file_lines():
    converted = convert_markdown(DOC.encode(), "guide.md")
    # Small enough that the last two sections are not joined into one chunk.
    chunks = chunk_converted(converted, max_tokens=8, overlap_tokens=0)
    deep = next(c for c in chunks if "Deep words" in c.text)
    assert deep.text.startswith("### Deep")
    assert deep.metadata["heading"] == "Guide > Setext heading > Deep"
    merged = chunk_converted(converted, max_tokens=20, overlap_tokens=0)
    # With room to spare, neighbouring sections share a chunk named by its first heading.
    assert any(c.text.startswith("Setext heading") and "Deep words" in c.text for c in merged)
    lines = DOC.splitlines()
    first, last = deep.metadata["line_start"], deep.metadata["line_end"]
    assert lines[first - 1] == "### Deep" and lines[last - 1] == "Deep words."
    for chunk in chunks:
        assert chunk.token_count <= 8
        assert converted.text[chunk.start : chunk.end] == chunk.text
