"""``KairoxRetriever`` against langchain-core: its standard retriever tests, then provenance."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests

from kairox.integrations.langchain import KairoxRetriever


class TestKairoxRetrieverStandard(RetrieversIntegrationTests):
    """langchain-core's own expectations of a retriever, run unchanged."""

    pytestmark = pytest.mark.anyio

    @pytest.fixture(autouse=True)
    def _workspace(self, indexed_workspace: Path) -> None:
        self.workspace = indexed_workspace

    @property
    def retriever_constructor(self) -> type[KairoxRetriever]:
        return KairoxRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"path": str(self.workspace), "k": 2}

    @property
    def retriever_query_example(self) -> str:
        return "failed uploads retry"


def test_documents_carry_provenance(indexed_workspace: Path):
    docs = KairoxRetriever(path=str(indexed_workspace), k=2).invoke("failed uploads retry")
    assert all(isinstance(doc, Document) for doc in docs)
    best = docs[0]
    assert Path(best.metadata["uri"]).name == "uploads.md"
    assert best.metadata["path"] == "uploads.md"
    assert {s["source"] for s in best.metadata["sources"]} == {"workspace", "workspace-fts"}
    assert best.metadata["sources"][0]["rank"] == 1
    assert best.id == best.metadata["id"]
    assert "exponential backoff" in best.page_content
    assert docs[0].metadata["score"] >= docs[1].metadata["score"]


def test_async_matches_sync(indexed_workspace: Path):
    retriever = KairoxRetriever(path=str(indexed_workspace), k=3)
    sync_ids = [d.id for d in retriever.invoke("canteen noon")]
    async_ids = [d.id for d in asyncio.run(retriever.ainvoke("canteen noon"))]
    assert sync_ids == async_ids and sync_ids[0].startswith("lunch.md")


def test_filters_apply(indexed_workspace: Path):
    retriever = KairoxRetriever(path=str(indexed_workspace), k=4, filters={"path": "queue.md"})
    docs = retriever.invoke("retries")
    assert {d.metadata["path"] for d in docs} == {"queue.md"}
    assert {d.metadata["path"] for d in retriever.invoke("retries", filters=None)} > {"queue.md"}


def test_by_file_gives_one_document_per_file(indexed_workspace: Path):
    retriever = KairoxRetriever(path=str(indexed_workspace), k=3, by_file=True)
    documents = retriever.invoke("failed uploads retry")
    paths = [d.metadata["path"] for d in documents]
    assert len(paths) == len(set(paths)) == 3
    assert all("file_chunks" in d.metadata for d in documents)
