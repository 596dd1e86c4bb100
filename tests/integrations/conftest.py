"""An indexed workspace for the framework retrievers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kairox

DOCS = {
    "uploads.md": "# Uploads\n\nFailed uploads retry three times with exponential backoff.\n",
    "retries.md": "# Retries\n\nEvery network call retries on 429 and 503 answers.\n",
    "queue.md": "# Queue\n\nA failed job goes back on the queue and retries later.\n",
    "lunch.md": "# Lunch\n\nThe canteen opens at noon on weekdays.\n",
}


@pytest.fixture
def indexed_workspace(workspace: Path) -> Path:
    for name, text in DOCS.items():
        (workspace / name).write_text(text)
    # Vectors on: the hits carry the provenance of both workspace sources.
    (workspace / "kairox.toml").write_text("[workspace]\nvectors = true\n")
    kairox.open(workspace).index()
    return workspace


ENGINES = " ".join(
    f"Rocket engine note {i}: turbopumps feed the nozzles and uploads of telemetry retry."
    for i in range(20)
)
PAPERS = [
    # Long enough to be chunked: each chunk names its document (document_id).
    {"id": "engines", "text": ENGINES, "metadata": {"year": 2021, "tags": ["rockets", "gpu"]}},
    {
        "id": "orbits",
        "text": "Orbits of rockets decay; retry the burn.",
        "metadata": {"year": 2018},
    },
    {
        "id": "menus",
        "text": "The canteen menu lists noodles and soup for rocket scientists.",
        "metadata": {"year": 2024, "tags": ["food"], "lang": "de"},
    },
]


@pytest.fixture
def papers_workspace(indexed_workspace: Path) -> Path:
    """The indexed workspace plus a knowledge base of typed metadata (year, tags, lang)."""
    (indexed_workspace / "kairox.toml").write_text(
        '[knowledge_bases.papers]\nkind = "sqlite-fts"\npath = "papers.db"\n'
        "chunk_tokens = 32\nchunk_overlap = 0\n"
    )
    records = indexed_workspace / "papers.jsonl"
    records.write_text("".join(json.dumps(record) + "\n" for record in PAPERS))
    with kairox.open(indexed_workspace) as kx:
        kx.facade.ingest("papers", [records])
    records.unlink()
    return indexed_workspace
