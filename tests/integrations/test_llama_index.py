"""``KairoxLlamaRetriever`` against llama-index-core: retrieve, aretrieve, a query engine."""

from __future__ import annotations

import asyncio
from pathlib import Path

from llama_index.core import get_response_synthesizer
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from kairox.integrations.llama_index import KairoxLlamaRetriever


def test_retrieve_returns_scored_nodes_with_provenance(indexed_workspace: Path):
    nodes = KairoxLlamaRetriever(str(indexed_workspace), k=3).retrieve("failed uploads retry")
    assert len(nodes) == 3 and all(isinstance(n, NodeWithScore) for n in nodes)
    assert [n.score for n in nodes] == sorted((n.score for n in nodes), reverse=True)
    best = nodes[0].node
    assert Path(best.metadata["uri"]).name == "uploads.md"
    assert {s["source"] for s in best.metadata["sources"]} == {"workspace", "workspace-fts"}
    assert best.node_id == best.metadata["id"]
    # Provenance stays out of what an LLM is shown; the source's own keys stay in.
    shown = best.get_content(metadata_mode=MetadataMode.LLM)
    assert "path: uploads.md" in shown and "workspace-fts" not in shown


def test_aretrieve_matches_retrieve_and_k_applies(indexed_workspace: Path):
    retriever = KairoxLlamaRetriever(str(indexed_workspace), k=1)
    sync_nodes = retriever.retrieve(QueryBundle("canteen noon"))
    async_nodes = asyncio.run(retriever.aretrieve("canteen noon"))
    assert [n.node_id for n in sync_nodes] == [n.node_id for n in async_nodes]
    assert len(sync_nodes) == 1 and sync_nodes[0].node.metadata["path"] == "lunch.md"


def test_works_in_a_query_engine(indexed_workspace: Path):
    """LlamaIndex's own pipeline takes it as any retriever (a mock LLM: nothing leaves)."""
    llm = MockLLM(max_tokens=8)
    engine = RetrieverQueryEngine(
        retriever=KairoxLlamaRetriever(str(indexed_workspace), k=2),
        response_synthesizer=get_response_synthesizer(llm=llm, response_mode="compact"),
    )
    response = engine.query("how do failed uploads retry?")
    assert response.source_nodes[0].node.metadata["path"] == "uploads.md"
    assert str(response)


def test_by_file_gives_one_node_per_file(indexed_workspace: Path):
    retriever = KairoxLlamaRetriever(str(indexed_workspace), k=3, by_file=True)
    nodes = retriever.retrieve("failed uploads retry")
    paths = [n.node.metadata["path"] for n in nodes]
    assert len(paths) == len(set(paths)) == 3
    assert all("file_chunks" in n.node.metadata for n in nodes)
