"""Filters over workspace chunks: the conformance suite over a generated workspace (path,
ext, language, size, mtime), for both the dense and the lexical retriever."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.retrieval import Query
from kairox.testing import CorpusDocument, FilterConformance, run
from kairox.workspace.filtering import chunk_metadata, language_of
from kairox.workspace.rag_index import (
    WorkspaceDenseRetriever,
    WorkspaceLexicalRetriever,
    WorkspaceRagIndex,
)

_EXTS = (".py", ".md", ".txt", ".rs", ".toml", "")
_DIRS = ("src", "docs", "src/deep", "tests", "notes")
# 2021-01-01T00:00:00Z plus whole days, so mtime strings are exact
_EPOCH = 1_609_459_200

WORKSPACE_CASES = (
    ("ext", {"ext": ".py"}),
    ("ext-in", {"ext": {"$in": [".md", ".txt"]}}),
    ("no-ext", {"ext": ""}),
    ("language", {"language": "rust"}),
    ("language-not", {"$not": {"language": {"$in": ["python", "text"]}}}),
    ("path", {"path": "src/file007.py"}),
    ("path-nin", {"path": {"$nin": ["docs/file001.md", "src/file000"]}}),
    ("size-gt", {"size": {"$gt": 300}}),
    ("size-range", {"size": {"$gte": 150, "$lt": 250}}),
    ("mtime-after", {"mtime": {"$gte": "2021-02-01"}}),
    ("mtime-before", {"mtime": {"$lt": "2021-01-10T12:00:00Z"}}),
    ("text-form", "language = python and size <= 200 or ext = .toml"),
    ("exists", {"language": {"$exists": True}}),
    ("missing", {"topic": {"$exists": True}}),
    ("none", {"ext": ".java"}),
)


def _file(i: int) -> tuple[str, str, int]:
    """File ``i``: its path, its text and its mtime (seconds)."""
    relpath = f"{_DIRS[i % 5]}/file{i:03d}{_EXTS[i % 6]}"
    return (
        relpath,
        f"this passage number {i} " + "filler " * (i * 3 % 60) + "\n",
        _EPOCH + i * 86_400,
    )


# What the files' chunks must carry, derived from the files as written, not from the index.
DOCS = tuple(
    CorpusDocument(path, "", "", chunk_metadata(path, len(text.encode()), stamp * 10**9))
    for path, text, stamp in map(_file, range(60))
)


def _write(root: Path) -> None:
    for i in range(60):
        relpath, text, stamp = _file(i)
        path = root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.utime(path, (stamp, stamp))


@pytest.fixture(scope="module")
def workspace_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("ws") / "project"
    _write(root)
    index = WorkspaceRagIndex(root.parent / "kairox.db", root, HashingEmbedder())
    index.index()
    yield index
    index.close()


class _WorkspaceFilters(FilterConformance):
    filter_cases = WORKSPACE_CASES
    filter_documents = DOCS
    filter_query = "this passage number"
    retriever = WorkspaceLexicalRetriever

    def filter_hit_id(self, hit):
        return hit.metadata["path"]

    @pytest.fixture
    def filter_source(self, workspace_index):
        return self.retriever(workspace_index)


class TestLexicalFilters(_WorkspaceFilters):
    retriever = WorkspaceLexicalRetriever


class TestDenseFilters(_WorkspaceFilters):
    retriever = WorkspaceDenseRetriever


def test_hits_carry_the_filterable_metadata(workspace_index):
    index = workspace_index
    (hit,) = run(
        WorkspaceLexicalRetriever(index).retrieve(
            Query("passage", k=1, filters={"path": "src/file005"})
        )
    )
    expected = {d.id: d.metadata for d in DOCS}["src/file005"]
    assert {k: hit.metadata[k] for k in expected} == expected
    assert expected["language"] == "text" and expected["mtime"] == "2021-01-06T00:00:00Z"


def test_language_comes_from_the_extension():
    assert language_of("a/b.PY") == "python"
    assert language_of("Makefile") == "text"
