"""Retrieval quality of a run (ir-measures: nDCG@10, Recall@100, MRR@10, per query and
averaged) and whether two runs differ (paired t-test and randomization test, scipy)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kairox.bench import BENCH_EXTRA, BenchError
from kairox.bench.beir import BeirDataset
from kairox.support.lazy_imports import LazyImport

DEPTH = 100  # hits per query: enough for Recall@100


METRICS = ("ndcg@10", "recall@100", "mrr@10")

#: The library every benchmark's quality figures come from (``check()`` it up front).
IR_MEASURES = LazyImport(
    "ir_measures",
    needed_by="kairox bench",
    install=f"{BENCH_EXTRA} (or pip install ir-measures)",
    distributions={"ir_measures": "ir-measures"},
)


def _need_ir_measures() -> Any:
    try:
        return IR_MEASURES.load()
    except ImportError as exc:
        raise BenchError(str(exc)) from None


def per_query(
    dataset: BeirDataset, run: Mapping[str, Sequence[str]]
) -> dict[str, dict[str, float]]:
    """metric -> query id -> value, for every judged query (0 where the run has no hit)."""
    ir_measures = _need_ir_measures()
    from ir_measures import RR, R, nDCG

    qrels = [
        ir_measures.Qrel(qid, doc_id, relevance)
        for qid, judged in dataset.qrels.items()
        for doc_id, relevance in judged.items()
    ]
    # Scores from ranks, so ir-measures keeps exactly the order the system returned.
    scored = [
        ir_measures.ScoredDoc(qid, doc_id, float(DEPTH - rank))
        for qid, ranked in run.items()
        for rank, doc_id in enumerate(ranked)
    ]
    measures = {"ndcg@10": nDCG @ 10, "recall@100": R @ 100, "mrr@10": RR @ 10}
    names = {measure: name for name, measure in measures.items()}
    values: dict[str, dict[str, float]] = {
        name: dict.fromkeys(dataset.qrels, 0.0) for name in measures
    }
    for metric in ir_measures.iter_calc(list(measures.values()), qrels, scored):
        values[names[metric.measure]][metric.query_id] = float(metric.value)
    return values


def score(dataset: BeirDataset, run: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """nDCG@10, Recall@100 and MRR@10 of a ranked run, averaged over judged queries."""
    return {
        name: statistics.fmean(by_query.values()) if by_query else 0.0
        for name, by_query in per_query(dataset, run).items()
    }


def paired_test(
    a: Sequence[float], b: Sequence[float], *, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Two-sided p-values that ``b`` and ``a`` (paired by query) have the same mean.

    Returns (paired t-test, paired randomization test with ``resamples`` sign flips),
    both from scipy. Identical inputs give 1.0.
    """
    try:
        from scipy import stats
    except ImportError:
        raise BenchError(
            f"kairox bench compare needs scipy: {BENCH_EXTRA} (or pip install scipy)"
        ) from None
    x, y = np.asarray(b, dtype=np.float64), np.asarray(a, dtype=np.float64)
    if len(x) < 2 or np.allclose(x, y, rtol=0, atol=1e-12):
        return 1.0, 1.0
    t_p = float(stats.ttest_rel(x, y).pvalue)
    perm = stats.permutation_test(
        (x, y),
        lambda u, v, axis: np.mean(u - v, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=resamples,
        alternative="two-sided",
        rng=np.random.default_rng(seed),
    )
    return (1.0 if math.isnan(t_p) else t_p), float(perm.pvalue)


def compare(
    a: Mapping[str, Any],
    b: Mapping[str, Any] | None = None,
    *,
    baseline: str | None = None,
    metric: str = "ndcg@10",
    resamples: int = 10_000,
) -> list[dict[str, Any]]:
    """Per-system deltas with paired p-values.

    With two reports: each system present in both, ``b`` minus ``a``. With one report and
    ``baseline``: every other system of ``a`` minus the baseline. Queries are paired by id;
    only queries present on both sides count.
    """
    if metric not in METRICS:
        raise BenchError(f"unknown metric {metric!r}; choose one of: {', '.join(METRICS)}")
    pairs: list[tuple[str, dict[str, float], dict[str, float]]] = []
    qa = a["per_query"]
    if b is not None:
        qb = b["per_query"]
        shared = [name for name in qa if name in qb]
        if not shared:
            raise BenchError(
                f"the two reports share no system (first: {', '.join(qa)}; second: {', '.join(qb)})"
            )
        pairs = [(name, qa[name][metric], qb[name][metric]) for name in shared]
    else:
        if baseline is None:
            raise BenchError("give two reports, or one report and --baseline SYSTEM")
        if baseline not in qa:
            raise BenchError(f"no system {baseline!r} in the report; it has: {', '.join(qa)}")
        pairs = [(name, qa[baseline][metric], qa[name][metric]) for name in qa if name != baseline]
    rows = []
    for name, left, right in pairs:
        queries = sorted(set(left) & set(right))
        if not queries:
            raise BenchError(f"system {name!r}: the two sides share no query")
        x = [left[q] for q in queries]
        y = [right[q] for q in queries]
        t_p, r_p = paired_test(x, y, resamples=resamples)
        rows.append(
            {
                "system": name,
                "baseline": baseline if b is None else name,
                "metric": metric,
                "a": statistics.fmean(x),
                "b": statistics.fmean(y),
                "delta": statistics.fmean(y) - statistics.fmean(x),
                "p_ttest": t_p,
                "p_randomization": r_p,
                "queries": len(queries),
            }
        )
    return rows
