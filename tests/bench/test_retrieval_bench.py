"""``kairox bench retrieval`` on a tiny BEIR-layout dataset made by the test."""

from __future__ import annotations

import importlib.util
import json

import click
import pytest
from click.testing import CliRunner

from kairox import hookimpl
from kairox.bench import BenchError, system_names
from kairox.bench.beir import DatasetError, load_beir
from kairox.bench.metrics import compare, paired_test
from kairox.bench.peers import Bm25sSource, RankBm25Source
from kairox.bench.plots import main as plots_main
from kairox.bench.report import write_report
from kairox.bench.report import write_report as scaling_write
from kairox.bench.retrieval import HYBRIDS, Bench, benchmark
from kairox.bench.scaling import benchmark as scaling_benchmark
from kairox.bench.scaling import parse_size
from kairox.cli import build_cli
from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.plugin_host.manager import build_plugin_manager
from kairox.plugin_host.registry import EmbeddingBackendSpec
from kairox.retrieval import Hit, Query, ScoreKind, fuse
from kairox.retrieval.fusion import DEFAULT_FUSION, FUSION_METHODS, KIND_WEIGHTS
from kairox.retrieval.vectors import SENTENCE_WEIGHT
from kairox.testing import CORPUS, EXPECTED, registered_plugin
from kairox.workspace.chunking import split_sentences

KEYS = {
    "system",
    "ndcg@10",
    "recall@100",
    "mrr@10",
    "index_s",
    "p50_ms",
    "p95_ms",
    "qps",
    "peak_rss_mb",
}


class CountingHashing(HashingEmbedder):
    calls = 0

    def embed(self, texts):
        type(self).calls += len(texts)
        return super().embed(texts)


def _invoke(pm, *args):
    return CliRunner().invoke(build_cli(pm), [str(a) for a in args])


def _retrieval(pm, dataset, out, *more):
    """``kairox bench retrieval`` of sqlite-fts and hashing on ``dataset``, written to ``out``."""
    systems = ("--systems", "sqlite-fts,hashing")
    return _invoke(pm, "bench", "retrieval", "--dataset", dataset, *systems, "--out", out, *more)


def test_cli_reports_every_system_with_the_documented_keys(dataset, tmp_path):
    out = tmp_path / "results.json"
    pm = build_plugin_manager(entry_points=False)
    result = _retrieval(pm, dataset, out)
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
        # in this process, so the embedder's call count is visible here
        first = benchmark(
            data, ["dense:counting"], pm.registry, cache_dir=tmp_path / "cache", isolate=False
        )
        corpus_calls = CountingHashing.calls
        assert corpus_calls >= len(CORPUS)
        CountingHashing.calls = 0
        second = benchmark(
            data, ["dense:counting"], pm.registry, cache_dir=tmp_path / "cache", isolate=False
        )
        # only the queries were embedded (plus one untimed warm-up query), no document
        assert CountingHashing.calls == len(EXPECTED) + 1
    assert second["systems"][0]["index_cached"] is True
    assert first["systems"][0]["ndcg@10"] == second["systems"][0]["ndcg@10"]


def test_dense_searches_sentence_aware_and_dense_doc_whole_documents(dataset, tmp_path):
    with registered_plugin(
        _hashing_as_minilm(), "fake-minilm", build_plugin_manager(entry_points=False)
    ) as pm:
        bench = Bench(
            load_beir(dataset), pm.registry, cache_dir=tmp_path / "cache", scratch=tmp_path
        )
        dense, _, _ = bench.system("dense")
        whole, _, _ = bench.system("dense-doc")
    sentences = sum(
        len(split_sentences(f"{title}\n{text}".strip()))
        for title, text in bench.dataset.corpus.values()
    )
    assert dense.sentences is not None and len(dense.sentences.matrix) == sentences
    assert dense.sentence_weight == SENTENCE_WEIGHT
    assert whole.sentences is None
    cached = sorted(p.name.split("-", 1)[1] for p in (tmp_path / "cache").iterdir())
    assert cached == ["hashing-64-64-sentences.npz", "hashing-64-64.npz"]


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


# -- peers, hybrids, memory, per-query results, compare, scaling, plots ------------------


def _hashing_as_minilm():
    """A plugin registering the hashing embedder under MiniLM's backend name."""

    class Plugin:
        @hookimpl
        def kairox_register_embedding_backends(self, register):
            register(EmbeddingBackendSpec(name="minilm", factory=lambda: HashingEmbedder(64)))

    return Plugin()


