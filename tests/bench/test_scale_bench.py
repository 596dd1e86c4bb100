"""``kairox bench scale``: synthetic corpora, child-process ingests, interleaved searches."""

from __future__ import annotations

import json
import os
import sys

import pytest
from click.testing import CliRunner

from kairox.bench import BenchError
from kairox.bench.scale import python_module, run_child
from kairox.bench.scale_corpus import source_passages, write_corpus
from kairox.cli.bench_scale_cmd import scale
from kairox.retrieval.ann_ivf import probes_for
from tests.bench.conftest import command_cli


def test_a_synthetic_corpus_repeats_the_source_with_every_passage_distinct(dataset, tmp_path):
    source = source_passages(dataset)
    size = 3 * len(source) + 2
    out = tmp_path / "corpus.jsonl"
    text_bytes = write_corpus(source, size, out)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == size
    assert len({r["id"] for r in records}) == size
    assert len({(r["title"], r["text"]) for r in records}) == size
    # The first round is the source itself.
    assert [(r["title"], r["text"]) for r in records[: len(source)]] == [
        (title, text) for _, title, text in source
    ]
    assert text_bytes == sum(len(r["title"].encode()) + len(r["text"].encode()) for r in records)


def test_scale_reports_each_system_at_each_size_with_a_plot(dataset, tmp_path):
    pytest.importorskip("bm25s")
    pytest.importorskip("matplotlib")
    out, plot = tmp_path / "scale.json", tmp_path / "scale.png"
    args = ["--source", dataset, "--sizes", "30,120", "--queries", 3, "--vectors"]
    args += ["--out", out, "--plot", plot, "--scratch", tmp_path]
    result = CliRunner().invoke(command_cli(scale), ["scale", *map(str, args)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    rows = {(r["passages"], r["system"]): r for r in report["results"]}
    systems = ("bm25s", "kb, words", "kb, words + hashing")
    assert set(rows) == {(n, s) for n in (30, 120) for s in systems}
    for (size, system), row in rows.items():
        assert row["peak_rss_mb"] > 0 and row["ingest_cpu_s"] > 0 and row["disk_bytes"] > 0
        assert row["search_p50_ms"] > 0
        if system != "bm25s":
            assert row["written"] == size and row["bm25s_p50_ms"] > 0
    # The approximate index is measured against exact search on the hashing vectors
    # (passages and their sentences: every vector of the pack).
    ann = rows[120, "kb, words + hashing"]
    assert ann["ann_passages"] == 120 and ann["ann_vectors"] >= 120
    assert ann["ann_recall@10"] >= 0.98
    # ... and with twice the candidates rescored, what a wider rescoring would buy.
    assert ann["ann_wide_candidates"] == 2 * ann["ann_candidates"]
    assert ann["ann_wide_recall@10"] >= ann["ann_recall@10"]  # a superset rescored
    assert ann["ann_wide_p50_ms"] > 0
    # A passage tying the k-th exact score counts as found, so that recall is no lower.
    assert 1 >= ann["ann_recall_ties@10"] >= ann["ann_recall@10"]
    assert ann["ann_mb"] == round(ann["ann_vectors"] * 384 / 2**20, 1)  # int8: a byte a number
    # The partition as shipped probes what the rule gives for its clusters.
    assert ann["ivf_probes"] == probes_for(ann["ivf_clusters"])
    assert ann["ivf_candidates"] == ann["ann_candidates"] and ann["ivf_p50_ms"] > 0
    assert "ann_vectors" not in rows[120, "kb, words"]
    # Vectors cost disk: the hashing rows take more than words alone.
    assert rows[120, "kb, words + hashing"]["disk_bytes"] > rows[120, "kb, words"]["disk_bytes"]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob("kairox-scale-*"))  # the scratch is cleaned up


def test_a_size_below_one_is_a_usage_error(dataset):
    result = CliRunner().invoke(
        command_cli(scale), ["scale", "--source", str(dataset), "--sizes", "10,0"]
    )
    assert result.exit_code == 2 and "at least 1" in result.output


def test_a_failing_child_is_a_bench_error_with_its_stderr(tmp_path):
    code = "import sys; print('a' * 10); sys.stderr.write('broke here'); sys.exit(3)"
    with pytest.raises(BenchError, match=r"failed \(3\): broke here"):
        run_child([sys.executable, "-c", code], cwd=tmp_path, env=dict(os.environ))
    ran = run_child([sys.executable, "-c", "print(sum(range(10**6)))"], cwd=tmp_path, env={})
    assert ran.stdout.strip() == str(sum(range(10**6))) and ran.peak_rss_mb > 1


def test_a_python_module_child_reports_its_own_peak_not_its_parent_s(tmp_path):
    ballast = b"x" * (300 * 2**20)  # resident here: 300 MB more than the child ever holds
    ran = run_child(python_module("json.tool", "--help"), cwd=tmp_path, env=dict(os.environ))
    assert "json" in ran.stdout and ran.peak_rss_mb < 200
    del ballast
