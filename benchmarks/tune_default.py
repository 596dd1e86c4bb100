"""Tune the default workspace hybrid (sqlite-fts + hashing vectors) on SciFact's *train* split.

Issue 17's rule: the shipped default search must be at least as good as its best single
source. This asks sqlite-fts and the hashing embedder (the default, sentence-aware like the
workspace) every train query once, fuses them with ``convex`` (the composite's default)
for each vector weight in ``kairox.bench.code.WEIGHT_GRID``, picks the best weight on
train, and only then scores FTS alone, hashing alone, the 1:1 hybrid, the tuned hybrid
and the shipped weight (``HASHING_FUSION_WEIGHT``) on the test split:

    KAIROX_HOME=/tmp/bench-home python benchmarks/tune_default.py \
        --dataset ../shared/datasets/scifact --out benchmarks/results/default-weight.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path

from kairox.bench.beir import load_beir
from kairox.bench.code import WEIGHT_GRID
from kairox.bench.metrics import DEPTH, score
from kairox.bench.report import machine
from kairox.bench.retrieval import Bench
from kairox.default_plugins.hashing_embedder import HASHING_FUSION_WEIGHT
from kairox.plugin_host.manager import get_plugin_manager
from kairox.retrieval import Query, ScoreKind, fuse
from kairox.support.paths import kairox_home

KINDS = {"sqlite-fts": ScoreKind.BM25, "hashing": ScoreKind.COSINE}


def hits_of(split: str, dataset: Path) -> tuple[object, dict, dict]:
    data = load_beir(dataset, split)
    registry = get_plugin_manager().registry
    with tempfile.TemporaryDirectory() as scratch:
        bench = Bench(
            data, registry, cache_dir=kairox_home() / "cache" / "embeddings", scratch=Path(scratch)
        )
        found = {}
        for name in KINDS:
            source = bench.system(name)[0]

            async def ask(source=source):
                return [await source.retrieve(Query(t, k=DEPTH)) for t in data.queries.values()]

            found[name] = dict(zip(data.queries, asyncio.run(ask()), strict=True))
    return data, found["sqlite-fts"], found["hashing"]


def ndcg(data, fts, vec, weight: float | None) -> float:
    run = {}
    for qid in data.queries:
        if weight is None:
            run[qid] = [h.id for h in fts[qid]]
            continue
        fused = fuse(
            {"sqlite-fts": fts[qid], "hashing": vec[qid]},
            method="convex",
            weights={"hashing": weight},
            score_kinds=KINDS,
            limit=DEPTH,
        )
        run[qid] = [h.id for h in fused]
    return round(score(data, run)["ndcg@10"], 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    train, fts, vec = hits_of("train", args.dataset)
    grid = {str(w): ndcg(train, fts, vec, w) for w in WEIGHT_GRID}
    best = max(WEIGHT_GRID, key=lambda w: (grid[str(w)], w))
    train_fts = ndcg(train, fts, vec, None)
    test, fts, vec = hits_of("test", args.dataset)
    alone = {qid: [h.id for h in hits] for qid, hits in vec.items()}
    report = {
        "dataset": "scifact",
        "train_ndcg@10": {"sqlite-fts": train_fts, "hybrid_by_vector_weight": grid},
        "best_weight": best,
        "test_ndcg@10": {
            "sqlite-fts": ndcg(test, fts, vec, None),
            "hashing": round(score(test, alone)["ndcg@10"], 4),
            "hybrid@1.0": ndcg(test, fts, vec, 1.0),
            f"hybrid@{best}": ndcg(test, fts, vec, best),
            # What ships: the smallest weight above 0 (0 would drop the vector hits).
            f"hybrid@{HASHING_FUSION_WEIGHT}": ndcg(test, fts, vec, HASHING_FUSION_WEIGHT),
        },
        "shipped_weight": HASHING_FUSION_WEIGHT,
        "machine": machine(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