def test_isolated_runs_measure_peak_memory_and_save_per_query_results(dataset, tmp_path):
    out, runs = tmp_path / "r.json", tmp_path / "runs"
    pm = build_plugin_manager(entry_points=False)
    result = _retrieval(pm, dataset, out, "--run-dir", runs)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert "VmHWM" in report["memory"]
    for row in report["systems"]:
        assert isinstance(row["peak_rss_mb"], float) and row["peak_rss_mb"] >= 0
    judged = {f"q{n}" for n in range(len(EXPECTED))}
    for system in ("sqlite-fts", "hashing"):
        per_query = report["per_query"][system]
        assert set(per_query) == {"ndcg@10", "recall@100", "mrr@10"}
        assert set(per_query["ndcg@10"]) == judged
        mean = sum(per_query["ndcg@10"].values()) / len(judged)
        row = next(r for r in report["systems"] if r["system"] == system)
        assert mean == pytest.approx(row["ndcg@10"])
    lines = (runs / "sqlite-fts.trec").read_text().splitlines()
    qid, q0, doc, rank, _score, tag = lines[0].split()
    assert (q0, rank, tag) == ("Q0", "1", "sqlite-fts") and qid in judged
    assert (
        doc == dict(EXPECTED)[next(t for t, _ in EXPECTED if f"q{EXPECTED.index((t, doc))}" == qid)]
    )


def test_in_process_runs_report_no_memory(dataset, tmp_path):
    pm = build_plugin_manager(entry_points=False)
    report = benchmark(
        load_beir(dataset), ["sqlite-fts"], pm.registry, cache_dir=tmp_path, isolate=False
    )
    assert report["systems"][0]["peak_rss_mb"] is None
    assert report["memory"].startswith("not measured")


def test_a_system_failing_in_its_process_raises_here(dataset, tmp_path):
    class Broken(HashingEmbedder):
        def embed(self, texts):
            raise RuntimeError("model file is corrupt")

    class Plugin:
        @hookimpl
        def kairox_register_embedding_backends(self, register):
            register(EmbeddingBackendSpec(name="broken", factory=lambda: Broken(8)))

    with (
        registered_plugin(Plugin(), "broken", build_plugin_manager(entry_points=False)) as pm,
        pytest.raises(RuntimeError, match="model file is corrupt"),
    ):
        benchmark(load_beir(dataset), ["dense:broken"], pm.registry, cache_dir=tmp_path)


def test_peers_run_side_by_side_when_installed(dataset, tmp_path):
    pytest.importorskip("rank_bm25")
    pytest.importorskip("bm25s")
    out = tmp_path / "r.json"
    pm = build_plugin_manager(entry_points=False)
    # the default systems include every installed peer
    result = _invoke(pm, "bench", "retrieval", "--dataset", dataset, "--out", out)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    systems = {row["system"]: row for row in report["systems"]}
    assert set(systems) == {"sqlite-fts", "hashing", "rank_bm25", "bm25s"}
    assert report["skipped"] == []
    for name in ("rank_bm25", "bm25s"):
        assert set(systems[name]) >= KEYS | {"stemmed", "qps_vs_rank_bm25"}
        assert systems[name]["ndcg@10"] == pytest.approx(1.0)  # each query's one document first
        assert systems[name]["stemmed"] is (importlib.util.find_spec("Stemmer") is not None)
    assert systems["rank_bm25"]["qps_vs_rank_bm25"] == 1.0
    assert "× rank_bm25" in result.output and "bm25s" in result.output


def test_missing_peers_are_skipped_with_an_install_hint(dataset, tmp_path, monkeypatch):
    real = system_names.installed
    monkeypatch.setattr(
        system_names, "installed", lambda m: False if m in {"bm25s", "rank_bm25"} else real(m)
    )
    pm = build_plugin_manager(entry_points=False)
    result = _invoke(
        pm, "bench", "retrieval", "--dataset", dataset, "--systems", "sqlite-fts,peers"
    )
    assert result.exit_code == 0, result.output
    assert "skipped peer 'bm25s' is not installed: pip install 'kairox[bench]'" in result.output
    report = benchmark(load_beir(dataset), ["peers"], pm.registry, cache_dir=tmp_path)
    assert report["systems"] == []
    assert [s["system"] for s in report["skipped"]] == ["rank_bm25", "bm25s"]
    with pytest.raises(BenchError, match=r"peer 'rank_bm25' is not installed: pip install"):
        benchmark(load_beir(dataset), ["rank_bm25"], pm.registry, cache_dir=tmp_path)


