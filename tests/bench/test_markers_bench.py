"""``kairox bench markers`` on a small stream: report keys and chunk-independent output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
from click.testing import CliRunner

from kairox.bench.markers import BASELINE, make_stream
from kairox.bench.report import percentile
from kairox.cli import bench_session_cmd
from kairox.memory import extract_memory_markers
from tests.bench.conftest import command_cli

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "markers_throughput.py"


def cli() -> click.Group:
    return command_cli(bench_session_cmd.markers)


def test_cli_reports_each_chunk_size(tmp_path):
    out = tmp_path / "markers.json"
    args = ["markers", "--megabytes", "0.02", "--repeats", "1", "--out", str(out)]
    result = CliRunner().invoke(cli(), args)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert {"stream_bytes", "re_sub_seconds", "chunks", "machine", "created"} <= set(report)
    assert report["stream_bytes"] <= 20_000
    assert [row["chunk_bytes"] for row in report["chunks"]] == [1, 64, 4096]
    for row in report["chunks"]:
        assert {"seconds", "mb_per_s", "ratio_to_re_sub", "visible_chars"} <= set(row)
    # The extractor's output does not depend on where the chunks are cut.
    text = make_stream(20_000)
    visible = len(extract_memory_markers(text).visible)
    assert {row["visible_chars"] for row in report["chunks"]} == {visible}
    # re.sub strips the marker inside the code fence too; the extractor leaves it visible.
    assert report["re_sub_visible_chars"] == len(BASELINE.sub("", text)) < visible


def test_custom_chunks_and_json(tmp_path):
    args = ["markers", "--megabytes", "0.01", "--repeats", "1", "--chunks", "7,100", "--json"]
    result = CliRunner().invoke(cli(), args)
    assert result.exit_code == 0, result.output
    assert [row["chunk_bytes"] for row in json.loads(result.stdout)["chunks"]] == [7, 100]


def test_bad_chunks_are_a_usage_error():
    result = CliRunner().invoke(cli(), ["markers", "--chunks", "0", "--megabytes", "0.01"])
    assert result.exit_code == 2
    assert "chunk sizes must be >= 1" in result.output


def test_stream_is_cut_to_whole_characters():
    text = make_stream(5_000)
    assert len(text.encode("utf-8")) <= 5_000
    assert "<memory" in text


def test_percentile_interpolates():
    assert percentile([], 50) == 0.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([0.0, 10.0], 95) == 9.5


def test_the_old_script_still_runs(tmp_path):
    out = tmp_path / "script.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--megabytes", "0.01", "--repeats", "1", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text())["benchmark"] == "markers_throughput"
