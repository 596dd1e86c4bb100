"""Piped (not a terminal), ``kairox index`` and ``kb ingest`` print plain progress lines."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest


def test_piped_index_ends_with_a_plain_progress_line(kairox_process, workspace):
    (workspace / "notes.md").write_text("Rockets burn oxygen. Gardens need water.\n")
    (workspace / "kairox.toml").write_text(
        '[workspace]\nembedding_backend = "hashing"\nvectors = true\n'
    )
    result = kairox_process("index")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("indexing ")]
    assert lines, result.stderr
    last = lines[-1]
    # notes.md and kairox.toml: one chunk each, every planned chunk and file done
    assert re.search(r": 2/2 chunks(, (\d+)/\2 sentences)?, 2/2 files embedded", last), last
    assert "/s" in last and "\x1b[" not in result.stderr  # plain text, no terminal codes


def test_piped_kb_ingest_counts_documents(kairox_process, workspace):
    (workspace / "papers.jsonl").write_text(
        "".join(json.dumps({"id": f"p{i}", "text": f"paper {i}"}) + "\n" for i in range(3))
    )
    (workspace / "kairox.toml").write_text(
        '[knowledge_bases.papers]\nkind = "sqlite-fts"\npath = "papers.db"\n'
    )
    result = kairox_process("kb", "ingest", "papers", "papers.jsonl")
    assert result.returncode == 0, result.stderr
    assert "ingesting into papers: 3/3 documents ingested" in result.stderr


@pytest.mark.parametrize(
    ("every_s", "steps", "shown"),
    [
        (1e9, range(5), ["embedding: 0/4", "embedding: 4/4"]),  # only the start and the end
        (0, range(3), ["embedding: 0/2", "embedding: 1/2", "embedding: 2/2"]),  # each one
    ],
)
def test_plain_progress_lines_start_throttle_and_end_once(capsys, every_s, steps, shown):
    from kairox.cli import app

    total = int(shown[-1].rsplit("/", 1)[1])
    with app.progress_bars(every_s=every_s) as advance:
        for done in steps:
            advance("embedding", done, total)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" · ")[0] for line in lines] == shown


GATED_MODEL_PLUGIN = """
import os

from kairox import EmbeddingBackendSpec, hookimpl
from kairox.testing import ModelHoldingEmbedder


class GatedModel(ModelHoldingEmbedder):
    # Its load blocks on a FIFO until the test opens it: an export that takes as long
    # as the test wants, with no clock involved.
    loading_note = "preparing the model (one-time export)"

    def load(self):
        with open(os.environ["GATE_FIFO"], "rb") as gate:
            gate.read()
        with self._lock:
            self.loaded = True


@hookimpl
def kairox_register_embedding_backends(register):
    register(EmbeddingBackendSpec(name="gated", factory=lambda: GatedModel(dim=32)))
"""


def test_piped_index_shows_the_model_export_as_its_own_step(make_distribution, workspace, tmp_path):
    site = make_distribution("kairox-gated", "gated_model", GATED_MODEL_PLUGIN)
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    (workspace / "notes.md").write_text("Rockets burn oxygen. Gardens need water.\n")
    (workspace / "kairox.toml").write_text('[workspace]\nembedding_backend = "gated"\n')
    env = {
        **os.environ,
        "GATE_FIFO": str(gate),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
    }
    with subprocess.Popen(
        [sys.executable, "-m", "kairox", "index"],
        cwd=workspace,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stderr is not None
        before: list[str] = []
        released = False
        # The ticker's lines while the load is held: wait for the one naming the step
        # (or, were it missing, for the rate line that would stand in its place).
        for line in process.stderr:
            before.append(line)
            if "preparing the model (one-time export)..." in line:
                with open(gate, "wb"):
                    released = True  # the load reads to the end: it finishes
                break
            if "0.0/s" in line:
                break
        if not released:
            process.kill()
        rest = process.stderr.read()
        assert process.wait(timeout=120) == 0, "".join(before) + rest
    step = before[-1]
    # The files to read are counted before the model loads; their chunks once read.
    assert re.search(r"preparing the model \(one-time export\)\.\.\. · 0/2 files", step), step
    assert not any("0.0/s" in line for line in before), before
    assert re.search(r": 2/2 chunks(, \d+/\d+ sentences)?, 2/2 files embedded", rest), rest
