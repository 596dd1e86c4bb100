"""Shared fixtures: a source built the way Kairox builds it, and a filled index.

Helpers are fixtures (not imports from this file) so the tests run under any pytest
import mode, including the repository root's ``--import-mode=importlib``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import kairox_tantivy
import pytest

from kairox.retrieval import Document
from kairox.testing import CORPUS, build_source

MakeSource = Callable[..., kairox_tantivy.TantivySource]


def _build(
    base_dir: Path, index_dir: str = "index", kb_id: str = "papers", **options
) -> kairox_tantivy.TantivySource:
    return build_source(
        kairox_tantivy, "tantivy", kb_id, base_dir=base_dir, index_dir=index_dir, **options
    )


@pytest.fixture(scope="session")
def make_source() -> MakeSource:
    """``make_source(base_dir, index_dir="index", kb_id="papers", **options)``: a source
    built through the registered kind (config model, then factory), as Kairox does."""
    return _build


@pytest.fixture(scope="session")
def corpus_docs() -> list[Document]:
    """Every ``kairox.testing.CORPUS`` document as a :class:`kairox.retrieval.Document`."""
    return [Document(d.id, d.text, title=d.title, uri=d.uri, metadata=d.metadata) for d in CORPUS]


@pytest.fixture
def filled(tmp_path: Path, corpus_docs) -> kairox_tantivy.TantivyIndex:
    """``tmp_path / "index"`` holding every CORPUS document."""
    index = kairox_tantivy.TantivyIndex(tmp_path / "index", create=True)
    index.upsert(corpus_docs)
    return index
