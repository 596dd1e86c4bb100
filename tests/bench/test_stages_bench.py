"""``SYSTEM+rerank:NAME`` in ``kairox bench retrieval``: the reranker runs on the system's
candidates through the same stage runner a profile's search uses."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kairox.bench.stages import StageSpecError, split_staged
from kairox.cli import build_cli
from kairox.plugin_host.manager import build_plugin_manager


def bench(dataset, systems: str, tmp_path):
    out = tmp_path / "results.json"
    result = CliRunner().invoke(
        build_cli(build_plugin_manager(entry_points=False)),
        ["bench", "retrieval", "--dataset", str(dataset), "--systems", systems, "--out", str(out)],
    )
    return result, (json.loads(out.read_text()) if out.exists() else None)


def test_a_reranked_system_runs_next_to_its_base(dataset, tmp_path):
    result, report = bench(dataset, "sqlite-fts,sqlite-fts+rerank:mmr", tmp_path)
    assert result.exit_code == 0, result.output
    rows = {row["system"]: row for row in report["systems"]}
    assert set(rows) == {"sqlite-fts", "sqlite-fts+rerank:mmr"}
    # mmr keeps the most relevant hit first: the one judged document per query stays on top
    assert rows["sqlite-fts+rerank:mmr"]["mrr@10"] == pytest.approx(rows["sqlite-fts"]["mrr@10"])


def test_an_unknown_stage_is_refused_with_what_is_installed(dataset, tmp_path):
    result, _ = bench(dataset, "sqlite-fts+rerank:nope", tmp_path)
    assert result.exit_code != 0
    assert "no reranker named 'nope'; installed: llm, mmr" in result.output


@pytest.mark.parametrize("name", ["hybrid+mmr", "hybrid+rerank:", "x+rerank:a+rerank:b"])
def test_malformed_stage_suffixes_say_how_to_write_them(name):
    with pytest.raises(StageSpecError, match="rerank"):
        split_staged(name)


def test_split_staged_reads_both_stages():
    assert split_staged("hybrid+transform:hyde+rerank:mmr") == (
        "hybrid",
        [("transform", "hyde"), ("rerank", "mmr")],
    )
