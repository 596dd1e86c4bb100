"""``kairox bench history`` end to end on a repository the test builds: the table's rows,
the refusal of a thin history, and its queries tuning a workspace with ``bench tune``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kairox import EmbeddingBackendSpec
from kairox.bench import BenchError, BenchUsageError
from kairox.bench.history_run import check_dependencies, repo_names
from kairox.plugin_host.registry import Registry


@pytest.fixture
def bench_history(invoke, tmp_path):
    def run(*args: str):
        return invoke("bench", "history", "--work", tmp_path / "work", *args)

    return run


@pytest.fixture
def bench_all_of_history(bench_history, history_repo):
    """``bench history`` over all of ``history_repo``'s five queries (``--split all``)."""

    def run(*args: str):
        return bench_history(
            "--repo", history_repo.root, "--split", "all", "--min-queries", "5", *args
        )

    return run


def test_one_run_scores_the_default_beside_the_references(
    history_repo, bench_all_of_history, tmp_path
):
    result = bench_all_of_history(
        "--systems",
        "default,workspace-fts",
        "--write-queries",
        tmp_path / "queries",
        "--json",
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    (row,) = report["repos"]
    assert row["name"] == "history-repo" and row["queries"] == 5
    assert list(row["systems"]) == ["default", "workspace-fts", "whole-file-bm25", "path-symbol"]
    assert report["pooled"]["queries"] == 5
    assert ["Run black over the code", "formatting, lint, typo or style"] in [
        entry[1:] for entry in row["skipped_commits"]
    ]
    assert report["pooled"]["systems"]["default"] == row["systems"]["default"]
    # The tree indexed is HEAD's, exported; the repository's own files are untouched.
    assert (tmp_path / "work" / "history-repo" / "tree" / "src/pkg/lexer.py").is_file()
    assert not (history_repo.root / ".kairox").exists()
    written = tmp_path / "queries" / "history-repo"
    assert len((written / "queries.jsonl").read_text().splitlines()) == 5
    assert (written / "test.tsv").read_text().startswith("query-id\tcorpus-id\tscore\n")


def test_the_table_names_each_repository_and_the_pooled_row(bench_all_of_history):
    result = bench_all_of_history()
    assert result.exit_code == 0, result.output
    assert "history-repo" in result.stdout and "pooled" in result.stdout
    assert "whole-file-bm25" in result.stdout and "× BM25" in result.stdout
    # Worded as the refusal words it ("none" when no commit was skipped).
    assert "; skipped commits: " in result.stdout and "merge: 1" in result.stdout


def test_too_few_commits_is_refused_before_indexing(history_repo, bench_history, tmp_path):
    result = bench_history("--repo", history_repo.root)
    assert result.exit_code == 2
    assert "2 usable commits in the test split, at least 20 needed" in result.output
    assert "duplicate query: 1" in result.output
    assert not (tmp_path / "work").exists()


def test_an_unknown_system_is_a_usage_error(history_repo, bench_history):
    result = bench_history("--repo", history_repo.root, "--systems", "bm42")
    assert result.exit_code == 2
    assert "unknown system 'bm42'" in result.output


def test_tune_reads_the_train_queries_at_file_level(
    long_history_repo, bench_history, invoke, tmp_path, monkeypatch
):
    result = bench_history(
        "--repo",
        long_history_repo.root,
        "--split",
        "all",
        "--min-queries",
        "1",
        "--test-share",
        "0.125",
        "--write-queries",
        tmp_path / "q",
        "--json",
    )
    assert result.exit_code == 0, result.output
    written = tmp_path / "q" / "long-history"
    monkeypatch.chdir(long_history_repo.root)
    assert invoke("index").exit_code == 0
    tuned = invoke(
        "bench",
        "tune",
        "--workspace",
        "--folds",
        "2",
        "--queries",
        written / "queries.jsonl",
        "--qrels",
        written / "train.tsv",
        "--holdout-qrels",
        written / "test.tsv",
        "--json",
    )
    assert tuned.exit_code == 0, tuned.output
    report = json.loads(tuned.stdout)
    assert report["queries"] == 21
    assert report["holdout"]["queries"] == 3
    # Judged paths match the workspace's hits: the current configuration finds answers.
    assert report["cross_validated"]["current_ndcg@10"] > 0


def test_repo_names_are_short_and_unique(tmp_path):
    paths = [
        tmp_path / "pallets+flask" / "repo",
        tmp_path / "a" / "flask.git",
        tmp_path / "b" / "flask",
    ]
    assert repo_names(paths) == ["pallets+flask", "flask", "flask-2"]


def test_a_committed_kairox_toml_applies_and_profiles_are_systems(
    history_repo, bench_all_of_history
):
    history_repo.commit(
        "configure kairox",
        {
            "kairox.toml": '[workspace]\nexclude = ["src/pkg/util.py"]\n\n'
            '[profiles.mmr]\nrerank = "mmr"\n'
        },
    )
    result = bench_all_of_history(
        "--systems",
        "default,profile:mmr",
        "--json",
    )
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["repos"]
    assert list(row["systems"])[:2] == ["default", "profile:mmr"]
    ranked = {f for files in row["rankings"]["default"].values() for f in files}
    assert "src/pkg/core.py" in ranked
    assert "src/pkg/util.py" not in ranked  # excluded by the committed kairox.toml
    assert "src/pkg/util.py" in {
        f for files in row["rankings"]["whole-file-bm25"].values() for f in files
    }


def test_an_unknown_profile_is_refused_with_a_did_you_mean(bench_all_of_history, tmp_path):
    result = bench_all_of_history(
        "--systems",
        "profile:defualt",
    )
    assert result.exit_code == 2
    assert "default" in result.output
    assert not list((tmp_path / "work").glob("*/state-*/kairox.db"))  # refused before indexing


def _without(module: str | None, *args: object) -> subprocess.CompletedProcess[str]:
    """``kairox ARGS`` in a fresh interpreter where ``module`` cannot be imported (no
    plugin loaded: the built-ins only)."""
    hide = f"sys.modules[{module!r}] = None\n" if module else ""
    script = f"import sys\n{hide}from kairox.cli import main\nmain({[str(a) for a in args]!r})\n"
    env = {**os.environ, "KAIROX_LOAD_PLUGINS": ""}
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False
    )


