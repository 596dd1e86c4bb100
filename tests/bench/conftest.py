"""Fixtures for the benchmark tests: tiny BEIR-layout datasets made by the test, a
workspace whose knowledge base holds the corpus, and the CLI with every installed plugin."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kairox.cli import build_cli
from kairox.plugins import build_plugin_manager
from kairox.testing import CORPUS, EXPECTED

KB_TOML = """# the benchmark's workspace: comments must survive `bench tune --write`
[knowledge_bases.papers]
kind = "sqlite-fts"
path = "papers.db"   # the corpus
timeout_ms = 60000

[workspace]
disabled_retrievers = ["workspace", "workspace-fts"]
"""


def variants() -> list[tuple[str, str, str]]:
    """(query id, text, relevant id): three phrasings of each EXPECTED query (24)."""
    found = []
    for number, (text, doc) in enumerate(EXPECTED):
        words = text.split()
        for n, phrasing in enumerate([text, " ".join(reversed(words)), " ".join(words[:2])]):
            found.append((f"q{number}-{n}", phrasing, doc))
    return found


@pytest.fixture
def dataset(tmp_path):
    root = tmp_path / "tiny-beir"
    (root / "qrels").mkdir(parents=True)
    with (root / "corpus.jsonl").open("w") as handle:
        for doc in CORPUS:
            handle.write(json.dumps({"_id": doc.id, "title": doc.title, "text": doc.text}) + "\n")
    with (root / "queries.jsonl").open("w") as handle:
        for number, (text, _) in enumerate(EXPECTED):
            handle.write(json.dumps({"_id": f"q{number}", "text": text}) + "\n")
        handle.write(json.dumps({"_id": "unjudged", "text": "nothing"}) + "\n")
    rows = ["query-id\tcorpus-id\tscore"] + [
        f"q{number}\t{expected}\t1" for number, (_, expected) in enumerate(EXPECTED)
    ]
    (root / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n")
    return root


@pytest.fixture
def tiny_beir(tmp_path: Path) -> Path:
    """24 judged queries (three phrasings of each EXPECTED query): enough to tune on."""
    root = tmp_path / "tiny-beir-24"
    (root / "qrels").mkdir(parents=True)
    with (root / "corpus.jsonl").open("w") as handle:
        for doc in CORPUS:
            handle.write(json.dumps({"_id": doc.id, "title": doc.title, "text": doc.text}) + "\n")
    queries = variants()
    with (root / "queries.jsonl").open("w") as handle:
        for qid, text, _ in queries:
            handle.write(json.dumps({"_id": qid, "text": text}) + "\n")
    rows = ["query-id\tcorpus-id\tscore"] + [f"{qid}\t{doc}\t1" for qid, _, doc in queries]
    (root / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n")
    return root


@pytest.fixture(scope="module")
def plugin_manager():
    return build_plugin_manager()


@pytest.fixture
def invoke(plugin_manager) -> Callable[..., Result]:
    """``kairox ARGS`` in-process, in the test's workspace."""

    def run(*args: str) -> Result:
        return CliRunner().invoke(build_cli(plugin_manager), [str(a) for a in args])

    return run


def corpus_jsonl(path: Path, *, id_prefix: str = "") -> Path:
    with path.open("w") as handle:
        for doc in CORPUS:
            record = {"id": id_prefix + doc.id, "title": doc.title, "text": doc.text}
            handle.write(json.dumps(record) + "\n")
    return path


@pytest.fixture
def kb_workspace(workspace: Path, invoke) -> Path:
    """A workspace with knowledge base ``papers`` (sqlite-fts) holding the corpus."""
    (workspace / "kairox.toml").write_text(KB_TOML)
    result = invoke("kb", "ingest", "papers", corpus_jsonl(workspace / "corpus.jsonl"))
    assert result.exit_code == 0, result.output
    return workspace
