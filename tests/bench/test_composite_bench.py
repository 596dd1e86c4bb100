"""``kairox bench composite`` on small sizes: report keys and fault reports, never timings."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kairox.bench.composite import CPUS, fan_out_bound, faults
from kairox.bench.synthetic_sources import FailingSource, HangingSource
from kairox.cli import bench_session_cmd
from kairox.retrieval import Query
from kairox.retrieval.composite import CompositeWorkspaceRetriever
from tests.bench.conftest import command_cli

STATS = {"p50", "p95"}
ROW_KEYS = {
    "scenario",
    "sources",
    "path",
    "queries",
    "slowest_source_ms",
    "sources_in_sequence_ms",
    "composite_ms",
    "overhead_ms",
    "sources_cpu_ms",
    "composite_cpu_ms",
    "cpu_floor_ms",
    "not_ok_reports",
}


def test_cli_writes_every_row_and_the_fault_report(pm, tmp_path):
    out = tmp_path / "composite.json"
    args = ["composite", "--sources", "1,2", "--queries", "3", "--documents", "40"]
    args += ["--delay-ms", "1", "--deadline-ms", "100", "--fault-queries", "2", "--out", str(out)]
    result = CliRunner().invoke(command_cli(bench_session_cmd.composite, pm), args)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert {"fan_out", "faults", "machine", "created", "kind"} <= set(report)

    rows = report["fan_out"]
    cells = {(row["scenario"], row["sources"], row["path"]) for row in rows}
    assert cells == {
        (scenario, n, path)
        for scenario in ("sqlite-fts", "sleep-async", "sleep-thread")
        for n in (1, 2)
        for path in ("sync", "async")
    }
    for row in rows:
        assert set(row) >= ROW_KEYS
        for key in ("slowest_source_ms", "composite_ms", "overhead_ms", "cpu_floor_ms"):
            assert set(row[key]) >= STATS
        # The floor is the sources' CPU time spread over every core of the machine.
        floor, cpu = row["cpu_floor_ms"]["p50"], row["sources_cpu_ms"]["p50"]
        assert floor == pytest.approx(cpu / CPUS, abs=0.002)
        if row["scenario"] == "sqlite-fts":
            assert cpu > 0 and row["composite_cpu_ms"]["p50"] > 0  # real searches compute
        assert row["queries"] == 3
        assert row["not_ok_reports"] == 0  # the fan-out deadline is far away
        assert row["bound_ms"] == pytest.approx(
            fan_out_bound(row, computes=row["scenario"] == "sqlite-fts")["bound_ms"]
        )
        assert row["within_bound"] is (row["composite_ms"]["p50"] <= row["bound_ms"])

    fault = report["faults"]
    assert fault["statuses"]["slow"] == {"timeout": 2}
    assert fault["statuses"]["failing"] == {"error": 2}
    assert fault["statuses"]["kb-0"] == fault["statuses"]["kb-1"] == {"ok": 2}
    assert fault["errors"]["slow"] == "no answer within 100 ms"
    assert "simulated failure" in fault["errors"]["failing"]
    assert fault["hits_from"] == ["kb-0", "kb-1"]  # the healthy sources' hits came back
    assert fault["hits_per_query"]["min"] > 0
    assert "overhead p50" in result.output and "CPU floor p50" in result.output
    assert "bound" in result.output


def _row(slowest: float, floor: float, composite: float) -> dict:
    return {
        "slowest_source_ms": {"p50": slowest},
        "cpu_floor_ms": {"p50": floor},
        "composite_ms": {"p50": composite},
    }


def test_the_bound_of_computing_sources_is_never_below_the_cpu_floor():
    # 8 sources of 0.8 ms that need 2.7 ms of the 2 cores: 1.2 x 0.8 would ask the impossible.
    bound = fan_out_bound(_row(0.8, 2.7, 4.0), computes=True)
    assert bound["bound_ms"] == pytest.approx(2.7 + 2)
    assert bound["within_bound"] is True
    assert bound["bound_rule"] == "max(1.2 x slowest, CPU floor) + 2 ms"
    # Where the slowest source dominates, the floor changes nothing.
    assert fan_out_bound(_row(10, 1, 13), computes=True)["bound_ms"] == pytest.approx(14)


def test_the_bound_of_waiting_sources_ignores_the_cpu_floor():
    bound = fan_out_bound(_row(10, 20, 15), computes=False)
    assert bound["bound_ms"] == pytest.approx(14)
    assert bound["within_bound"] is False
    assert bound["sources_compute"] is False


def test_json_flag_prints_the_report(pm):
    args = ["composite", "--sources", "1", "--queries", "1", "--documents", "20"]
    args += ["--scenarios", "sleep-async", "--delay-ms", "1", "--fault-queries", "1"]
    args += ["--deadline-ms", "50", "--json"]
    result = CliRunner().invoke(command_cli(bench_session_cmd.composite, pm), args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [row["scenario"] for row in report["fan_out"]] == ["sleep-async", "sleep-async"]


def test_unknown_kind_is_a_usage_error(pm):
    result = CliRunner().invoke(
        command_cli(bench_session_cmd.composite, pm),
        ["composite", "--kind", "nope", "--queries", "1"],
    )
    assert result.exit_code == 2
    assert "'nope' is not installed" in result.output


def test_bad_source_counts_are_a_usage_error(pm):
    result = CliRunner().invoke(
        command_cli(bench_session_cmd.composite, pm), ["composite", "--sources", "1,two"]
    )
    assert result.exit_code == 2
    assert "--sources" in result.output


def test_faults_release_the_hanging_threads(pm, tmp_path):
    report = faults(
        pm.registry, healthy=1, deadline_ms=50, hang_s=30, queries=1, documents=20, scratch=tmp_path
    )
    assert report["statuses"]["slow"] == {"timeout": 1}
    assert report["sources"] == ["kb-0", "slow", "failing"]


def test_the_synthetic_sources_report_as_documented():
    slow = HangingSource("slow", block_s=30)
    composite = CompositeWorkspaceRetriever(
        [slow, FailingSource("failing")], timeouts_ms={"slow": 50}
    )
    try:
        result = composite.retrieve_sync(Query("anything"))
    finally:
        slow.release()
    assert [(r.source, str(r.status)) for r in result.reports] == [
        ("slow", "timeout"),
        ("failing", "error"),
    ]
    assert result.hits == []
