"""Kairox's conformance suite, the registration check, property tests over hostile input,
and discovery through ``kairox plugins``."""

from __future__ import annotations

import subprocess
import sys

import kairox_tantivy
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kairox.retrieval import Document, Query, QueryError, ScoreKind
from kairox.retrieval.filters import FilterUnsupportedError
from kairox.testing import (
    FILTER_CORPUS,
    FilterConformance,
    SourceConformance,
    check_kind_registration,
    check_listed_by_kairox_plugins,
    run,
)


@pytest.fixture(scope="module")
def filter_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("filters")
    docs = [Document(d.id, d.text, title=d.title, metadata=d.metadata) for d in FILTER_CORPUS]
    kairox_tantivy.TantivyIndex(folder / "index", create=True).upsert(docs)
    return folder


class TestTantivyFilters(FilterConformance):
    @pytest.fixture
    def filter_source(self, filter_folder, make_source):
        return make_source(filter_folder, "index")


def test_an_index_without_range_terms_refuses_ranges_with_the_fix(filter_folder, make_source):
    marker = filter_folder / "index" / kairox_tantivy.filters.RANGE_MARKER
    marker.unlink()  # as an index written before range terms looks
    try:
        source = make_source(filter_folder, "index")
        with pytest.raises(FilterUnsupportedError, match="kairox kb ingest"):
            run(source.retrieve(Query("passage", filters={"year": {"$gt": 2020}})))
        hits = run(source.retrieve(Query("passage", k=300, filters={"topic": "cooking"})))
        assert len(hits) == 50  # everything but ranges still works
    finally:
        marker.touch()


class TestTantivyConformance(SourceConformance):
    fuzz_examples, fuzz_max_size = 300, None

    @pytest.fixture
    def conformance_source(self, filled, tmp_path, make_source):
        return make_source(tmp_path, "index")

    @pytest.fixture
    def broken_source(self, tmp_path, make_source):
        return make_source(tmp_path, "missing-index")


def test_registers_the_tantivy_kind():
    kind = check_kind_registration(kairox_tantivy, "tantivy")
    assert kind.config_model is kairox_tantivy.TantivyConfig
    assert kind.factory is kairox_tantivy.build_source


def test_scores_are_bm25_and_best_first(filled, tmp_path, make_source):
    source = make_source(tmp_path)
    assert source.score_kind is ScoreKind.BM25
    hits = run(source.retrieve(Query("saturn rings water", k=5)))
    assert hits[0].id == "astro-1" and len(hits) > 1
    assert all(hit.score > 0 for hit in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


# -- properties ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_source(tmp_path_factory, make_source, corpus_docs):
    folder = tmp_path_factory.mktemp("tantivy")
    kairox_tantivy.TantivyIndex(folder / "index", create=True).upsert(corpus_docs)
    return make_source(folder)


_scalar = st.one_of(st.text(max_size=20), st.integers(), st.floats(), st.booleans())


@settings(max_examples=150, deadline=None)
@given(
    text=st.text(max_size=50),
    filters=st.dictionaries(
        st.text(max_size=10),
        st.one_of(
            _scalar,
            st.lists(_scalar, max_size=3),
            st.none(),
            st.dictionaries(st.text(), st.integers(), max_size=1),
        ),
        max_size=3,
    ),
)
def test_any_filter_returns_hits_or_a_query_error(shared_source, text, filters):
    try:
        hits = run(shared_source.retrieve(Query(text, k=5, filters=filters)))
    except QueryError:
        return
    assert isinstance(hits, list) and len(hits) <= 5


@pytest.fixture(scope="module")
def scratch_index(tmp_path_factory):
    return kairox_tantivy.TantivyIndex(tmp_path_factory.mktemp("scratch") / "index", create=True)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=st.text(min_size=1, max_size=120))
def test_every_word_of_a_document_finds_it(scratch_index, body):
    """The query side analyses text exactly like ``en_stem`` did at indexing time."""
    scratch_index.upsert([Document("doc", body)])
    for word in body.split():
        if not scratch_index.query_terms(word):
            continue  # punctuation only, or a token of 40+ bytes that en_stem drops
        assert [h.id for h in scratch_index.search(word, 1)] == ["doc"], word


# -- discovery -------------------------------------------------------------------------


def test_importing_the_plugin_does_not_import_tantivy():
    code = "import sys, kairox_tantivy; print('tantivy' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def test_kairox_plugins_lists_tantivy_as_ok():
    check_listed_by_kairox_plugins(
        "tantivy", "kairox-tantivy", "kairox_register_knowledge_base_kinds"
    )


@pytest.fixture(scope="module")
def numbers_index(tmp_path_factory):
    values = [-1e9, -2.5, -1, -0.0, 0, 1e-9, 0.5, 1, 2, 2.5, 1023, 1024, 2**40, 1e300]
    index = kairox_tantivy.TantivyIndex(tmp_path_factory.mktemp("n") / "index", create=True)
    index.upsert(Document(f"v{i}", "number", metadata={"x": v}) for i, v in enumerate(values))
    return index, values


@settings(max_examples=150, deadline=None)
@given(
    op=st.sampled_from(["$gt", "$gte", "$lt", "$lte"]),
    bound=st.one_of(
        st.integers(-(2**50), 2**50), st.floats(-1e12, 1e12, allow_nan=False), st.just(1024)
    ),
)
def test_range_terms_order_like_the_numbers(numbers_index, op, bound):
    index, values = numbers_index
    spec = {"x": {op: bound}}
    got = {hit.id for hit in index.search("number", 100, spec)}
    compare = {
        "$gt": lambda v: v > bound,
        "$gte": lambda v: v >= bound,
        "$lt": lambda v: v < bound,
        "$lte": lambda v: v <= bound,
    }[op]
    assert got == {f"v{i}" for i, v in enumerate(values) if compare(v)}
