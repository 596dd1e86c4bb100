"""``kairox bench retrieval`` on a tiny BEIR-layout dataset made by the test."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kairox import hookimpl
from kairox.bench.beir import DatasetError, load_beir
from kairox.bench.retrieval import BenchError, benchmark
from kairox.cli import build_cli
from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.plugins import build_plugin_manager
from kairox.registry import EmbeddingBackendSpec
from kairox.testing import CORPUS, EXPECTED, registered_plugin

KEYS = {"system", "ndcg@10", "recall@100", "mrr@10", "index_s", "p50_ms", "p95_ms"}


@pytest.fixture
def dataset(tmp_path):
    root = tmp_path / "tiny-beir"
    (root / "qrels").mkdir(parents=True)
    with (root / "corpus.jsonl").open("w") as handle:
        for doc in CORPUS:
            handle.write(json.dumps({"_id": doc.id, "title": doc.title, "text": doc.text}) + "\n")
    with (root / "queries.jsonl").open("w") as handle:
        for number, (text, _) in enumerate(EXPECTED):
            handle.write(json.dumps({"_id": f"q{number}", "text": text}) + "\n")
        handle.write(json.dumps({"_id": "unjudged", "text": "nothing"}) + "\n")
    rows = ["query-id\tcorpus-id\tscore"] + [
        f"q{number}\t{expected}\t1" for number, (_, expected) in enumerate(EXPECTED)
    ]
    (root / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n")
    return root


class CountingHashing(HashingEmbedder):
    calls = 0

    def embed(self, texts):
        type(self).calls += len(texts)
        return super().embed(texts)


def test_cli_reports_every_system_with_the_documented_keys(dataset, tmp_path):
    out = tmp_path / "results.json"
    pm = build_plugin_manager(entry_points=False)
    result = CliRunner().invoke(
        build_cli(pm),
        [
            "bench",
            "retrieval",
            "--dataset",
            str(dataset),
            "--systems",
            "sqlite-fts,hashing",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["queries"] == len(EXPECTED)  # the unjudged query is left out
    systems = {row["system"]: row for row in report["systems"]}
    assert set(systems) == {"sqlite-fts", "hashing"}
    for row in systems.values():
        assert set(row) >= KEYS
        assert 0 <= row["ndcg@10"] <= 1 and row["p95_ms"] >= row["p50_ms"] >= 0
    # every query has exactly one relevant document that BM25 ranks first
    assert systems["sqlite-fts"]["ndcg@10"] == pytest.approx(1.0)
    assert systems["sqlite-fts"]["mrr@10"] == pytest.approx(1.0)
    assert "sqlite-fts" in result.output


def test_embeddings_are_cached_between_runs(dataset, tmp_path):
    class Plugin:
        @hookimpl
        def kairox_register_embedding_backends(self, register):
            register(EmbeddingBackendSpec(name="counting", factory=lambda: CountingHashing(64)))

    data = load_beir(dataset)
    with registered_plugin(Plugin(), "counting", build_plugin_manager(entry_points=False)) as pm:
        CountingHashing.calls = 0
        first = benchmark(data, ["dense:counting"], pm.registry, cache_dir=tmp_path / "cache")
        corpus_calls = CountingHashing.calls
        assert corpus_calls >= len(CORPUS)
        CountingHashing.calls = 0
        second = benchmark(data, ["dense:counting"], pm.registry, cache_dir=tmp_path / "cache")
        assert CountingHashing.calls < len(CORPUS)  # only the queries were embedded
    assert second["systems"][0]["index_cached"] is True
    assert first["systems"][0]["ndcg@10"] == second["systems"][0]["ndcg@10"]


def test_hybrid_needs_minilm_and_says_how_to_get_it(dataset, tmp_path):
    pm = build_plugin_manager(entry_points=False)
    with pytest.raises(BenchError, match="kairox install kairox-sentence-transformers"):
        benchmark(load_beir(dataset), ["hybrid"], pm.registry, cache_dir=tmp_path)


def test_unknown_system_lists_the_available_ones(dataset, tmp_path):
    pm = build_plugin_manager(entry_points=False)
    with pytest.raises(BenchError, match=r"unknown system .bm25.*sqlite-fts"):
        benchmark(load_beir(dataset), ["bm25"], pm.registry, cache_dir=tmp_path)


def test_not_a_beir_folder(tmp_path):
    with pytest.raises(DatasetError, match=r"corpus\.jsonl is missing"):
        load_beir(tmp_path)


def test_missing_split_names_the_splits_there(dataset):
    with pytest.raises(DatasetError, match=r"qrels/train.tsv is missing \(splits here: test\)"):
        load_beir(dataset, "train")
