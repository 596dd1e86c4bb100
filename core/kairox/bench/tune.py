"""``kairox bench tune``: which fusion, weights and candidate depth serve a profile best,
chosen by k-fold cross-validation on your queries and kept only when significant.

Each source of the profile is asked every query once, through the facade (``kairox search
--profile P --source S``), for its top ``DEPTH`` hits. Every configuration of the grid
(fusion method x per-knowledge-base weight x candidate depth) then fuses those lists with
:func:`kairox.retrieval.fusion.fuse`, the function the composite fuses with, so no source
is asked twice. nDCG@10 per query of each configuration is the table the tuning reads.

Cross-validation: the queries are shuffled (``seed``) into ``folds`` folds; for each fold
the configuration with the best mean nDCG@10 on the other folds is scored on it. The
cross-validated score of "tuning" is the mean of those held-out scores, paired query by
query with the current configuration's scores (paired t-test and randomization test,
:func:`kairox.bench.metrics.paired_test`). The configuration recommended is the best one
on all queries, and it is recommended only when tuning beats the current configuration
significantly (randomization p < ``alpha``); otherwise the report says why not.

Only knowledge-base weights live in ``kairox.toml`` (``[knowledge_bases.ID] weight``);
``--write`` sets those with tomlkit, keeping comments and layout. The fusion method is
``kairox search --fusion``; the candidate depth is the composite's (``max(k, 20)``).
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kairox.bench import BENCH_EXTRA, BenchError
from kairox.bench.beir import BeirDataset
from kairox.bench.judgments import IdMatcher
from kairox.bench.metrics import DEPTH, paired_test
from kairox.retrieval import Hit, ScoreKind, SourceStatus
from kairox.retrieval.fusion import DEFAULT_FUSION, FUSION_METHODS, fuse

if TYPE_CHECKING:
    from kairox.runtime.facade import AppFacade

MIN_QUERIES = 20
WEIGHT_GRID = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
CANDIDATE_GRID = (20, 50, 100)
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Config:
    fusion: str
    weights: tuple[tuple[str, float], ...]
    candidates: int

    def as_dict(self) -> dict[str, Any]:
        return {"fusion": self.fusion, "weights": dict(self.weights), "candidates": self.candidates}


@dataclass
class Collected:
    """Every source's hits for every query, and what the profile is configured with."""

    hits: dict[str, dict[str, list[Hit]]]  # query id -> source -> hits
    kinds: dict[str, ScoreKind]
    weights: dict[str, float]  # tunable (knowledge-base) sources -> current weight
    sources: list[str]
    failures: dict[str, int]


def check_folds(folds: int, queries: int) -> None:
    """Refuse a cross-validation that cannot say anything, with the reason."""
    if folds < 2:
        raise BenchError(
            f"--folds {folds}: cross-validation needs at least 2 folds (with one, every "
            "query would both choose the configuration and judge it)"
        )
    if queries < MIN_QUERIES:
        raise BenchError(
            f"only {queries} judged queries: tuning needs at least {MIN_QUERIES}, or the "
            "winner is noise; judge more queries (or `kairox bench generate-queries`)"
        )
    if folds > queries:
        raise BenchError(f"--folds {folds} is more than the {queries} queries")


