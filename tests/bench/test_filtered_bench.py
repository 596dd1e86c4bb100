"""``kairox bench retrieval --filtered``: the synthetic field, and k hits whenever k match."""

from __future__ import annotations

import pytest

from kairox.bench.beir import load_beir
from kairox.bench.filtered import BUCKETS, FILTER, bucket_of, filtered_run
from kairox.plugin_host.manager import build_plugin_manager
from kairox.testing import FILTER_CORPUS
from tests.bench.conftest import write_beir


@pytest.fixture
def dataset(tmp_path):
    queries = {"q1": "passage about cooking", "q2": "compiler loop", "q3": "zzz nothing"}
    qrels = [("q1", "f002"), ("q2", "f003"), ("q3", "f004")]
    return load_beir(
        write_beir(tmp_path / "filter-beir", FILTER_CORPUS, queries.items(), qrels), "test"
    )


def test_the_bucket_field_is_about_a_tenth_of_any_corpus():
    counts = [0] * BUCKETS
    for i in range(10_000):
        counts[bucket_of(f"doc-{i}")] += 1
    assert all(800 < count < 1200 for count in counts)


def test_every_query_with_k_matches_gets_k_hits(dataset, tmp_path):
    registry = build_plugin_manager().registry
    kinds = [k for k in ("sqlite-fts", "tantivy") if k in registry.knowledge_base_kinds]
    rows = filtered_run(dataset, kinds, registry, tmp_path / "scratch")
    assert [row["system"] for row in rows] == kinds
    selected = sum(bucket_of(d.id) == FILTER["bucket"] for d in FILTER_CORPUS)
    for row in rows:
        assert row["selectivity"] == round(selected / len(FILTER_CORPUS), 4)
        # "passage about cooking" matches every passage; "zzz nothing" none
        assert 1 <= row["queries_with_k_matches"] <= 2
        assert row["full_k"] == row["queries_with_k_matches"]
        assert row["filtered_p50_ms"] > 0 and row["p50_ms"] > 0