def test_peers_accept_any_query_text():
    pytest.importorskip("rank_bm25")
    pytest.importorskip("bm25s")
    ids = [doc.id for doc in CORPUS]
    texts = [f"{doc.title}\n{doc.text}" for doc in CORPUS]
    for peer in (RankBm25Source("p", ids, texts), Bm25sSource("p", ids, texts)):
        assert [h.id for h in peer.search(Query("Saturn's RINGS", k=5))][:1] == ["astro-1"]
        for odd in ("", "the of", '"(AND)" -:', "zzzunknownword"):
            assert peer.search(Query(odd, k=5)) == []


def test_every_hybrid_variant_runs_with_the_documented_keys(dataset, tmp_path):
    with registered_plugin(
        _hashing_as_minilm(), "fake-minilm", build_plugin_manager(entry_points=False)
    ) as pm:
        report = benchmark(load_beir(dataset), ["hybrids"], pm.registry, cache_dir=tmp_path)
    systems = {row["system"]: row for row in report["systems"]}
    assert (
        set(systems)
        == set(HYBRIDS)
        >= {
            "hybrid",
            "hybrid-rrf",
            "hybrid-wrrf",
            "hybrid-minmax",
            "hybrid-dbsf",
        }
    )
    for row in systems.values():
        assert set(row) >= KEYS
        assert row["ndcg@10"] > 0.5


def test_compare_prints_deltas_with_p_values(dataset, tmp_path):
    pytest.importorskip("scipy")
    pm = build_plugin_manager(entry_points=False)
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    for out in (first, second):
        result = _retrieval(pm, dataset, out, "--no-isolate")
        assert result.exit_code == 0, result.output

    result = _invoke(pm, "bench", "compare", first, "--baseline", "sqlite-fts")
    assert result.exit_code == 0, result.output
    assert "p (t-test)" in result.output and "p (randomization)" in result.output
    rows = json.loads(
        _invoke(pm, "bench", "compare", first, "--baseline", "sqlite-fts", "--json").output
    )
    (row,) = rows
    assert row["system"] == "hashing" and row["queries"] == len(EXPECTED)
    assert row["delta"] == pytest.approx(row["b"] - row["a"])
    assert 0 <= row["p_ttest"] <= 1 and 0 <= row["p_randomization"] <= 1

    same = json.loads(_invoke(pm, "bench", "compare", first, second, "--json").output)
    assert {r["system"] for r in same} == {"sqlite-fts", "hashing"}
    assert all(r["delta"] == 0 and r["p_ttest"] == 1.0 for r in same)

    old = tmp_path / "old.json"
    report = json.loads(first.read_text())
    del report["per_query"]
    old.write_text(json.dumps(report))
    result = _invoke(pm, "bench", "compare", old, second)
    assert result.exit_code != 0 and "no per-query results" in result.output


def test_paired_test_finds_a_real_difference():
    pytest.importorskip("scipy")
    a = [0.1 * (i % 5) for i in range(60)]
    b = [x + 0.2 for x in a]
    t_p, r_p = paired_test(a, [x + 0.01 * ((i % 3) - 1) for i, x in enumerate(b)])
    assert t_p < 0.001 and r_p < 0.001
    assert compare_reports_needs_a_baseline()


def compare_reports_needs_a_baseline():
    report = {"systems": [], "per_query": {"x": {"ndcg@10": {"q": 1.0}}}}
    with pytest.raises(BenchError, match="--baseline"):
        compare(report)
    return True


