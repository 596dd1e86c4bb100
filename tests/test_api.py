"""The Python API: ``kairox.open()``, its verbs and their async twins, and the documented example."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest

import kairox
from kairox.api import KairoxApiError
from kairox.facade import AppFacade

DOC = Path(__file__).resolve().parents[1] / "docs" / "python-api.md"


@pytest.fixture
def notes(workspace: Path) -> Path:
    (workspace / "notes.md").write_text("# Uploads\n\nFailed uploads retry with backoff.\n")
    (workspace / "other.md").write_text("# Lunch\n\nThe canteen opens at noon.\n")
    return workspace


def test_open_index_search_context(notes: Path):
    kx = kairox.open(notes)
    stats = kx.index()
    assert stats.added == 2
    result = kx.search("failed uploads retry", k=1)
    assert [Path(hit.uri).name for hit in result.hits] == ["notes.md"]
    assert {str(r.status) for r in result.reports} == {"ok"}
    assembly = kx.context("how do uploads retry?")
    messages = assembly.openai_messages()
    assert messages[-1] == {"role": "user", "content": "how do uploads retry?"}
    assert "retry with backoff" in messages[0]["content"]
    assert assembly.used_tokens <= assembly.budget


def test_async_twins_give_the_same_answers(notes: Path):
    kx = kairox.open(notes)

    async def run():
        await kx.aindex()
        found = await kx.asearch("canteen noon", k=1)
        assembly = await kx.acontext("when does the canteen open?")
        # The sync call inside a running loop says what to call instead.
        with pytest.raises(KairoxApiError, match="acontext"):
            kx.context("x")
        with pytest.raises(KairoxApiError, match="asearch"):
            kx.search("x")
        return found, assembly

    found, assembly = asyncio.run(run())
    assert Path(found.hits[0].uri).name == "other.md"
    assert [h.id for h in found.hits] == [h.id for h in kx.search("canteen noon", k=1).hits]
    assert "canteen" in assembly.messages[0].content


def test_propose_memory_goes_through_approval(notes: Path):
    kx = kairox.open(notes)
    pending = kx.propose_memory("user", "Prefers tabs.", key="indent")
    assert pending.status == "pending"
    assert pending.record.provenance["via"] == "api"
    assert kx.memories() == []
    assert [r.id for r in kx.memories(pending=True)] == [pending.record.id]
    AppFacade(cwd=notes).memory.approve(pending.record.id)  # as the TUI or CLI would
    assert [(r.key, r.body) for r in kx.memories("user")] == [("indent", "Prefers tabs.")]

    kept = kx.propose_memory("session", "Debugging the upload path.")
    assert kept.status == "accepted"
    assert [r.body for r in kx.memories("session")] == ["Debugging the upload path."]
    assert "Debugging the upload path." in kx.context("what am I doing?").messages[0].content

    rejected = kx.propose_memory("galaxy", "x", key="a")
    assert rejected.status == "rejected" and "unknown scope" in rejected.reason
    with pytest.raises(KairoxApiError, match="unknown scope"):
        kx.memories("galaxy")


def test_bad_path_and_profile_fail_at_open(notes: Path):
    with pytest.raises(KairoxApiError, match="not a folder"):
        kairox.open(notes / "missing")
    with pytest.raises(Exception, match="did you mean 'default'"):
        kairox.open(notes, profile="defualt")


def test_the_documented_example_runs(notes: Path):
    """docs/python-api.md's first example, run as a user would paste it."""
    example = re.search(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL).group(1)
    result = subprocess.run(
        [sys.executable, "-c", example], cwd=notes, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(str(notes / "notes.md"))
    assert "'workspace': 'ok'" in result.stdout
    assert re.fullmatch(r"pending \d+", lines[-1])


def test_close_lets_go_and_the_next_call_reopens(notes: Path):
    with kairox.open(notes) as kx:
        kx.index()
        first = [h.id for h in kx.search("canteen", k=1).hits]
    assert [h.id for h in kx.search("canteen", k=1).hits] == first
    kx.close()


@pytest.fixture
def long_notes(workspace: Path) -> Path:
    """One file cut into many small chunks that all match, and two short ones."""
    (workspace / "kairox.toml").write_text("[workspace]\nchunk_tokens = 16\nchunk_overlap = 0\n")
    retry = "\n\n".join(f"Upload retry rule {n}: failed uploads retry again." for n in range(12))
    (workspace / "retry.md").write_text(retry + "\n")
    (workspace / "queue.md").write_text("A failed upload goes back on the queue.\n")
    (workspace / "lunch.md").write_text("The canteen opens at noon.\n")
    return workspace


def test_search_by_file_gives_one_hit_per_file(long_notes: Path):
    kx = kairox.open(long_notes)
    kx.index()
    chunks = kx.search("failed uploads retry", k=5).hits
    assert [Path(h.uri).name for h in chunks].count("retry.md") > 1
    files = kx.search("failed uploads retry", k=5, by_file=True).hits
    names = [Path(h.uri).name for h in files]
    assert len(names) == len(set(names)) and names[:2] == ["retry.md", "queue.md"]
    assert files[0].metadata["file_chunks"] > 1
    first, last = files[0].metadata["file_lines"]
    assert first <= files[0].metadata["line_start"] <= files[0].metadata["line_end"] <= last
