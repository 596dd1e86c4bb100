"""Fixtures for the benchmark tests: tiny BEIR-layout datasets made by the test, a
workspace whose knowledge base holds the corpus, and the CLI with every installed plugin."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from kairox.cli import build_cli
from kairox.cli.app import AppContext
from kairox.plugins import build_plugin_manager
from kairox.testing import CORPUS, EXPECTED, CorpusDocument

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


def write_beir(
    root: Path,
    corpus: Iterable[CorpusDocument],
    queries: Iterable[tuple[str, str]],
    qrels: Iterable[tuple[str, str]],
) -> Path:
    """A BEIR-layout folder: the documents, the ``(id, text)`` queries, and the test split's
    ``(query id, relevant document id)`` judgments (grade 1)."""
    (root / "qrels").mkdir(parents=True)
    with (root / "corpus.jsonl").open("w") as handle:
        for doc in corpus:
            handle.write(json.dumps({"_id": doc.id, "title": doc.title, "text": doc.text}) + "\n")
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": qid, "text": text}) + "\n" for qid, text in queries)
    )
    rows = ["query-id\tcorpus-id\tscore"] + [f"{qid}\t{doc}\t1" for qid, doc in qrels]
    (root / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n")
    return root


@pytest.fixture
def dataset(tmp_path):
    judged = [(f"q{number}", text, doc) for number, (text, doc) in enumerate(EXPECTED)]
    queries = [(qid, text) for qid, text, _ in judged] + [("unjudged", "nothing")]
    qrels = [(qid, doc) for qid, _, doc in judged]
    return write_beir(tmp_path / "tiny-beir", CORPUS, queries, qrels)


@pytest.fixture
def tiny_beir(tmp_path: Path) -> Path:
    """24 judged queries (three phrasings of each EXPECTED query): enough to tune on."""
    judged = variants()
    queries = [(qid, text) for qid, text, _ in judged]
    qrels = [(qid, doc) for qid, _, doc in judged]
    return write_beir(tmp_path / "tiny-beir-24", CORPUS, queries, qrels)


@pytest.fixture
def pm():
    """The built-in plugins only (no entry points)."""
    return build_plugin_manager(entry_points=False)


def command_cli(command: click.Command, pm=None) -> click.Group:
    """A root group holding just ``command``, its app context on ``pm`` (default: a fresh
    plugin manager of the built-ins, made when the command runs)."""

    @click.group()
    @click.pass_context
    def root(ctx: click.Context) -> None:
        ctx.obj = AppContext(pm=pm if pm is not None else build_plugin_manager(entry_points=False))

    root.add_command(command)
    return root


@pytest.fixture(scope="module")
def plugin_manager():
    return build_plugin_manager()


@pytest.fixture
def invoke(plugin_manager) -> Callable[..., Result]:
    """``kairox ARGS`` in-process with the built-ins and every installed plugin, in the
    test's workspace."""

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
