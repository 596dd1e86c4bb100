"""The sync API and both framework retrievers in a real Jupyter kernel (ipykernel via nbclient).

A kernel runs its cells inside a running event loop, where most LangChain and LlamaIndex
users start: the sync calls must answer there as they do in a script.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
from nbclient import NotebookClient

import kairox
from kairox.integrations.langchain import KairoxRetriever
from kairox.integrations.llama_index import KairoxLlamaRetriever

QUERY = "failed uploads retry"

CELLS = [
    # The premise: the cell's code runs with the kernel's event loop running.
    "import asyncio, json\nprint(json.dumps(asyncio.get_running_loop().is_running()))",
    "import kairox\nkx = kairox.open(WORKSPACE)\n"
    "print(json.dumps([h.id for h in kx.search(QUERY, k=3).hits]))",
    "print(json.dumps(kx.context('how do uploads retry?').openai_messages()[-1]))",
    "from kairox.integrations.langchain import KairoxRetriever\n"
    "print(json.dumps([d.id for d in KairoxRetriever(path=WORKSPACE, k=3).invoke(QUERY)]))",
    "from kairox.integrations.llama_index import KairoxLlamaRetriever\n"
    "print(json.dumps([n.node_id for n in KairoxLlamaRetriever(WORKSPACE, k=3).retrieve(QUERY)]))",
]


def run_notebook(workspace: Path) -> list[object]:
    """Execute :data:`CELLS` in a fresh ``python3`` kernel; each cell's printed JSON."""
    setup = f"WORKSPACE = {str(workspace)!r}\nQUERY = {QUERY!r}"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in [setup, *CELLS]]
    client = NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(workspace)}},
    )
    client.execute()  # a cell that raises fails here, with the kernel's traceback
    printed = []
    for cell in notebook.cells[1:]:
        (output,) = [o for o in cell.outputs if o.get("name") == "stdout"]
        printed.append(json.loads(output["text"]))
    return printed


def test_sync_calls_answer_in_a_jupyter_kernel(indexed_workspace: Path):
    loop_running, found, last_message, documents, nodes = run_notebook(indexed_workspace)
    assert loop_running is True
    # The same answers as a script gets outside any event loop.
    expected = [h.id for h in kairox.open(indexed_workspace).search(QUERY, k=3).hits]
    assert found == expected and Path(expected[0].split("#")[0]).name == "uploads.md"
    assert last_message == {"role": "user", "content": "how do uploads retry?"}
    assert documents == [
        d.id for d in KairoxRetriever(path=str(indexed_workspace), k=3).invoke(QUERY)
    ]
    assert nodes == [
        n.node_id for n in KairoxLlamaRetriever(str(indexed_workspace), k=3).retrieve(QUERY)
    ]
    assert documents == nodes == expected
