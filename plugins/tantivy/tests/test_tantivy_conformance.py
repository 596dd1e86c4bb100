"""Kairox's source and plugin conformance suites (the registration check, lazy tantivy,
discovery through ``kairox plugins``), and property tests over hostile text."""

from __future__ import annotations

import kairox_tantivy
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kairox.retrieval import Document, Query, ScoreKind
from kairox.testing import PluginConformance, SourceConformance, run


class TestTantivyConformance(SourceConformance):
    fuzz_examples, fuzz_max_size = 300, None

    @pytest.fixture
    def conformance_source(self, filled, tmp_path, make_source):
        return make_source(tmp_path, "index")

    @pytest.fixture
    def broken_source(self, tmp_path, make_source):
        return make_source(tmp_path, "missing-index")


class TestTantivyPlugin(PluginConformance):
    plugin, kind, distribution = kairox_tantivy, "tantivy", "kairox-tantivy"
    config_model = kairox_tantivy.TantivyConfig
    lazy_modules = ("tantivy",)


def test_scores_are_bm25_and_best_first(filled, tmp_path, make_source):
    source = make_source(tmp_path)
    assert source.score_kind is ScoreKind.BM25
    hits = run(source.retrieve(Query("saturn rings water", k=5)))
    assert hits[0].id == "astro-1" and len(hits) > 1
    assert all(hit.score > 0 for hit in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


# -- properties ------------------------------------------------------------------------


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