def collect(
    facade: AppFacade,
    profile: str,
    dataset: BeirDataset,
    *,
    only: set[str] | None = None,
    progress: Progress | None = None,
) -> Collected:
    """Ask each source of ``profile`` every query once, through the facade."""
    composite, _ = facade.sources.composite_and_groups(profile, only=only)
    names = [source.name for source in composite.sources]
    if not names:
        raise BenchError(f"profile {profile!r} has no source that can answer")
    kinds = {
        s.name: s.score_kind
        for s in composite.sources
        if isinstance(getattr(s, "score_kind", None), ScoreKind)
    }
    kbs = {e.id: e.config.weight for e in facade.config.visible_knowledge_bases(profile)}
    weights = {name: kbs[name] for name in names if name in kbs}
    hits: dict[str, dict[str, list[Hit]]] = {}
    failures: dict[str, int] = {}
    total = len(dataset.queries) * len(names)
    done = 0
    for qid, text in dataset.queries.items():
        per_source: dict[str, list[Hit]] = {}
        for name in names:
            result = facade.search_sync(text, profile=profile, k=DEPTH, only={name})
            report = next(r for r in result.reports if r.source == name)
            if report.status is not SourceStatus.OK:
                failures[name] = failures.get(name, 0) + 1
            # The fused copy of one source's list carries that source's raw score and rank.
            per_source[name] = [
                Hit(h.id, h.text, h.sources[0].score, name, h.uri, h.metadata)
                for h in sorted(result.hits, key=lambda h: h.sources[0].rank)
            ]
            done += 1
            if progress is not None:
                progress("asking each source", done, total)
        hits[qid] = per_source
    return Collected(hits, kinds, weights, names, failures)


def grid(collected: Collected) -> list[Config]:
    """Every fusion x weight x candidate depth; one weight stays fixed when only weights
    are tuned (scaling them all changes no ranking)."""
    tunable = sorted(collected.weights)
    fixed = tunable[:1] if len(tunable) == len(collected.sources) else []
    free = [name for name in tunable if name not in fixed]
    configs = []
    for fusion, candidates in itertools.product(FUSION_METHODS, CANDIDATE_GRID):
        for values in itertools.product(WEIGHT_GRID, repeat=len(free)):
            weights = {name: collected.weights[name] for name in fixed}
            weights.update(zip(free, values, strict=True))
            if (
                weights
                and all(w == 0 for w in weights.values())
                and not (set(collected.sources) - set(weights))
            ):
                continue  # every source off
            configs.append(Config(fusion, tuple(sorted(weights.items())), candidates))
    return configs


def current_config(collected: Collected) -> Config:
    """What the profile runs now at ``-k 100``: the default fusion, the configured
    weights, and the composite's candidate depth (``max(k, 20)``)."""
    return Config(DEFAULT_FUSION, tuple(sorted(collected.weights.items())), max(DEPTH, 20))


