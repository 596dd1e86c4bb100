"""``kairox bench report``: one offline HTML page (plots inline) plus PNGs beside it."""

from __future__ import annotations

import re

import pytest

from kairox.bench.html_report import wins_and_losses

pytest.importorskip("matplotlib")


def bench_run(invoke, out, *args):
    result = invoke("bench", "retrieval", "--no-isolate", "--out", out, *args)
    assert result.exit_code == 0, result.output
    return out


def test_the_page_is_self_contained_and_shows_every_part(kb_workspace, invoke, tiny_beir, tmp_path):
    first = bench_run(
        invoke, tmp_path / "a.json", "--dataset", tiny_beir, "--systems", "sqlite-fts,hashing"
    )
    second = bench_run(
        invoke,
        tmp_path / "b.json",
        "--dataset",
        tiny_beir,
        "--profile",
        "default",
        "--systems",
        "sqlite-fts,hashing",
    )
    page = tmp_path / "out" / "report.html"
    result = invoke("bench", "report", first, second, "--out", page)
    assert result.exit_code == 0, result.output
    html = page.read_text()
    # nothing fetched from anywhere: no script, no external stylesheet, images inline
    assert "<script" not in html and "<link" not in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert html.count('src="data:image/png;base64,') == 2
    assert (page.parent / "report-quality.png").stat().st_size > 1000
    assert (page.parent / "report-latency.png").stat().st_size > 1000
    for heading in ("Systems", "Per-query wins and losses", "contribution to the fused top 10"):
        assert heading in html
    assert "b: profile:default" in html and "hashing: b vs a" in html


def test_one_run_compares_each_system_with_the_first(kb_workspace, invoke, tiny_beir, tmp_path):
    run = bench_run(
        invoke, tmp_path / "a.json", "--dataset", tiny_beir, "--systems", "sqlite-fts,hashing"
    )
    page = tmp_path / "report.html"
    assert invoke("bench", "report", run, "--out", page).exit_code == 0
    assert "hashing vs sqlite-fts" in page.read_text()


def test_a_file_that_is_not_a_run_is_refused(tmp_path, invoke):
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    result = invoke("bench", "report", bad, "--out", tmp_path / "r.html")
    assert result.exit_code == 1 and "not a `kairox bench retrieval --out` report" in result.output


def test_wins_and_losses_count_and_order_by_size():
    left = {"a": 0.5, "b": 0.5, "c": 0.5, "d": 0.2}
    right = {"a": 0.9, "b": 0.6, "c": 0.1, "d": 0.2}
    found = wins_and_losses(left, right)
    assert (found["wins"], found["losses"], found["ties"]) == (2, 1, 1)
    assert [q for q, _, _ in found["top_wins"]] == ["a", "b"]
    assert found["top_losses"] == [("c", 0.5, 0.1)]
