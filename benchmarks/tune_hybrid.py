"""Tune the hybrid (sqlite-fts + all-MiniLM-L6-v2) on SciFact's *train* split.

Reproduces ``results/hybrid-tuning-train.json``, the grid behind the default ``convex``
fusion, the ``hybrid-wrrf`` settings, sqlite-fts's default title weight (3) and the
dense half's default sentence weight (0.5, ``SENTENCE_WEIGHT``):

    KAIROX_HOME=/tmp/bench-home python benchmarks/tune_hybrid.py \
        --dataset ../shared/datasets/scifact --out benchmarks/results/hybrid-tuning-train.json

Each title weight's FTS5 index and the MiniLM vectors are built through the benchmark's
own systems, every train query is asked once (top 100 from each half; the dense half once
per sentence weight), and every setting is then fused with ``kairox.retrieval.fusion.fuse``,
the code the composite runs. The fusion grid uses the default sentence weight; the
``sentence_grid`` varies it under ``convex``. nDCG@10 from ir-measures. The test split is
never read: pass ``--split`` only to tune elsewhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from kairox.bench.beir import load_beir
from kairox.bench.metrics import DEPTH, score
from kairox.bench.report import machine
from kairox.bench.retrieval import Bench
from kairox.plugin_host.manager import get_plugin_manager
from kairox.retrieval import Query, ScoreKind, fuse
from kairox.retrieval.fusion import KIND_WEIGHTS
from kairox.retrieval.vectors import SENTENCE_WEIGHT
from kairox.support.paths import kairox_home

TITLE_WEIGHTS = (1.0, 2.0, 3.0, 5.0)
DENSE_WEIGHTS = (0.6, 0.7, 0.8, 0.9, 1.0, 1.2)
RRF_KS = (1, 2, 5, 10, 20, 60)
SENTENCE_WEIGHTS = (0.0, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)
KINDS = {"sqlite-fts": ScoreKind.BM25, "dense": ScoreKind.COSINE}


def ask_all(source, queries):
    async def go():
        return [await source.retrieve(Query(text, k=DEPTH)) for text in queries.values()]

    return dict(zip(queries, asyncio.run(go()), strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--split", default="train")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.split == "test":
        sys.exit("tuning on the test split would make its figures meaningless")
    data = load_beir(args.dataset, args.split)
    registry = get_plugin_manager().registry
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        bench = Bench(
            data, registry, cache_dir=kairox_home() / "cache" / "embeddings", scratch=Path(scratch)
        )
        dense = bench.system("dense")[0]
        dense_by_sentence_weight = {}
        for sentence_weight in SENTENCE_WEIGHTS:
            dense.sentence_weight = sentence_weight
            dense_by_sentence_weight[sentence_weight] = ask_all(dense, data.queries)
        dense_hits = dense_by_sentence_weight[SENTENCE_WEIGHT]
        lexical_hits = {}
        for weight in TITLE_WEIGHTS:
            source, _, _ = bench.system_with("sqlite-fts", {"title_weight": weight})
            lexical_hits[weight] = ask_all(source, data.queries)

    def evaluate(
        weight: float, depth: int = DEPTH, sentence_weight: float = SENTENCE_WEIGHT, **options
    ) -> float:
        run = {}
        for qid in data.queries:
            ranked = {
                "sqlite-fts": lexical_hits[weight][qid][:depth],
                "dense": dense_by_sentence_weight[sentence_weight][qid][:depth],
            }
            fused = fuse(ranked, score_kinds=KINDS, limit=DEPTH, **options)
            run[qid] = [hit.id for hit in fused]
        return round(score(data, run)["ndcg@10"], 4)

    grid = []
    cosine = KIND_WEIGHTS[ScoreKind.COSINE]
    for weight in TITLE_WEIGHTS:
        alone = {qid: [h.id for h in hits] for qid, hits in lexical_hits[weight].items()}
        grid.append(
            {
                "title_weight": weight,
                "method": "sqlite-fts alone",
                "ndcg@10": round(score(data, alone)["ndcg@10"], 4),
            }
        )
        for k in RRF_KS:
            for dense in DENSE_WEIGHTS:
                value = evaluate(weight, method="rrf", rrf_k=k, weights={"dense": dense})
                grid.append(
                    {
                        "title_weight": weight,
                        "method": "rrf",
                        "rrf_k": k,
                        "dense_weight": dense,
                        "ndcg@10": value,
                    }
                )
        for method in ("minmax", "dbsf"):
            for dense in DENSE_WEIGHTS:
                value = evaluate(weight, method=method, weights={"dense": dense})
                grid.append(
                    {
                        "title_weight": weight,
                        "method": method,
                        "dense_weight": dense,
                        "ndcg@10": value,
                    }
                )
        for dense in DENSE_WEIGHTS:
            # convex multiplies by the cosine kind weight itself; divide it out so
            # ``dense_weight`` is the effective weight of the dense half
            value = evaluate(weight, method="convex", weights={"dense": dense / cosine})
            grid.append(
                {
                    "title_weight": weight,
                    "method": "convex",
                    "dense_weight": dense,
                    "ndcg@10": value,
                }
            )
        print(f"title weight {weight}: done", file=sys.stderr, flush=True)
    depths = [
        {
            "title_weight": w,
            "method": "convex",
            "dense_weight": cosine,
            "depth": d,
            "ndcg@10": evaluate(w, depth=d, method="convex"),
        }
        for w in (1.0, 3.0)
        for d in (20, 50, 100)
    ]
    sentence_grid = []
    for sentence_weight, hits_of in dense_by_sentence_weight.items():
        alone = {qid: [h.id for h in hits] for qid, hits in hits_of.items()}
        row = {"sentence_weight": sentence_weight, "dense alone": score(data, alone)["ndcg@10"]}
        for dense in DENSE_WEIGHTS:
            row[f"convex dense {dense}"] = evaluate(
                3.0,
                sentence_weight=sentence_weight,
                method="convex",
                weights={"dense": dense / cosine},
            )
        sentence_grid.append({k: round(v, 4) for k, v in row.items()})
    dense_alone = {qid: [h.id for h in hits] for qid, hits in dense_hits.items()}
    best = {}
    for row in grid:
        key = f"{row['method']} @ title_weight {row['title_weight']}"
        if key not in best or row["ndcg@10"] > best[key]["ndcg@10"]:
            best[key] = row
    report = {
        "dataset": str(args.dataset),
        "split": args.split,
        "queries": len(data.queries),
        "depth": DEPTH,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine(),
        "seconds": round(time.perf_counter() - started, 1),
        "sentence_weight": SENTENCE_WEIGHT,
        "dense_alone": round(score(data, dense_alone)["ndcg@10"], 4),
        "sentence_grid": sentence_grid,
        "best": best,
        "depth_sweep": depths,
        "grid": grid,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    for key, row in sorted(best.items(), key=lambda kv: -kv[1]["ndcg@10"]):
        print(f"{row['ndcg@10']:.4f}  {key}  {row}")
    for row in sentence_grid:
        print(row)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
