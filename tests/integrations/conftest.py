"""An indexed workspace for the framework retrievers."""

from __future__ import annotations

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
    kairox.open(workspace).index()
    return workspace
