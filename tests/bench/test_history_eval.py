"""File-level judging of the history benchmark: hits reduced to files, the metrics, the
references in the same run, pooling and the refusal of a thin history."""

from __future__ import annotations

import pytest

import kairox
from kairox.bench.history import History, HistoryQuery, export_head, extract
from kairox.bench.history_eval import (
    HistoryRefused,
    check_enough,
    evaluate_repo,
    file_ranking,
    measure,
    pooled,
)
from kairox.retrieval import Hit


def hit(path: str, chunk: int) -> Hit:
    return Hit(id=f"{path}#{chunk}", text="...", score=1.0, source="t", metadata={"path": path})


def test_hits_reduce_to_files_at_their_first_rank():
    hits = [hit("a.py", 1), hit("b.py", 1), hit("a.py", 2), "c.py", hit("b.py", 3)]
    assert file_ranking(hits) == ["a.py", "b.py", "c.py"]


QUERIES = [
    HistoryQuery("q1", "one", ("a.py",), "c1", 1),
    HistoryQuery("q2", "two", ("b.py", "c.py"), "c2", 2),
    HistoryQuery("q3", "three", ("d.py",), "c3", 3),
]


def test_metrics_at_file_level():
    run = {
        "q1": ["a.py", "x.py"],  # rank 1
        "q2": ["x.py", "y.py", "c.py"],  # one of two answers, rank 3
        "q3": [],  # nothing found
    }
    values = measure(QUERIES, run)
    assert values["hit@1"] == {"q1": 1.0, "q2": 0.0, "q3": 0.0}
    assert values["hit@5"] == {"q1": 1.0, "q2": 1.0, "q3": 0.0}
    assert values["mrr@10"] == pytest.approx({"q1": 1.0, "q2": 1 / 3, "q3": 0.0})
    assert values["recall@10"] == {"q1": 1.0, "q2": 0.5, "q3": 0.0}


def test_too_few_queries_are_refused_with_the_count_and_reasons(history_repo):
    history = extract(history_repo.root)
    with pytest.raises(HistoryRefused) as refused:
        check_enough(history, "test", minimum=20)
    message = str(refused.value)
    assert "2 usable commits in the test split, at least 20" in message
    assert "merge: 1" in message and "--min-queries" in message
    check_enough(history, "all", minimum=5)  # enough: no error


@pytest.fixture
def exported(history_repo, tmp_path):
    return extract(history_repo.root, test_share=1.0), export_head(
        history_repo.root, tmp_path / "tree"
    )


def test_evaluate_repo_judges_the_shipped_search_beside_the_references(exported, tmp_path):
    history, tree = exported
    with kairox.open(tree, state_dir=tmp_path / "state") as kx:
        kx.index()
        report = evaluate_repo(
            history, tree, {"default": lambda text: kx.search(text, k=20).hits}, split="all"
        )
    assert report["queries"] == 5
    assert set(report["systems"]) == {"default", "whole-file-bm25", "path-symbol"}
    for name, metrics in report["systems"].items():
        assert set(metrics) == {"hit@1", "hit@5", "mrr@10", "recall@10", "vs_bm25"}, name
        assert set(report["rankings"][name]) == {q.id for q in history.queries}
    assert report["systems"]["whole-file-bm25"]["vs_bm25"] == 1.0
    # Every ranked entry is a file of the tree, each once.
    for files in report["rankings"]["default"].values():
        assert len(files) == len(set(files))
        assert all((tree / f).is_file() for f in files)
    # The tree is tiny and the words are in the files: the shipped search finds most answers.
    assert report["systems"]["default"]["hit@5"] >= 0.8


def test_pooled_row_weighs_every_query_the_same():
    def row(repo: str, values: dict[str, float]) -> dict:
        per_query = {
            name: {m: dict(values) for m in ("hit@1", "hit@5", "mrr@10", "recall@10")}
            for name in ("sys", "whole-file-bm25")
        }
        return {"repo": repo, "queries": len(values), "per_query": per_query}

    rows = [row("a", {"q1": 1.0}), row("b", {"q1": 0.0, "q2": 0.0, "q3": 0.0})]
    pool = pooled(rows)
    assert pool["queries"] == 4
    assert pool["systems"]["sys"]["mrr@10"] == pytest.approx(0.25)  # not (1 + 0) / 2
    assert pool["systems"]["sys"]["vs_bm25"] == pytest.approx(1.0)


def test_an_empty_split_is_an_error():
    history = History(repo="r", head="h", queries=[])
    with pytest.raises(Exception, match="no queries"):
        evaluate_repo(history, None, {}, split="test")  # type: ignore[arg-type]


def test_skipped_commits_reads_the_same_with_none_skipped_or_some():
    from kairox.bench.history_eval import skipped_commits

    assert skipped_commits({}) == "none"
    assert skipped_commits({"merge": 1, "duplicate query": 2}) == "merge: 1; duplicate query: 2"
