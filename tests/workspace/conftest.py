"""Fixtures for workspace-index tests: a small workspace and a counting embedder."""

from __future__ import annotations

from pathlib import Path

import pytest

from kairox.testing import CountingEmbedder

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
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def database(tmp_path: Path) -> Path:
    return tmp_path / "state" / "kairox.db"