def ndcg10(ranked: Sequence[str], judged: Mapping[str, int]) -> float:
    """nDCG@10 with linear gains, as trec_eval (and so ir-measures) computes it."""
    dcg = sum(
        judged.get(doc, 0) / math.log2(rank + 2)
        for rank, doc in enumerate(ranked[:10])
        if judged.get(doc, 0) > 0
    )
    ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:10]
    idcg = sum(g / math.log2(rank + 2) for rank, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def fused_ranking(collected: Collected, qid: str, config: Config, matcher: IdMatcher) -> list[str]:
    ranked = {name: hits[: config.candidates] for name, hits in collected.hits[qid].items()}
    fused = fuse(
        ranked,
        method=config.fusion,
        weights=dict(config.weights),
        score_kinds=collected.kinds,
        limit=DEPTH,
    )
    return matcher.ranking(fused)


def scores(
    collected: Collected, dataset: BeirDataset, config: Config, matcher: IdMatcher
) -> dict[str, float]:
    """nDCG@10 per query of ``config``."""
    return {
        qid: ndcg10(fused_ranking(collected, qid, config, matcher), dataset.qrels[qid])
        for qid in dataset.queries
    }


def tune(
    collected: Collected,
    dataset: BeirDataset,
    matcher: IdMatcher,
    *,
    folds: int = 5,
    seed: int = 0,
    alpha: float = 0.05,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Cross-validate the grid; the report ``kairox bench tune`` prints."""
    queries = list(dataset.queries)
    check_folds(folds, len(queries))
    current = current_config(collected)
    configs = grid(collected)
    if current not in configs:
        configs.insert(0, current)
    table: list[list[float]] = []
    for number, config in enumerate(configs, start=1):
        by_query = scores(collected, dataset, config, matcher)
        table.append([by_query[q] for q in queries])
        if progress is not None:
            progress("scoring configurations", number, len(configs))
    order = list(range(len(queries)))
    random.Random(seed).shuffle(order)
    fold_of = {index: position % folds for position, index in enumerate(order)}
    held_out = [0.0] * len(queries)
    chosen = []
    for fold in range(folds):
        train = [i for i in range(len(queries)) if fold_of[i] != fold]
        best = max(range(len(configs)), key=lambda c: (_mean(table[c], train), -c))
        chosen.append(configs[best].as_dict())
        for i in range(len(queries)):
            if fold_of[i] == fold:
                held_out[i] = table[best][i]
    now = table[configs.index(current)]
    best_all = max(range(len(configs)), key=lambda c: (statistics.fmean(table[c]), -c))
    t_p, r_p = paired_test(now, held_out)
    gain = statistics.fmean(held_out) - statistics.fmean(now)
    recommended = configs[best_all]
    if recommended == current:
        refused = "the current configuration is already the best on these queries"
    elif gain <= 0:
        refused = f"cross-validated tuning does not beat the current configuration ({gain:+.4f})"
    elif r_p >= alpha:
        refused = (
            f"the cross-validated gain ({gain:+.4f} nDCG@10) is not significant "
            f"(randomization p = {r_p:.3g} >= {alpha}); judge more queries to tell"
        )
    else:
        refused = None
    return {
        "queries": len(queries),
        "folds": folds,
        "seed": seed,
        "alpha": alpha,
        "configurations": len(configs),
        "sources": collected.sources,
        "source_failures": collected.failures,
        "current": {**current.as_dict(), "ndcg@10": statistics.fmean(now)},
        "best": {**recommended.as_dict(), "ndcg@10": statistics.fmean(table[best_all])},
        "cross_validated": {
            "current_ndcg@10": statistics.fmean(now),
            "tuned_ndcg@10": statistics.fmean(held_out),
            "delta": gain,
            "p_ttest": t_p,
            "p_randomization": r_p,
            "chosen_per_fold": chosen,
        },
        "recommended": None if refused else recommended.as_dict(),
        "refused": refused,
    }


def _mean(values: Sequence[float], indices: Sequence[int]) -> float:
    return math.fsum(values[i] for i in indices) / len(indices)


def holdout(
    collected: Collected, dataset: BeirDataset, matcher: IdMatcher, configs: Mapping[str, Config]
) -> dict[str, float]:
    """Mean nDCG@10 of each named configuration on other (held-out) queries."""
    return {
        name: statistics.fmean(scores(collected, dataset, config, matcher).values())
        for name, config in configs.items()
    }


def config_of(data: Mapping[str, Any]) -> Config:
    return Config(data["fusion"], tuple(sorted(data["weights"].items())), int(data["candidates"]))


def write_weights(facade: AppFacade, weights: Mapping[str, float]) -> list[Path]:
    """Set ``weight`` of each knowledge base in the file that defines it, in place."""
    try:
        import tomlkit
    except ImportError:
        raise BenchError(
            f"bench tune --write needs tomlkit: {BENCH_EXTRA} (or pip install tomlkit)"
        ) from None

    changed: list[Path] = []
    by_file: dict[Path, dict[str, float]] = {}
    for kb, weight in weights.items():
        entry = facade.config.knowledge_bases[kb]
        by_file.setdefault(entry.origin, {})[kb] = weight
    for path, items in by_file.items():
        document = tomlkit.parse(path.read_text(encoding="utf-8"))
        tables = document.get("knowledge_bases")
        for kb, weight in items.items():
            if tables is None or kb not in tables:
                raise BenchError(f"{path}: no [knowledge_bases.{kb}] table to set the weight in")
            tables[kb]["weight"] = float(weight)
        path.write_text(tomlkit.dumps(document), encoding="utf-8")
        changed.append(path)
    return changed
