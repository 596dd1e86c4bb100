"""File-level evaluation of the history benchmark's queries.

A system is any callable ``search(text) -> hits`` (``kairox.open(root).search(q, k=K).hits``
for the shipped default); its hits are reduced to files in order, each file ranked by its
first (best) hit, exactly as :mod:`kairox.bench.judgments` ranks documents when
``kairox bench tune`` reads the queries this benchmark writes. A hit may also be a plain
path (the references rank files directly).

Metrics come from ir-measures over those file rankings, every answer file judged
relevant: ``hit@1`` and ``hit@5`` (``Success@k``: an answer in the top k), ``mrr@10``
(``RR@10``) and ``recall@10`` (``R@10``: the share of the answers in the top 10). A
repository's row averages its queries; the pooled row averages every query of every
repository (each query weighs the same). ``vs_bm25`` is a system's MRR@10 over
whole-file BM25's in the same row.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kairox.bench import BenchError, BenchUsageError
from kairox.bench.history import History, HistoryQuery
from kairox.bench.history_refs import BM25, PATH_SYMBOL, PathSymbolRanker, WholeFileBm25, tree_texts
from kairox.bench.judgments import document_id
from kairox.bench.metrics import _need_ir_measures

__all__ = [
    "MIN_QUERIES",
    "HistoryRefused",
    "check_enough",
    "evaluate_repo",
    "file_ranking",
    "measure",
    "pooled",
    "references",
    "skipped_commits",
]

#: Queries the evaluated split must hold, below which a repository is refused.
MIN_QUERIES = 20
#: Files kept per query in the report.
KEPT = 10
METRIC_NAMES = ("hit@1", "hit@5", "mrr@10", "recall@10")

Search = Callable[[str], Sequence[Any]]
Progress = Callable[[str, int, int], None]


class HistoryRefused(BenchUsageError):
    """A repository's history gives too few usable queries to judge anything by."""


def file_ranking(hits: Sequence[Any]) -> list[str]:
    """The files of ``hits`` best first, each once (a path string is its own file)."""
    return list(dict.fromkeys(hit if isinstance(hit, str) else document_id(hit) for hit in hits))


def skipped_commits(skipped: Mapping[str, int]) -> str:
    """How many commits were skipped for each reason (``merge: 1; ...``), or ``none``."""
    return "; ".join(f"{reason}: {count}" for reason, count in skipped.items()) or "none"


def check_enough(history: History, split: str, minimum: int = MIN_QUERIES) -> None:
    """Refuse ``history`` when its ``split`` holds fewer than ``minimum`` queries."""
    found = len(history.split(split))
    if found >= minimum:
        return
    raise HistoryRefused(
        f"{history.repo}: {found} usable commits in the {split} split, at least {minimum} "
        f"needed ({len(history.queries)} queries in all; "
        f"skipped commits: {skipped_commits(history.skipped)}). "
        "A repository with a longer history of small source changes works; --min-queries "
        "lowers the bar"
    )


def measure(
    queries: Sequence[HistoryQuery], run: Mapping[str, Sequence[str]]
) -> dict[str, dict[str, float]]:
    """metric -> query id -> value, for every query (0 where the run found no answer)."""
    ir_measures = _need_ir_measures()
    from ir_measures import RR, R, Success

    measures = {"hit@1": Success @ 1, "hit@5": Success @ 5, "mrr@10": RR @ 10, "recall@10": R @ 10}
    names = {measure: name for name, measure in measures.items()}
    qrels = [ir_measures.Qrel(q.id, path, 1) for q in queries for path in q.answers]
    scored = [
        ir_measures.ScoredDoc(q.id, path, float(-rank))
        for q in queries
        for rank, path in enumerate(run.get(q.id, ()))
    ]
    values = {name: dict.fromkeys((q.id for q in queries), 0.0) for name in measures}
    for metric in ir_measures.iter_calc(list(measures.values()), qrels, scored):
        values[names[metric.measure]][metric.query_id] = float(metric.value)
    return values


def _means(per_query: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    return {
        name: statistics.fmean(values.values()) if values else 0.0
        for name, values in per_query.items()
    }


def references(root: Path) -> dict[str, Search]:
    """The whole-file BM25 and path-and-symbol rankers over the tree at ``root``."""
    texts = tree_texts(root)
    return {BM25: WholeFileBm25(texts), PATH_SYMBOL: PathSymbolRanker(texts)}


def evaluate_repo(
    history: History,
    root: Path,
    systems: Mapping[str, Search],
    *,
    split: str = "test",
    with_references: bool = True,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Every system (and the references) over ``history``'s ``split``, judged at file level.

    Returns ``{"repo", "head", "split", "queries", "systems": {name: metrics},
    "per_query": {name: {metric: {qid: value}}}, "rankings": {name: {qid: files}},
    "questions": [{id, text, answers, commit}]}``. The tree searched is the one at
    ``root`` (the repository's HEAD, exported); ``systems`` search it.
    """
    queries = history.split(split)
    if not queries:
        raise BenchError(f"{history.repo}: no queries in the {split} split")
    every = dict(systems)
    if with_references:
        every.update(references(root))
    report: dict[str, Any] = {
        "repo": history.repo,
        "head": history.head,
        "split": split,
        "queries": len(queries),
        "skipped": dict(history.skipped),
        "systems": {},
        "per_query": {},
        "rankings": {},
        "questions": [
            {"id": q.id, "text": q.text, "answers": list(q.answers), "commit": q.commit}
            for q in queries
        ],
    }
    for name, search in every.items():
        run: dict[str, list[str]] = {}
        for done, query in enumerate(queries, start=1):
            run[query.id] = file_ranking(search(query.text))
            if progress is not None:
                progress(f"{_short(history.repo)}: {name}", done, len(queries))
        values = measure(queries, run)
        report["per_query"][name] = values
        report["systems"][name] = _means(values)
        report["rankings"][name] = {qid: files[:KEPT] for qid, files in run.items()}
    _add_ratios(report["systems"])
    return report


def pooled(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One row over every query of ``rows`` (each query weighs the same); systems that
    some repository did not run are left out."""
    if not rows:
        raise BenchError("no repository to pool")
    names = [n for n in rows[0]["per_query"] if all(n in row["per_query"] for row in rows)]
    systems: dict[str, dict[str, float]] = {}
    for name in names:
        merged = {
            metric: {
                f"{row['repo']}:{qid}": value
                for row in rows
                for qid, value in row["per_query"][name][metric].items()
            }
            for metric in METRIC_NAMES
        }
        systems[name] = _means(merged)
    _add_ratios(systems)
    return {"repo": "pooled", "queries": sum(row["queries"] for row in rows), "systems": systems}


def _add_ratios(systems: dict[str, dict[str, Any]]) -> None:
    base = systems.get(BM25, {}).get("mrr@10")
    for metrics in systems.values():
        metrics["vs_bm25"] = metrics["mrr@10"] / base if base else None


def _short(repo: str) -> str:
    path = Path(repo)
    return path.parent.name if path.name in ("repo", ".git") else path.name
