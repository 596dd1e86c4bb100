"""``kairox bench tune``: cross-validated, significance-checked, written with comments kept."""

from __future__ import annotations

import json

import pytest

from kairox.bench import BenchError
from kairox.bench.tune import check_folds, ndcg10
from kairox.config.loader import load_config
from kairox.plugin_host.manager import build_plugin_manager
from tests.bench.conftest import corpus_jsonl

# "other" holds the same texts under ids nobody judged; it sorts before "papers", so at
# equal weights its copy of a passage survives fusion and the judged id is lost.
OTHER = """
[knowledge_bases.other]
kind = "sqlite-fts"
path = "other.db"
timeout_ms = 60000
"""


@pytest.fixture
def two_kbs(kb_workspace, invoke):
    with (kb_workspace / "kairox.toml").open("a") as handle:
        handle.write(OTHER)
    jsonl = corpus_jsonl(kb_workspace / "other.jsonl", id_prefix="copy-")
    assert invoke("kb", "ingest", "other", jsonl).exit_code == 0
    return kb_workspace


def tune_json(invoke, *args):
    result = invoke("bench", "tune", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_significant_gain_is_recommended_and_written_keeping_comments(two_kbs, invoke, tiny_beir):
    report = tune_json(
        invoke, "--profile", "default", "--dataset", tiny_beir, "--split", "test", "--write"
    )
    assert report["queries"] == 24 and report["folds"] == 5
    assert report["sources"] == ["papers", "other"]
    cv = report["cross_validated"]
    assert cv["tuned_ndcg@10"] > cv["current_ndcg@10"] + 0.3
    assert cv["p_randomization"] < 0.05 and report["refused"] is None
    weights = report["recommended"]["weights"]
    assert weights["papers"] > weights["other"]
    text = (two_kbs / "kairox.toml").read_text()
    assert "# the benchmark's workspace: comments must survive" in text
    assert 'path = "papers.db"   # the corpus' in text
    config = load_config(cwd=two_kbs, registry=build_plugin_manager().registry)
    assert config.knowledge_bases["papers"].config.weight == weights["papers"]
    # the weights written are what the benchmark now measures through the facade
    result = invoke(
        "bench",
        "retrieval",
        "--no-isolate",
        "--json",
        "--dataset",
        tiny_beir,
        "--profile",
        "default",
    )
    assert result.exit_code == 0, result.output
    measured = json.loads(result.stdout)["systems"][0]["ndcg@10"]
    if report["recommended"]["fusion"] == "convex":
        assert measured == pytest.approx(report["best"]["ndcg@10"])


def test_no_change_when_nothing_beats_the_current_configuration(kb_workspace, invoke, tiny_beir):
    before = (kb_workspace / "kairox.toml").read_text()
    report = tune_json(
        invoke, "--profile", "default", "--dataset", tiny_beir, "--split", "test", "--write"
    )
    assert report["recommended"] is None and report["refused"]
    assert (kb_workspace / "kairox.toml").read_text() == before


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--folds", "1"], "at least 2 folds"),
        (["--folds", "30"], "more than the 24 queries"),
    ],
)
def test_useless_cross_validations_are_refused_with_the_reason(
    kb_workspace, invoke, tiny_beir, args, reason
):
    result = invoke("bench", "tune", "--dataset", tiny_beir, "--split", "test", *args)
    assert result.exit_code == 2
    assert reason in " ".join(result.output.split())


def test_too_few_queries_are_refused(kb_workspace, invoke, tmp_path):
    queries = tmp_path / "q.jsonl"
    queries.write_text(
        "".join(json.dumps({"id": f"q{i}", "text": "saturn"}) + "\n" for i in range(5))
    )
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("".join(f"q{i}\tastro-1\t1\n" for i in range(5)))
    result = invoke("bench", "tune", "--queries", queries, "--qrels", qrels)
    assert result.exit_code == 2
    assert "only 5 judged queries: tuning needs at least 20" in " ".join(result.output.split())


def test_check_folds_and_ndcg_agree_with_ir_measures():
    with pytest.raises(BenchError, match="2 folds"):
        check_folds(1, 100)
    ir_measures = pytest.importorskip("ir_measures")
    judged = {"a": 2, "b": 1, "c": 0, "z": 1}
    ranked = ["c", "b", "x", "a"]
    qrels = [ir_measures.Qrel("q", d, g) for d, g in judged.items()]
    run = [ir_measures.ScoredDoc("q", d, 10.0 - i) for i, d in enumerate(ranked)]
    expected = ir_measures.calc_aggregate([ir_measures.nDCG @ 10], qrels, run)
    assert ndcg10(ranked, judged) == pytest.approx(next(iter(expected.values())))
