"""``kairox bench retrieval --profile``, ``kb:ID`` and ``kind:NAME`` next to the built-ins."""

from __future__ import annotations

import importlib.util
import json

import pytest

from kairox.testing import CORPUS


def run_json(invoke, *args):
    result = invoke("bench", "retrieval", "--no-isolate", "--json", *args)
    printed = result.stdout.lstrip().startswith("{")
    return result, (json.loads(result.stdout) if printed else None)


def test_profile_and_kb_equal_the_same_index_built_by_the_benchmark(
    kb_workspace, invoke, tiny_beir
):
    result, report = run_json(
        invoke,
        "--dataset",
        tiny_beir,
        "--profile",
        "default",
        "--systems",
        "sqlite-fts,kind:sqlite-fts,kb:papers",
    )
    assert result.exit_code == 0, result.output
    names = [row["system"] for row in report["systems"]]
    assert names == ["profile:default", "sqlite-fts", "kind:sqlite-fts", "kb:papers"]
    per_query = report["per_query"]
    reference = per_query["sqlite-fts"]["ndcg@10"]
    assert len(reference) == 24 and sum(reference.values()) > 20
    for name in names[1:]:
        assert per_query[name]["ndcg@10"] == reference
    # the facade reports which source answered, and every top-10 hit came from papers
    profile = report["systems"][0]
    assert profile["sources"] == ["papers"] and "failures" not in profile
    assert (
        profile["contributions"]["papers"]["only"] == profile["contributions"]["papers"]["in_top"]
    )
    assert len(report["latencies_ms"]["profile:default"]) == 24


@pytest.mark.skipif(importlib.util.find_spec("kairox_tantivy") is None, reason="needs tantivy")
def test_kind_tantivy_equals_the_built_in_tantivy(workspace, invoke, tiny_beir):
    result, report = run_json(
        invoke,
        "--dataset",
        tiny_beir,
        "--systems",
        "tantivy,kind:tantivy",
        "--kind-config",
        'tantivy={"title_boost": 0.5}',
    )
    assert result.exit_code == 0, result.output
    assert report["per_query"]["kind:tantivy"] == report["per_query"]["tantivy"]


def test_kind_config_reaches_the_kind_and_bad_settings_say_which(
    workspace, invoke, tiny_beir, tmp_path
):
    def with_settings(setting: str):
        systems = ("--systems", "kind:sqlite-fts")
        return run_json(invoke, "--dataset", tiny_beir, *systems, "--kind-config", setting)

    chosen = tmp_path / "chosen.db"
    result, report = with_settings(json.dumps({"path": str(chosen)}).join(["sqlite-fts=", ""]))
    assert result.exit_code == 0, result.output
    assert chosen.is_file() and report["systems"][0]["ndcg@10"] > 0.8
    result, _ = with_settings('sqlite-fts={"title_weight": -1}')
    assert result.exit_code == 1 and "title_weight" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--systems", "sqlite-ftz"], "did you mean 'sqlite-fts'"),
        (["--systems", "kind:sqlite-ftz"], "did you mean 'sqlite-fts'"),
        (["--systems", "kb:paperz"], "did you mean 'papers'"),
        (["--profile", "defualt"], "did you mean 'default'"),
        (["--profile", "default", "--kb", "nope"], "searches no such knowledge base"),
    ],
)
def test_unknown_names_exit_2_with_a_did_you_mean(kb_workspace, invoke, tiny_beir, args, message):
    result = invoke("bench", "retrieval", "--dataset", tiny_beir, "--no-isolate", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_ids_that_do_not_match_stop_with_a_clear_error(workspace, invoke, tiny_beir):
    from tests.bench.conftest import KB_TOML, corpus_jsonl

    (workspace / "kairox.toml").write_text(KB_TOML)
    jsonl = corpus_jsonl(workspace / "corpus.jsonl", id_prefix="doc-")
    assert invoke("kb", "ingest", "papers", jsonl).exit_code == 0
    result = invoke(
        "bench", "retrieval", "--no-isolate", "--dataset", tiny_beir, "--profile", "default"
    )
    assert result.exit_code == 1
    flat = " ".join(result.output.split())
    judged = len(CORPUS) - 0  # every judged document is one of the corpus's
    assert "0 of " in flat and "judged documents exist in knowledge base 'papers'" in flat
    assert "do the ids match? ids look like 'doc-" in flat
    assert judged > 0


def test_your_queries_and_qrels_without_a_beir_folder(kb_workspace, invoke, tmp_path):
    queries = tmp_path / "q.tsv"
    queries.write_text("id\ttext\nmine-1\tsaturn rings ice\nmine-2\tespresso coffee beans\n")
    qrels = tmp_path / "qrels.trec"
    qrels.write_text("mine-1 0 astro-1 2\nmine-2 0 cook-2 1\nmine-2 0 cook-1 0\n")
    result, report = run_json(
        invoke, "--profile", "default", "--queries", queries, "--qrels", qrels
    )
    assert result.exit_code == 0, result.output
    assert report["queries"] == 2
    assert report["systems"][0]["ndcg@10"] == pytest.approx(1.0)
    assert report["documents"] is None and report["judged_documents"] == 2
    # the header says what was judged, not "0 documents" (no corpus was loaded)
    shown = invoke(
        "bench",
        "retrieval",
        "--no-isolate",
        "--profile",
        "default",
        "--queries",
        queries,
        "--qrels",
        qrels,
    )
    assert shown.exit_code == 0, shown.output
    assert "2 judged documents in your sources · 2 queries" in shown.output
    assert "0 documents" not in shown.output
    # built-in systems need a corpus to build on
    result = invoke(
        "bench", "retrieval", "--systems", "sqlite-fts", "--queries", queries, "--qrels", qrels
    )
    assert result.exit_code == 2 and "--dataset" in result.output


def test_a_source_failing_is_counted_per_query_and_exits_1(kb_workspace, invoke, tiny_beir):
    # a second knowledge base whose index file does not exist: it errors on every query
    with (kb_workspace / "kairox.toml").open("a") as handle:
        handle.write('\n[knowledge_bases.broken]\nkind = "sqlite-fts"\npath = "missing.db"\n')
    result = invoke(
        "bench", "retrieval", "--no-isolate", "--dataset", tiny_beir, "--profile", "default"
    )
    assert result.exit_code == 1
    flat = " ".join(result.output.split())
    assert "source broken did not answer 24 of 24 queries" in flat
    assert "does not exist" in flat
