"""Fixtures for workspace-index tests: small workspaces, a counting embedder, an index."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kairox.testing import CountingEmbedder
from kairox.workspace.rag_index import WorkspaceRagIndex

FILES = {
    "README.md": "# Rocket\nThe rocket engine burns liquid oxygen and kerosene.\n",
    "src/orbit.py": "def orbital_period(radius):\n    '''Kepler: period grows with radius.'''\n",
    "src/fuel.py": "KEROSENE_DENSITY = 0.81  # grams per cubic centimetre\n",
    "notes/garden.txt": "Tomatoes need sun, water and patience in the garden.\n",
    "build/output.txt": "generated artefact that is ignored\n",
    ".gitignore": "build/\n",
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    for relpath, text in FILES.items():
        path = root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64))
    return root


@pytest.fixture
def two_file_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[int], Path]:
    """Index two files a batch; gives a maker of a folder of ``n`` one-line notes
    (``f0.txt``...), each one chunk."""
    monkeypatch.setattr("kairox.workspace.rag_index.FILES_PER_BATCH", 2)

    def notes(n: int) -> Path:
        root = tmp_path / "batched"
        root.mkdir()
        for i in range(n):
            (root / f"f{i}.txt").write_text(f"Note {i} on harbour storms and provisions.\n")
        return root

    return notes


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def database(tmp_path: Path) -> Path:
    return tmp_path / "state" / "kairox.db"


@pytest.fixture
def index(database, project, embedder):
    made = WorkspaceRagIndex(database, project, embedder, chunk_tokens=32, chunk_overlap=4)
    yield made
    made.close()


SMALL_CHUNKS = {"chunk_tokens": 32, "chunk_overlap": 4}


ESSAY = (
    "The expedition left the harbour before dawn under a grey sky. "
    "Provisions were counted twice by the quartermaster and the cook. "
    "Nobody expected the storm that came in from the west that evening. "
    "Quantum flux capacitors need careful calibration before every launch. "
    "By morning the crew had repaired the mast and the sails once more."
)


@pytest.fixture
def essay_project(tmp_path):
    root = tmp_path / "essay"
    root.mkdir()
    (root / "voyage.txt").write_text(ESSAY)
    (root / "flux.txt").write_text("Quantum flux physics of capacitors in a laboratory.")
    return root


@pytest.fixture
def essay_query(embedder):
    return embedder.embed(["calibration of flux capacitors before launch"])[0]