def test_scaling_runs_every_path_on_a_small_size(tmp_path):
    out = tmp_path / "scaling.json"
    result = _invoke(
        build_plugin_manager(entry_points=False),
        "bench",
        "scaling",
        "--sizes",
        "2k",
        "--queries",
        "5",
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["dim"] == 384 and report["sizes"] == [2000]
    paths = {row["path"]: row for row in report["results"]}
    assert set(paths) == {"floor", "top_k", "VectorSource", "WorkspaceRagIndex"}
    for row in paths.values():
        assert row["vectors"] == 2000 and row["p95_ms"] >= row["p50_ms"] > 0
        assert row["ratio_p50"] > 0 and row["same_results_as_top_k"] is True
    assert paths["floor"]["ratio_p50"] == 1.0


def test_scaling_skips_the_workspace_index_above_its_limit():
    report = scaling_benchmark([1500], dim=16, queries=3, workspace_max=1000)
    assert {row["path"] for row in report["results"]} == {"floor", "top_k", "VectorSource"}
    assert [parse_size(s) for s in ("10k", "1M", "2000", "1.5k")] == [10_000, 1_000_000, 2000, 1500]
    with pytest.raises(ValueError, match="not a size"):
        parse_size("ten")


def test_plots_are_written(dataset, tmp_path):
    pytest.importorskip("matplotlib")
    pm = build_plugin_manager(entry_points=False)
    retrieval_report = tmp_path / "r.json"
    write_report(
        benchmark(load_beir(dataset), ["sqlite-fts", "hashing"], pm.registry, cache_dir=tmp_path),
        retrieval_report,
    )
    scaling_report = tmp_path / "s.json"
    scaling_write(scaling_benchmark([500, 1000], dim=8, queries=3), scaling_report)
    written = plots_main(
        [
            "--retrieval",
            str(retrieval_report),
            "--scaling",
            str(scaling_report),
            "--out-dir",
            str(tmp_path / "png"),
        ]
    )
    assert [p.name for p in written] == [
        "retrieval-quality.png",
        "retrieval-latency.png",
        "dense-scaling.png",
    ]
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- the convex fusion (the composite's default) ------------------------------------------


def _hits(source, ids, scores):
    return [Hit(i, f"text of {i}", s, source) for i, s in zip(ids, scores, strict=True)]


def test_convex_is_the_composite_default_and_weights_by_score_kind(monkeypatch):
    assert DEFAULT_FUSION == "convex" and "rrf" in FUSION_METHODS
    assert KIND_WEIGHTS[ScoreKind.COSINE] == KIND_WEIGHTS[ScoreKind.BM25] == 1.0  # train-tuned
    ranked = {
        "lex": _hits("lex", ["a", "b"], [12.0, 3.0]),
        "vec": _hits("vec", ["b", "a"], [0.9, 0.5]),
    }
    kinds = {"lex": ScoreKind.BM25, "vec": ScoreKind.COSINE}
    # n = 2, so each list's last hit scores 1/2: a = 1 + 0.5, b = 0.5 + 1, a tie by id
    even = fuse(ranked, method="convex", score_kinds=kinds)
    assert [(h.id, h.score) for h in even] == [("a", 1.5), ("b", 1.5)]
    monkeypatch.setitem(KIND_WEIGHTS, ScoreKind.COSINE, 0.8)
    fused = fuse(ranked, method="convex", score_kinds=kinds)
    # a = 1 + 0.8 * 0.5, b = 0.5 + 0.8 * 1
    assert [h.id for h in fused] == ["a", "b"]
    assert [h.score for h in fused] == pytest.approx([1.4, 1.3])
    # a source's own weight multiplies its kind's: the same as the kind weight 0.8 above
    monkeypatch.setitem(KIND_WEIGHTS, ScoreKind.COSINE, 1.0)
    weighted = fuse(ranked, method="convex", score_kinds=kinds, weights={"vec": 0.8})
    assert [h.score for h in weighted] == pytest.approx([1.4, 1.3])


def test_convex_counts_a_last_hit_above_a_missing_one_and_survives_nan():
    ranked = {
        "A": _hits("A", ["x", "y"], [2.0, 1.0]),
        "B": _hits("B", ["y", "z"], [float("nan"), 5.0]),
    }
    fused = fuse(ranked, method="convex")
    # B's scores are unreadable, so its ranks count: y = 0.5 + 1, x = 1, z = 0.5
    assert [(h.id, h.score) for h in fused] == [("y", 1.5), ("x", 1.0), ("z", 0.5)]
    with pytest.raises(ValueError, match="non-finite"):
        fuse(ranked, method="minmax")


def test_search_defaults_to_convex_and_still_offers_rrf():
    root = build_cli(build_plugin_manager(entry_points=False))
    search = root.get_command(click.Context(root), "search")
    option = next(p for p in search.params if p.name == "fusion")
    assert option.default == "convex" and "rrf" in option.type.choices
