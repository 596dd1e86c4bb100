"""``kairox bench compaction`` on short sessions: keys, value ranges, and what the design
guarantees (an extractive summary keeps early decisions a sliding window has dropped)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kairox.bench.compaction import FACTS, benchmark, make_script
from kairox.bench.compaction_scenarios import DOMAINS, make_scenario
from kairox.cli import bench_session_cmd
from kairox.testing.openai_server import OpenAITestServer
from tests.bench.conftest import command_cli

ROW_KEYS = {
    "summarizer",
    "window",
    "status",
    "compactions",
    "retention_final",
    "retention_mean",
    "retention_min",
    "question_recall",
    "fallbacks",
    "sessions",
}


def in_unit_range(value):
    return value is None or 0.0 <= value <= 1.0


def test_cli_reports_every_summarizer_and_window(pm, tmp_path):
    out = tmp_path / "compaction.json"
    args = ["compaction", "--windows", "2048,4096", "--turns", "30", "--sessions", "1"]
    args += ["--scenario-turns", "30"]
    result = CliRunner().invoke(
        command_cli(bench_session_cmd.compaction, pm), [*args, "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert {"results", "facts", "turns", "sessions", "machine", "created"} <= set(report)
    rows = {(r["summarizer"], r["window"]): r for r in report["results"]}
    assert set(rows) == {
        (s, w) for s in ("extractive", "sliding-window", "llm") for w in (2048, 4096)
    }
    for (summarizer, _), row in rows.items():
        if summarizer == "llm":
            assert row["status"] == "not run"
            assert "no model backend configured" in row["reason"]
            continue
        assert set(row) >= ROW_KEYS
        assert row["status"] == "ok" and row["fallbacks"] == 0
        assert row["compactions"] >= 1
        for key in ("retention_final", "retention_mean", "retention_min", "question_recall"):
            assert in_unit_range(row[key]), (key, row[key])
        for session in row["sessions"]:
            for compaction in session["compactions"]:
                assert 0 <= compaction["present"] <= compaction["planted"] <= len(FACTS)
                assert in_unit_range(compaction["retention"])
                assert compaction["summarizer"] == summarizer
    assert "not run: no model backend configured" in result.output


def test_extractive_keeps_more_early_facts_than_the_sliding_window(pm):
    report = benchmark(
        pm.registry, pm, summarizers=["extractive", "sliding-window"], windows=[4096], turns=40,
        sessions=1,
    )  # fmt: skip
    rows = {row["summarizer"]: row for row in report["results"]}
    assert rows["extractive"]["compactions"] >= 1
    assert rows["extractive"]["retention_final"] > rows["sliding-window"]["retention_final"]
    assert rows["extractive"]["question_recall"] > rows["sliding-window"]["question_recall"]


def test_script_plants_early_and_asks_late_without_giving_answers_away():
    script = make_script(30, seed=3)
    assert len(script.prompts) == len(script.replies) == 30
    assert max(script.planted_at) < 10 < min(script.asked_at)
    planted = [fact for batch in script.planted_at.values() for fact in batch]
    assert sorted(f.value for f in planted) == sorted(f.value for f in FACTS)
    for index, fact in script.asked_at.items():
        assert fact.value not in script.prompts[index]
    with pytest.raises(ValueError, match="at least"):
        make_script(10)


def test_llm_runs_when_a_profile_has_a_real_backend(pm, workspace, monkeypatch):
    """Summaries go to the profile's model (here a loopback OpenAI-compatible server);
    the conversation itself stays scripted."""
    summary = "## Goal\n- plan the move\n## Decisions and constraints\n" + "\n".join(
        f"- {fact.statement}" for fact in FACTS
    )
    monkeypatch.setenv("BENCH_KEY", "sk-bench")
    with OpenAITestServer([summary], api_key="sk-bench") as server:
        (workspace / "kairox.toml").write_text(
            f'[profiles.real]\nmodel = "test-model"\nbackend = "openai-compatible"\n'
            f'base_url = "{server.base_url}"\napi_key_env = "BENCH_KEY"\n'
        )
        args = ["compaction", "--summarizers", "llm", "--windows", "4096", "--turns", "30"]
        args += ["--scenario-turns", "30"]
        result = CliRunner().invoke(
            command_cli(bench_session_cmd.compaction, pm),
            [*args, "--sessions", "1", "--profile", "real", "--json"],
        )
        requests = len(server.chat_requests)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    row = report["results"][0]
    assert row["status"] == "ok" and row["fallbacks"] == 0
    assert row["model"] == "openai-compatible:test-model"
    summaries = [c for s in row["sessions"] for c in s["compactions"]]
    assert summaries and all(c["summarizer"] == "llm" for c in summaries)
    calls = sum(len(s["summary_ms"]) for r in [row, *report["scenarios"]] for s in r["sessions"])
    assert requests == calls  # one model call per compaction, nothing else
    # Every fact was in the model's summary, so every fact survived.
    assert row["retention_final"] == row["question_recall"] == 1.0


def test_a_scripted_profile_does_not_count_as_a_model(pm, workspace):
    (workspace / "kairox.toml").write_text('[profiles.demo]\nmodel = "m"\nbackend = "scripted"\n')
    args = ["compaction", "--summarizers", "llm", "--windows", "2048", "--profile", "demo"]
    result = CliRunner().invoke(command_cli(bench_session_cmd.compaction, pm), [*args, "--json"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)["results"][0]
    assert row["status"] == "not run" and "scripted backend" in row["reason"]


def test_unknown_summarizer_is_a_usage_error(pm):
    result = CliRunner().invoke(
        command_cli(bench_session_cmd.compaction, pm), ["compaction", "--summarizers", "magic"]
    )
    assert result.exit_code == 2
    assert "unknown summarizers" in result.output


def test_scenarios_count_newest_values_and_catch_stale_ones(pm):
    report = benchmark(
        pm.registry, pm, summarizers=["extractive", "sliding-window"], windows=[2048], turns=30,
        sessions=1, scenario_turns=40,
    )  # fmt: skip
    rows = {(r["scenario"], r["summarizer"]): r for r in report["scenarios"]}
    assert set(rows) == {(d.name, s) for d in DOMAINS for s in ("extractive", "sliding-window")}
    for domain in DOMAINS:
        kept, window = rows[(domain.name, "extractive")], rows[(domain.name, "sliding-window")]
        assert kept["compactions"] >= 2
        assert kept["stale_shown"] == 0  # no superseded value ever in a summary
        assert kept["corrections_kept"] == 1.0
        assert kept["retention_final"] > window["retention_final"]
        for row in (kept, window):
            assert row["within_budget"] and 0 < row["budget_use_max"] <= 1
            assert row["summary_ms_median"] is not None
    for row in report["results"]:
        assert row["within_budget"]


def test_scenario_plants_corrects_and_asks_without_giving_answers_away():
    for domain in DOMAINS:
        script = make_scenario(domain, 40, seed=2)
        assert len(script.prompts) == len(script.replies) == 40
        planted = max(script.planted_at)
        assert planted < min(script.corrected_at) < max(script.corrected_at) < min(script.asked_at)
        corrected = [f for batch in script.corrected_at.values() for f in batch]
        assert corrected and all(f.corrected for f in corrected)
        assert {f.source for f in domain.facts} == {"user", "assistant", "tool"}
        facts = [f for batch in script.planted_at.values() for f in batch]
        for index, text in enumerate([*script.prompts, *script.replies]):
            for fact in facts:
                if fact.value in text or (fact.corrected and fact.corrected in text):
                    said = fact.statement in text or index in script.corrected_at
                    assert said, (fact.key, text)
        for index, fact in script.asked_at.items():
            assert fact.value not in script.prompts[index]
    with pytest.raises(ValueError, match="too few"):
        make_scenario(DOMAINS[0], 10)
