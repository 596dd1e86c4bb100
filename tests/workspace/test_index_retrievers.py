"""The workspace index as sources (:mod:`kairox.workspace.index_retrievers`)."""

from __future__ import annotations

from kairox.retrieval import Query
from kairox.testing import run
from kairox.workspace.rag_index import WorkspaceDenseRetriever, WorkspaceLexicalRetriever


def test_retrievers_report_not_indexed_and_pass_the_protocol(index, embedder):
    dense = WorkspaceDenseRetriever(index)
    lexical = WorkspaceLexicalRetriever(index)
    assert "kairox index" in dense.unavailable_reason()
    index.index()
    assert dense.unavailable_reason() is None and lexical.unavailable_reason() is None
    vector = embedder.embed(["tomatoes garden"])[0]
    before = embedder.texts_embedded
    hits = run(dense.retrieve(Query("tomatoes garden", k=2, embeddings={embedder.name: vector})))
    assert embedder.texts_embedded == before  # used the vector it was handed
    assert hits[0].metadata["path"] == "notes/garden.txt"
    assert run(lexical.retrieve(Query("", k=2))) == []
