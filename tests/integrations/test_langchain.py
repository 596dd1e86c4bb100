"""``KairoxRetriever`` against langchain-core: its standard retriever tests, then provenance."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests
from pydantic import ValidationError

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


@pytest.mark.parametrize(
    "configured",
    [
        {"filters": "path = queue.md"},  # the text form, as per call
        {"filters": '{"path": {"$in": ["queue.md"]}}'},  # JSON text
        {"filter": {"path": "queue.md"}},  # LangChain's name
        {"search_kwargs": {"k": 4, "filter": "path = queue.md"}},  # as_retriever's spelling
        {"search_kwargs": {"filters": {"path": "queue.md"}}, "k": 4},
    ],
)
def test_filters_are_configured_as_langchain_retrievers_are(indexed_workspace: Path, configured):
    retriever = KairoxRetriever(path=str(indexed_workspace), **{"k": 4, **configured})
    assert retriever.k == 4
    assert {d.metadata["path"] for d in retriever.invoke("retries")} == {"queue.md"}


def test_filters_per_call_take_every_form_and_name(indexed_workspace: Path):
    retriever = KairoxRetriever(path=str(indexed_workspace), k=4)
    for given in (
        {"filter": "path in (queue.md, lunch.md)"},
        {"filters": {"path": {"$in": ["queue.md", "lunch.md"]}}},
    ):
        found = {d.metadata["path"] for d in retriever.invoke("retries canteen", **given)}
        assert found == {"queue.md", "lunch.md"}


@pytest.mark.parametrize(
    ("configured", "error", "says"),
    [
        ({"search_kwargs": {"k": 2, "fetch_k": 20}}, TypeError, "search_kwargs['fetch_k']"),
        ({"search_kwargs": {"k": 2}, "k": 3}, ValidationError, "disagree"),
        ({"search_kwargs": ["k", 2]}, ValidationError, "search_kwargs must be a dict"),
        ({"score_threshold": 0.5}, ValidationError, "Extra inputs are not permitted"),
        ({"filters": "year >>= 2020"}, ValidationError, "expected a value"),
        ({"filter": {"year": {"$like": 1}}}, ValidationError, "filter.year.$like"),
    ],
)
def test_unknown_or_bad_options_are_refused_never_ignored(
    indexed_workspace: Path, configured, error, says
):
    with pytest.raises(error) as refused:
        KairoxRetriever(path=str(indexed_workspace), **configured)
    assert says in str(refused.value)


def test_a_used_retriever_deep_copies(indexed_workspace: Path):
    retriever = KairoxRetriever(path=str(indexed_workspace), k=2, filters={"path": "queue.md"})
    before = retriever.invoke("retries")
    twin = copy.deepcopy(retriever)
    twin.filters["path"] = "lunch.md"  # the configuration is the copy's own
    assert [d.id for d in retriever.invoke("retries")] == [d.id for d in before]
    assert {d.metadata["path"] for d in twin.invoke("canteen")} == {"lunch.md"}
    assert twin._workspace() is retriever._workspace()  # the open workspace is shared


def test_by_file_gives_one_document_per_file(indexed_workspace: Path):
    retriever = KairoxRetriever(path=str(indexed_workspace), k=3, by_file=True)
    documents = retriever.invoke("failed uploads retry")
    paths = [d.metadata["path"] for d in documents]
    assert len(paths) == len(set(paths)) == 3
    assert all("file_chunks" in d.metadata for d in documents)
