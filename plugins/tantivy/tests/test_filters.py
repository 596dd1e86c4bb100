"""Filters: Kairox's filter conformance suite, typed metadata values, indexes written
before range terms, range terms against the numbers they encode, and random filters."""

from __future__ import annotations

import kairox_tantivy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kairox.retrieval import Document, Query, QueryError
from kairox.retrieval.filters import RANGE_COMPARE, FilterUnsupportedError
from kairox.testing import FILTER_CORPUS, FilterConformance, run
from kairox.testing.fuzz import check_hits_or_query_error, random_filters


def search_ids(index: kairox_tantivy.TantivyIndex, text: str, k: int = 10, **filters) -> list[str]:
    return [hit.id for hit in index.search(text, k, filters)]


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
    assert got == {f"v{i}" for i, v in enumerate(values) if RANGE_COMPARE[op](v, bound)}


@pytest.fixture(scope="module")
def shared_source(tmp_path_factory, make_source, corpus_docs):
    folder = tmp_path_factory.mktemp("tantivy")
    kairox_tantivy.TantivyIndex(folder / "index", create=True).upsert(corpus_docs)
    return make_source(folder)


@settings(max_examples=150, deadline=None)
@given(
    text=st.text(max_size=50),
    filters=random_filters(st.text(max_size=10), text_size=20, operator_objects=True),
)
def test_any_filter_returns_hits_or_a_query_error(shared_source, text, filters):
    check_hits_or_query_error(shared_source, text, filters)


# -- filters on typed metadata -------------------------------------------------------------


@pytest.fixture
def tagged(tmp_path):
    index = kairox_tantivy.TantivyIndex(tmp_path / "index", create=True)
    index.upsert(
        [
            Document(
                "a", "shared word", metadata={"year": 2021, "draft": True, "tags": ["x", "y"]}
            ),
            Document("b", "shared word", metadata={"year": "2021", "draft": False, "tags": "x"}),
            Document("c", "shared word", metadata={"year": 2021.5, "lang": 'e"n=1', "nested": {}}),
        ]
    )
    return index


def test_filters_compare_typed_values(tagged):
    assert search_ids(tagged, "word", year=2021) == ["a"]
    assert search_ids(tagged, "word", year=2021.0) == ["a"]
    assert search_ids(tagged, "word", year="2021") == ["b"]
    assert search_ids(tagged, "word", year=2021.5) == ["c"]
    assert search_ids(tagged, "word", draft=True) == ["a"]
    assert search_ids(tagged, "word", draft=1) == ["a"]
    assert search_ids(tagged, "word", lang='e"n=1') == ["c"]


def test_filters_or_within_a_key_and_across_keys(tagged):
    assert sorted(search_ids(tagged, "word", tags="x")) == ["a", "b"]
    assert search_ids(tagged, "word", tags="y") == ["a"]
    # one kind of value per any-of list (the filter language): numbers, or strings
    either = {"$or": [{"year": 2021}, {"year": "2021"}]}
    assert sorted(search_ids(tagged, "word", **either)) == ["a", "b"]
    assert search_ids(tagged, "word", **either, draft=False) == ["b"]
    assert search_ids(tagged, "word", year=[]) == []
    assert search_ids(tagged, "word", missing="x") == []


def test_filters_do_not_change_scores(tagged):
    plain = {h.id: h.score for h in tagged.search("word", 5)}
    filtered = {h.id: h.score for h in tagged.search("word", 5, {"tags": "x"})}
    assert filtered == {key: plain[key] for key in filtered}


def test_a_bad_filter_value_is_a_query_error(tagged, tmp_path, make_source):
    with pytest.raises(QueryError, match=r"filter\.nested\.a: unknown operator"):
        tagged.search("word", 5, {"nested": {"a": 1}})
    with pytest.raises(QueryError, match=r"filter\.year\[1\]"):
        run(make_source(tmp_path).retrieve(Query("word", filters={"year": [2021, None]})))
