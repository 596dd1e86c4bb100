"""Jupyter notebooks: Markdown cells as they are, code cells fenced, text outputs kept
short; a ``cell`` region per cell and a section per Markdown heading.

Read as the JSON it is (nbformat 4; version 3's ``worksheets`` too), with no library.
"""

from __future__ import annotations

import json
from typing import Any

from kairox.workspace.convert.base import ConversionError, Converted, ConverterSpec
from kairox.workspace.convert.blocks import Blocks
from kairox.workspace.convert.markdown import markdown_sections

#: Characters of a cell's text output kept (a printed DataFrame is context; a log is not).
MAX_OUTPUT_CHARS = 2000


def _source(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def _outputs(cell: dict[str, Any]) -> str:
    texts = []
    for output in cell.get("outputs") or []:
        if not isinstance(output, dict):
            continue
        text = output.get("text")
        if text is None:
            text = (output.get("data") or {}).get("text/plain")
        if text:
            texts.append(_source(text))
    joined = "".join(texts).strip()
    return joined[:MAX_OUTPUT_CHARS]


def convert_notebook(data: bytes, filename: str) -> Converted:
    try:
        notebook = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConversionError(f"is not a notebook: not valid JSON ({exc})") from None
    if not isinstance(notebook, dict):
        raise ConversionError("is not a notebook: its JSON is not an object")
    cells = notebook.get("cells")
    if cells is None:  # nbformat 3
        cells = [c for sheet in notebook.get("worksheets") or [] for c in sheet.get("cells", [])]
    if not isinstance(cells, list):
        raise ConversionError("is not a notebook: 'cells' is not a list")
    language = ((notebook.get("metadata") or {}).get("language_info") or {}).get("name", "")
    blocks = Blocks()
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict):
            continue
        source = _source(cell.get("source", cell.get("input"))).strip("\n")
        if cell.get("cell_type") == "code":
            output = _outputs(cell)
            block = f"```{language}\n{source}\n```" if source.strip() else ""
            if output:
                block = f"{block}\n\nOutput:\n{output}".strip()
        else:
            block = source
        if block.strip():
            blocks.add(block, region=str(number))
    text = blocks.text
    return Converted(
        text=text,
        sections=markdown_sections(text),
        regions={"cell": tuple(blocks.regions)},
        format="notebook",
    )


NOTEBOOK = ConverterSpec(
    name="notebook",
    suffixes=(".ipynb",),
    convert=convert_notebook,
    description="Jupyter notebooks: Markdown and code cells, short text outputs.",
)
