"""Search behaviour against the loopback server, through the real weaviate-client: modes and
scores, alpha, tenants, named vectors, query embeddings, filters, connection reuse."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kairox_weaviate import WeaviateNotFoundError, WeaviateReplyError, WeaviateSourceError
from kairox_weaviate.testing import TestCollection, WeaviateTestServer

from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.retrieval import CompositeWorkspaceRetriever, Query, QueryError, ScoreKind
from kairox.testing import CORPUS, run
from kairox.testing.fuzz import check_hits_or_query_error, random_filters


def ids(hits):
    return [hit.id for hit in hits]


# -- modes and scores -----------------------------------------------------------------------


def test_bm25_scores_are_bm25_best_first(corpus_server, make_source):
    source = make_source(corpus_server, mode="bm25")
    assert source.score_kind is ScoreKind.BM25 and source.embedder is None
    hits = run(source.retrieve(Query("saturn rings water", k=5)))
    assert hits[0].id == "astro-1" and len(hits) > 1
    assert all(hit.score > 0 for hit in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    search = corpus_server.searches[-1]
    assert search.HasField("bm25_search") and search.limit == 5


def test_near_vector_score_is_one_minus_cosine_distance(corpus_server, make_source):
    source = make_source(corpus_server, mode="near_vector")
    assert source.score_kind is ScoreKind.COSINE
    hits = run(source.retrieve(Query("espresso coffee beans", k=3)))
    assert hits[0].id == "cook-2"
    embedder = HashingEmbedder()
    query = embedder.embed(["espresso coffee beans"])[0]
    doc = next(d for d in CORPUS if d.id == "cook-2")
    expected = float(embedder.embed([f"{doc.title}. {doc.text}"])[0] @ query)
    assert hits[0].score == pytest.approx(expected, abs=1e-5)
    assert all(-1.0 <= h.score <= 1.0 for h in hits)


def test_hybrid_scores_are_relative_fusion_in_0_1(corpus_server, make_source):
    source = make_source(corpus_server, mode="hybrid")
    assert source.score_kind is ScoreKind.PROBABILITY
    hits = run(source.retrieve(Query("black hole gravity light", k=5)))
    assert hits[0].id == "astro-2"
    assert all(0.0 <= h.score <= 1.0 for h in hits)
    hybrid = corpus_server.searches[-1].hybrid_search
    assert hybrid.fusion_type == hybrid.FUSION_TYPE_RELATIVE_SCORE
    assert hybrid.alpha == pytest.approx(0.5) or hybrid.alpha_param == pytest.approx(0.5)


def test_hits_carry_id_text_uri_and_metadata(corpus_server, make_source):
    hit = run(make_source(corpus_server, mode="bm25").retrieve(Query("sourdough", k=1)))[0]
    doc = next(d for d in CORPUS if d.id == "cook-1")
    assert (hit.id, hit.text, hit.uri, hit.source) == ("cook-1", doc.text, doc.uri, "wv")
    assert hit.metadata == {"title": doc.title, **doc.metadata}


def test_without_id_property_the_hit_id_is_the_uuid(corpus_server, make_source):
    hit = run(
        make_source(corpus_server, mode="bm25", id_property=None).retrieve(Query("sourdough"))
    )[0]
    stored = {o.properties["doc_id"]: o.uuid for o in corpus_server.objects("Corpus")}
    assert hit.id == stored["cook-1"]
    assert hit.metadata["doc_id"] == "cook-1"


def test_empty_and_whitespace_queries_return_nothing_without_a_request(server, make_source):
    source = make_source(server, mode="hybrid")
    for text in ("", "   ", "\n\t"):
        assert run(source.retrieve(Query(text))) == []
    assert server.requests == []


@pytest.mark.parametrize("version", ["1.27.0", "1.30.0", "1.36.9"])
def test_every_mode_works_with_each_client_encoding(version, make_source, helpers):
    """The client encodes vectors and alpha differently by server version."""
    with WeaviateTestServer(collections=["Corpus"], version=version) as server:
        helpers.seed_corpus(server)
        for mode in ("bm25", "near_vector", "hybrid"):
            hits = run(make_source(server, mode=mode).retrieve(Query("sql inner join", k=3)))
            assert hits[0].id == "code-2", (version, mode)


def test_alpha_changes_the_hybrid_ranking(make_source, helpers):
    """Lexical and vector evidence disagree; alpha decides which one wins."""
    table = helpers.TableEmbedder({"coffee": [1.0, 0.0, 0.0]})
    with WeaviateTestServer(collections=["Docs"]) as server:
        server.seed(
            "Docs",
            [
                {"text": "coffee coffee coffee", "doc_id": "lexical"},
                {"text": "a drink made from roasted beans", "doc_id": "semantic"},
                {"text": "tea leaves", "doc_id": "other"},
            ],
            vectors=[[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]],
        )

        def ranking(alpha):
            source = make_source(
                server,
                collection="Docs",
                alpha=alpha,
                embedding_backend="table",
                backends={"table": table},
            )
            return ids(run(source.retrieve(Query("coffee", k=3))))

        assert ranking(0.0)[0] == "lexical"
        assert ranking(1.0)[0] == "semantic"
        assert ranking(0.25)[0] == "lexical"
        assert ranking(0.75)[0] == "semantic"
        assert ranking(0.0) == ["lexical"]  # pure BM25: only lexical matches


# -- tenants and named vectors ----------------------------------------------------------------


@pytest.fixture
def tenant_server():
    spec = TestCollection("Notes", multi_tenancy=True, tenants=("acme", "globex"))
    with WeaviateTestServer(collections=[spec]) as server:
        server.seed("Notes", [{"text": "acme quarterly budget", "doc_id": "a1"}], tenant="acme")
        server.seed(
            "Notes",
            [
                {"text": "globex quarterly budget", "doc_id": "g1"},
                {"text": "budget", "doc_id": "g2"},
            ],
            tenant="globex",
        )
        yield server


def test_tenants_are_isolated(tenant_server, make_source):
    acme = make_source(tenant_server, collection="Notes", mode="bm25", tenant="acme")
    globex = make_source(tenant_server, collection="Notes", mode="bm25", tenant="globex")
    assert ids(run(acme.retrieve(Query("quarterly budget")))) == ["a1"]
    assert sorted(ids(run(globex.retrieve(Query("quarterly budget"))))) == ["g1", "g2"]
    assert {s.tenant for s in tenant_server.searches} == {"acme", "globex"}


def test_a_missing_tenant_is_a_clear_error(tenant_server, make_source):
    source = make_source(tenant_server, collection="Notes", mode="bm25", tenant="initech")
    with pytest.raises(WeaviateNotFoundError, match=r"no tenant 'initech'.*`tenant`"):
        run(source.retrieve(Query("budget")))
    assert tenant_server.count("Search") == 1  # not retried


def test_a_multi_tenant_collection_needs_a_tenant(tenant_server, make_source):
    source = make_source(tenant_server, collection="Notes", mode="bm25")
    with pytest.raises(WeaviateSourceError, match="multi-tenant; set `tenant`"):
        run(source.retrieve(Query("budget")))


def test_target_vector_picks_the_named_vector(make_source, helpers):
    table = helpers.TableEmbedder({"rings": [1.0, 0.0, 0.0]})
    with WeaviateTestServer(collections=["Named"]) as server:
        server.seed(
            "Named",
            [{"text": "first", "doc_id": "by-title"}, {"text": "second", "doc_id": "by-body"}],
            vectors=[
                {"title": [1.0, 0.0, 0.0], "body": [0.0, 1.0, 0.0]},
                {"title": [0.0, 1.0, 0.0], "body": [1.0, 0.0, 0.0]},
            ],
        )

        def top(target):
            source = make_source(
                server,
                collection="Named",
                mode="near_vector",
                target_vector=target,
                embedding_backend="table",
                backends={"table": table},
            )
            return ids(run(source.retrieve(Query("rings", k=1))))

        assert top("title") == ["by-title"]
        assert top("body") == ["by-body"]
        assert list(server.searches[-1].near_vector.targets.target_vectors) == ["body"]
        with pytest.raises(WeaviateSourceError, match="multiple vectors"):
            top(None)


def test_a_vector_of_another_dimension_names_the_backend(server, make_source, helpers):
    table = helpers.TableEmbedder({}, dim=3)
    source = make_source(
        server, mode="near_vector", embedding_backend="table", backends={"table": table}
    )
    with pytest.raises(WeaviateSourceError, match="embedding_backend = 'table'"):
        run(source.retrieve(Query("saturn")))


# -- query embeddings ---------------------------------------------------------------------------


def test_a_vector_in_query_embeddings_is_used_not_recomputed(corpus_server, make_source, helpers):
    counting = helpers.CountingEmbedder(HashingEmbedder())
    source = make_source(
        corpus_server,
        mode="near_vector",
        embedding_backend="counting",
        backends={"counting": counting},
    )
    assert source.embedder is counting
    vector = HashingEmbedder().embed(["mitochondria ATP energy cell"])[0]
    hits = run(source.retrieve(Query("ignored words", k=1, embeddings={counting.name: vector})))
    assert hits[0].id == "bio-2" and len(counting.calls) == 0
    hits = run(source.retrieve(Query("mitochondria ATP energy cell", k=1)))
    assert hits[0].id == "bio-2" and len(counting.calls) == 1


def test_the_composite_embeds_once_for_two_weaviate_sources(corpus_server, make_source, helpers):
    counting = helpers.CountingEmbedder(HashingEmbedder())
    backends = {"counting": counting}
    dense = make_source(
        corpus_server,
        kb_id="dense",
        mode="near_vector",
        embedding_backend="counting",
        backends=backends,
    )
    hybrid = make_source(
        corpus_server,
        kb_id="hybrid",
        mode="hybrid",
        embedding_backend="counting",
        backends=backends,
    )
    lexical = make_source(corpus_server, kb_id="lexical", mode="bm25")
    composite = CompositeWorkspaceRetriever([dense, hybrid, lexical], default_timeout_ms=5000)
    result = run(composite.retrieve(Query("python generator yield", k=3)))
    assert [r.status.value for r in result.reports] == ["ok", "ok", "ok"]
    assert result.hits[0].id == "code-1"
    assert len(counting.calls) == 1


def test_a_query_vector_with_the_wrong_width_is_refused(corpus_server, make_source):
    source = make_source(corpus_server, mode="near_vector")
    query = Query("x", embeddings={source.embedder.name: np.ones(7, dtype=np.float32)})
    with pytest.raises(WeaviateSourceError, match="7 dimensions, expected 384"):
        run(source.retrieve(query))


# -- filters ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"topic": "cooking"}, {"cook-1", "cook-2", "intl-1"}),
        ({"topic": ["astronomy", "biology"]}, {"astro-1", "astro-2", "bio-1", "bio-2"}),
        ({"topic": "cooking", "year": 2023}, {"cook-2"}),
        ({"year": [2016, 2022]}, {"cook-1", "intl-1"}),
        ({"topic": "cooking", "year": [2016, 2019.0]}, {"intl-1"}),
        ({"topic": "nothing-like-it"}, set()),
    ],
)
def test_filters_end_to_end(corpus_server, make_source, filters, expected):
    source = make_source(corpus_server, mode="near_vector")  # returns every allowed object
    hits = run(source.retrieve(Query("anything at all", k=20, filters=filters)))
    assert set(ids(hits)) == expected


def test_static_filters_and_query_filters_are_and_ed(corpus_server, make_source):
    source = make_source(corpus_server, mode="near_vector", filters={"topic": "cooking"})
    assert set(ids(run(source.retrieve(Query("x", k=20))))) == {"cook-1", "cook-2", "intl-1"}
    hits = run(source.retrieve(Query("x", k=20, filters={"year": 2022})))
    assert ids(hits) == ["cook-1"]
    clause = corpus_server.searches[-1].filters
    assert clause.operator == clause.OPERATOR_AND and len(clause.filters) == 2


def test_an_empty_any_of_list_matches_nothing_without_a_request(server, make_source):
    source = make_source(server, mode="bm25")
    assert run(source.retrieve(Query("saturn", filters={"topic": []}))) == []
    assert server.count("Search") == 0


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"bad key": "x"}, "Weaviate property names"),
        ({"topic": None}, "strings, numbers or booleans"),
        ({"topic": {"nested": 1}}, "unknown operator 'nested'"),
        ({"topic": ["a", 1]}, "one kind of value"),
        ({"year": float("nan")}, "finite"),
        ({"colour": "red"}, "no such prop with name 'colour'"),
        ({"year": "2021"}, 'cannot use "valueText" on type "int"'),
    ],
)
def test_bad_filters_are_query_errors(corpus_server, make_source, filters, message):
    source = make_source(corpus_server, mode="bm25")
    with pytest.raises(QueryError, match=message):
        run(source.retrieve(Query("saturn", filters=filters)))


@pytest.fixture(scope="module")
def shared_hybrid(corpus_server, build_source):
    source = build_source(corpus_server, mode="hybrid")
    yield source
    source.close()


@settings(max_examples=100, deadline=None)
@given(
    filters=random_filters(
        st.sampled_from(["topic", "year", "title", "nope", "bad key", ""]), text_size=8, max_size=2
    )
)
def test_any_filter_returns_hits_or_a_query_error(shared_hybrid, filters):
    check_hits_or_query_error(shared_hybrid, "water", filters)


# -- connection lifecycle -----------------------------------------------------------------------


def test_one_connection_is_reused_and_close_reconnects(server, make_source):
    source = make_source(server, mode="bm25")
    for _ in range(3):
        assert run(source.retrieve(Query("saturn rings")))
    assert server.count("GET /v1/meta") == 1
    assert server.count("GET /v1/schema/Corpus") == 1
    assert server.count("Search") == 3
    source.close()
    assert run(source.retrieve(Query("saturn rings")))
    assert server.count("GET /v1/meta") == 2


def test_concurrent_first_queries_connect_once(server, make_source):
    source = make_source(server, mode="bm25")

    async def many():
        return await asyncio.gather(*(source.retrieve(Query("saturn")) for _ in range(8)))

    assert all(hits for hits in run(many()))
    assert server.count("GET /v1/meta") == 1


def test_a_missing_collection_is_a_clear_error(server, make_source):
    source = make_source(server, collection="Papers", mode="bm25")
    with pytest.raises(WeaviateNotFoundError, match=r"no collection 'Papers'.*`collection`"):
        run(source.retrieve(Query("saturn")))
    assert server.count("Search") == 0


def test_a_collection_dropped_later_is_reported_and_rechecked(server, make_source, helpers):
    source = make_source(server, mode="bm25")
    assert run(source.retrieve(Query("saturn")))
    server.drop_collection("Corpus")
    with pytest.raises(WeaviateNotFoundError, match="no collection 'Corpus'"):
        run(source.retrieve(Query("saturn")))
    server.create_collection("Corpus")
    helpers.seed_corpus(server)
    assert ids(run(source.retrieve(Query("saturn", k=1)))) == ["astro-1"]


def test_a_wrong_text_property_is_named(corpus_server, make_source):
    source = make_source(corpus_server, mode="bm25", text_property="body")
    with pytest.raises(WeaviateReplyError, match=r"no text property 'body' \(text_property\)"):
        run(source.retrieve(Query("saturn")))
