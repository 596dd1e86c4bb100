"""``KairoxLlamaRetriever`` against llama-index-core: retrieve, aretrieve, a query engine,
nodes a vector store accepts, ``similarity_top_k`` and ``MetadataFilters``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from llama_index.core import VectorStoreIndex, get_response_synthesizer
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
from llama_index.core.vector_stores import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)
from llama_index.core.vector_stores.utils import node_to_metadata_dict

from kairox.integrations.llama_index import KairoxLlamaRetriever, kairox_filter
from kairox.retrieval.filters import FilterError

ROCKETS = "rocket engines retry"


def test_retrieve_returns_scored_nodes_with_provenance(indexed_workspace: Path):
    nodes = KairoxLlamaRetriever(str(indexed_workspace), k=3).retrieve("failed uploads retry")
    assert len(nodes) == 3 and all(isinstance(n, NodeWithScore) for n in nodes)
    assert [n.score for n in nodes] == sorted((n.score for n in nodes), reverse=True)
    best = nodes[0].node
    assert Path(best.metadata["uri"]).name == "uploads.md"
    sources = json.loads(best.metadata["sources"])  # flat: the provenance as JSON text
    assert {s["source"] for s in sources} == {"workspace", "workspace-fts"}
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


# -- nodes a vector store takes ----------------------------------------------------------


def test_nodes_name_their_document_and_carry_flat_metadata(papers_workspace: Path):
    found = KairoxLlamaRetriever(str(papers_workspace), similarity_top_k=30).retrieve(ROCKETS)
    nodes = [n.node for n in found]
    by_document: dict[str, list[str]] = {}
    for node in nodes:
        by_document.setdefault(node.ref_doc_id, []).append(node.node_id)
    # A knowledge-base chunk names its document; a workspace chunk its file.
    assert len(by_document["engines"]) > 1
    assert all(i.startswith("engines#") for i in by_document["engines"])
    assert by_document["uploads.md"] == ["uploads.md#0"]
    chunk = next(n for n in nodes if n.ref_doc_id == "engines")
    # What vector stores that need flat metadata check (Chroma, Pinecone... call this).
    flat = node_to_metadata_dict(chunk, flat_metadata=True)
    assert flat["year"] == 2021 and json.loads(chunk.metadata["tags"]) == ["rockets", "gpu"]
    assert {s["source"] for s in json.loads(chunk.metadata["sources"])} == {"papers"}
    assert all(isinstance(v, str | int | float) for v in chunk.metadata.values())

    # Inserted into LlamaIndex's own vector store index, deleted again by document.
    index = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))
    assert {"engines", "orbits", "uploads.md"} <= set(index.ref_doc_info)
    index.delete_ref_doc("engines")
    left = index.as_retriever(similarity_top_k=50).retrieve(ROCKETS)
    assert left and all(n.node.ref_doc_id != "engines" for n in left)


def test_similarity_top_k_in_the_constructor_per_query_and_as_an_attribute(
    papers_workspace: Path,
):
    retriever = KairoxLlamaRetriever(str(papers_workspace), similarity_top_k=3)
    assert len(retriever.retrieve(ROCKETS)) == 3
    assert len(retriever.retrieve(ROCKETS, similarity_top_k=1)) == 1
    assert len(asyncio.run(retriever.aretrieve(ROCKETS, k=2))) == 2
    assert len(retriever.retrieve(ROCKETS)) == 3  # a per-query k is for that query only
    retriever.similarity_top_k = 5
    assert len(retriever.retrieve(ROCKETS)) == 5 and retriever.k == 5
    with pytest.raises(ValueError, match="disagree"):
        KairoxLlamaRetriever(str(papers_workspace), k=2, similarity_top_k=3)
    with pytest.raises(ValueError, match="at least 1"):
        retriever.retrieve(ROCKETS, similarity_top_k=0)
    with pytest.raises(TypeError, match="unexpected option fetch_k"):
        retriever.retrieve(ROCKETS, fetch_k=9)


# -- MetadataFilters ----------------------------------------------------------------------


def _filters(*items: MetadataFilter | MetadataFilters, condition: str = "and") -> MetadataFilters:
    return MetadataFilters(filters=list(items), condition=FilterCondition(condition))


SCALAR_FILTERS = [
    _filters(MetadataFilter(key="year", value=2021)),
    _filters(MetadataFilter(key="year", value=2021, operator=FilterOperator.NE)),
    _filters(MetadataFilter(key="year", value=2018, operator=FilterOperator.GT)),
    _filters(MetadataFilter(key="year", value=2021, operator=FilterOperator.GTE)),
    _filters(MetadataFilter(key="year", value=2021, operator=FilterOperator.LT)),
    _filters(MetadataFilter(key="year", value=2018, operator=FilterOperator.LTE)),
    _filters(MetadataFilter(key="lang", value=["de", "fr"], operator=FilterOperator.IN)),
    _filters(MetadataFilter(key="year", value=[2018, 2024], operator=FilterOperator.NIN)),
    _filters(
        MetadataFilter(key="year", value=2020, operator=FilterOperator.GT),
        MetadataFilter(key="lang", value="de"),
        condition="or",
    ),
    _filters(
        MetadataFilter(key="year", value=2018, operator=FilterOperator.GTE),
        MetadataFilter(key="lang", value="de", operator=FilterOperator.NE),
    ),
    _filters(MetadataFilter(key="year", value=2021), condition="not"),
]


@pytest.mark.parametrize("filters", SCALAR_FILTERS, ids=lambda f: json.dumps(kairox_filter(f)))
def test_metadata_filters_select_what_llama_index_itself_selects(
    papers_workspace: Path, filters: MetadataFilters
):
    """Kairox pushes the translated filter down; LlamaIndex's own vector store filters the
    same nodes itself: both keep the same ones."""
    retriever = KairoxLlamaRetriever(str(papers_workspace), similarity_top_k=50)
    everything = [n.node for n in retriever.retrieve(ROCKETS)]
    index = VectorStoreIndex(everything, embed_model=MockEmbedding(embed_dim=8))
    itself = index.as_retriever(similarity_top_k=50, filters=filters).retrieve(ROCKETS)
    expected = {n.node_id for n in itself}
    assert expected, "the filter must keep something for the test to mean anything"
    assert {n.node_id for n in retriever.retrieve(ROCKETS, filters=filters)} == expected
    constructed = KairoxLlamaRetriever(str(papers_workspace), similarity_top_k=50, filters=filters)
    assert {n.node_id for n in constructed.retrieve(ROCKETS)} == expected


def test_list_operators_and_nesting_translate(papers_workspace: Path):
    tags_any = MetadataFilter(key="tags", value=["gpu", "food"], operator=FilterOperator.ANY)
    tags_all = MetadataFilter(key="tags", value=["gpu", "rockets"], operator=FilterOperator.ALL)
    contains = MetadataFilter(key="tags", value="food", operator=FilterOperator.CONTAINS)
    nested = _filters(
        _filters(MetadataFilter(key="year", value=2024), contains),
        _filters(tags_all, condition="not"),
        condition="or",
    )
    gpu_and_rockets = [{"tags": {"$contains": "gpu"}}, {"tags": {"$contains": "rockets"}}]
    assert kairox_filter(nested) == {
        "$or": [
            {"$and": [{"year": {"$eq": 2024}}, {"tags": {"$contains": "food"}}]},
            {"$not": {"$and": gpu_and_rockets}},
        ]
    }
    retriever = KairoxLlamaRetriever(str(papers_workspace), similarity_top_k=50)

    def documents(filters: MetadataFilters) -> set[str]:
        return {n.node.ref_doc_id for n in retriever.retrieve(ROCKETS, filters=filters)}

    assert documents(_filters(tags_any)) == {"engines", "menus"}
    assert documents(_filters(tags_all)) == {"engines"}
    assert "engines" not in documents(nested) and {"menus", "orbits"} <= documents(nested)


def test_kairox_filters_and_refusals(papers_workspace: Path):
    retriever = KairoxLlamaRetriever(str(papers_workspace), similarity_top_k=50)
    text = {n.node.ref_doc_id for n in retriever.retrieve(ROCKETS, filters="year >= 2021")}
    json_form = KairoxLlamaRetriever(
        str(papers_workspace), similarity_top_k=50, filters={"year": {"$gte": 2021}}
    )
    assert text == {n.node.ref_doc_id for n in json_form.retrieve(ROCKETS)}
    assert text == {"engines", "menus"}
    matching = MetadataFilter(key="title", value="Eng", operator=FilterOperator.TEXT_MATCH)
    with pytest.raises(ValueError, match="'text_match' on 'title' has no Kairox equivalent"):
        KairoxLlamaRetriever(str(papers_workspace), filters=_filters(matching))
    with pytest.raises(FilterError, match="expected a value"):
        retriever.retrieve(ROCKETS, filters="year >>= 2")


def test_by_file_gives_one_node_per_file(indexed_workspace: Path):
    retriever = KairoxLlamaRetriever(str(indexed_workspace), k=3, by_file=True)
    nodes = retriever.retrieve("failed uploads retry")
    paths = [n.node.metadata["path"] for n in nodes]
    assert len(paths) == len(set(paths)) == 3
    assert all("file_chunks" in n.node.metadata for n in nodes)