@pytest.mark.parametrize(
    ("module", "package"), [("rank_bm25", "rank-bm25"), ("ir_measures", "ir-measures")]
)
def test_a_missing_bench_library_is_reported_before_any_work(
    history_repo, tmp_path, module, package
):
    work = tmp_path / "work"
    args = ("bench", "history", "--repo", history_repo.root, "--work", work)
    done = _without(module, *args, "--split", "all", "--min-queries", "5")
    assert done.returncode == 1, done.stderr
    assert f"needs the {package!r} package" in done.stderr
    assert "pip install 'kairox[bench]'" in done.stderr
    assert "Usage:" not in done.stderr
    assert not work.exists()  # nothing exported, nothing embedded


def test_an_embedder_whose_plugin_is_missing_is_reported_before_any_work(history_repo, tmp_path):
    work = tmp_path / "work"
    args = ("bench", "history", "--repo", history_repo.root, "--work", work)
    done = _without(None, *args, "--embedders", "hashing,minilm", "--min-queries", "5")
    assert done.returncode == 1, done.stderr
    assert "kairox install kairox-sentence-transformers" in done.stderr
    assert "Usage:" not in done.stderr
    assert not work.exists()


def test_an_embedder_that_cannot_load_is_a_missing_dependency():
    def broken():
        raise ImportError("the 'torch' package is not installed: pip install torch")

    registry = Registry()
    registry.embedding_backends.add(EmbeddingBackendSpec("broken", broken), "test")
    with pytest.raises(BenchError, match=r"'broken' embedding backend cannot load.*pip install"):
        check_dependencies(["broken"], registry)
    with pytest.raises(BenchUsageError, match="no embedding backend 'nope'; installed: broken"):
        check_dependencies(["nope"], registry)
