"""``kairox bench context`` on small sizes: report keys and what the token cache guarantees."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from kairox.bench.context import make_history, make_memories, measure
from kairox.cli import bench_session_cmd
from tests.bench.conftest import command_cli

ROW_KEYS = {
    "history_turns",
    "memories",
    "cache",
    "p50_ms",
    "p95_ms",
    "cache_misses",
    "turns_in_prompt",
    "used_tokens",
}


def cli() -> click.Group:
    return command_cli(bench_session_cmd.context)


def test_cli_reports_every_cell(tmp_path):
    out = tmp_path / "context.json"
    args = ["context", "--turns", "5,40", "--memories", "0,20", "--repeats", "2", "--out", str(out)]
    result = CliRunner().invoke(cli(), args)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert {"rows", "budget", "encoding", "machine", "created"} <= set(report)
    rows = report["rows"]
    assert {(r["history_turns"], r["memories"], r["cache"]) for r in rows} == {
        (turns, memories, cache)
        for turns in (5, 40)
        for memories in (0, 20)
        for cache in ("warm", "cold")
    }
    for row in rows:
        assert set(row) >= ROW_KEYS
        assert row["used_tokens"] <= report["budget"]
        assert row["turns_in_prompt"] == row["history_turns"]  # all fit in 128k


def test_a_warm_turn_counts_only_its_new_text():
    """With the cache warm, what is tokenised per turn does not grow with the history."""
    history = make_history(303)
    memories = make_memories(30)
    warm = [
        measure(history, memories, turns=n, mode="warm", repeats=3)["cache_misses"]
        for n in (10, 100, 300)
    ]
    cold = [
        measure(history, memories, turns=n, mode="cold", repeats=3)["cache_misses"]
        for n in (10, 100, 300)
    ]
    assert len(set(warm)) == 1  # the new turn's messages and the new prompt, whatever n is
    assert cold == sorted(cold) and cold[-1] > cold[0]  # cold recounts every turn that fits
    assert warm[0] < cold[0]


def test_turns_beyond_the_window_are_dropped():
    history = make_history(60)
    row = measure(history, [], turns=50, mode="cold", repeats=1, context_window=2000, headroom=200)
    assert 0 < row["turns_in_prompt"] < 50
    assert row["used_tokens"] <= 1800


def test_measure_needs_enough_history():
    with pytest.raises(ValueError, match="need 12 turns"):
        measure(make_history(5), [], turns=10, mode="warm", repeats=2)


def test_profile_sets_the_window(workspace):
    (workspace / "kairox.toml").write_text(
        '[profiles.small]\nmodel = "m"\nbackend = "scripted"\ncontext_window = 3000\n'
        "headroom = 500\n"
    )
    args = ["context", "--turns", "5", "--memories", "0", "--repeats", "1", "--profile", "small"]
    result = CliRunner().invoke(cli(), [*args, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["context_window"], report["headroom"], report["budget"]) == (3000, 500, 2500)
