"""Piped, ``kairox bench retrieval`` prints plain progress lines, from its isolated runs too."""

from __future__ import annotations

from kairox.testing import CORPUS, EXPECTED, processes


def test_piped_bench_prints_plain_progress_from_its_isolated_run(dataset, tmp_path):
    result = processes.kairox_process(
        "bench",
        "retrieval",
        "--dataset",
        str(dataset),
        "--systems",
        "sqlite-fts",
        "--isolate",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    # the forked child's progress reaches the log: each task's first and final line
    assert f"indexing sqlite-fts: {len(CORPUS)}/{len(CORPUS)} · " in result.stderr, result.stderr
    queries = len(EXPECTED)  # only judged queries are asked
    assert f"querying sqlite-fts: {queries}/{queries} · " in result.stderr, result.stderr
    assert "\x1b[" not in result.stderr
