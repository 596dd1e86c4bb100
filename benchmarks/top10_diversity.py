"""Mean pairwise cosine of each query's top 10, from TREC run files and a vector cache.

    python benchmarks/top10_diversity.py CACHE.npz RUNS_DIR

``CACHE.npz`` is the benchmark's embedding cache of the corpus (``ids``, ``matrix``), as
``kairox bench retrieval`` writes it under ``$KAIROX_HOME/cache/embeddings``; ``RUNS_DIR``
is its ``--run-dir``. Lower means a more varied top 10.
"""

from __future__ import annotations

import collections
import pathlib
import sys

import numpy as np


def main() -> None:
    cache = np.load(sys.argv[1])
    position = {doc: i for i, doc in enumerate(cache["ids"])}
    unit = cache["matrix"] / np.linalg.norm(cache["matrix"], axis=1, keepdims=True)
    for run in sorted(pathlib.Path(sys.argv[2]).glob("*")):
        ranked: dict[str, list[tuple[int, str]]] = collections.defaultdict(list)
        for line in run.read_text().splitlines():
            qid, _, doc, rank, *_ = line.split()
            ranked[qid].append((int(rank), doc))
        means = []
        for rows in ranked.values():
            top = [position[d] for _, d in sorted(rows)[:10] if d in position]
            if len(top) < 2:
                continue
            sims = unit[top] @ unit[top].T
            n = len(top)
            means.append((sims.sum() - n) / (n * (n - 1)))
        print(f"{run.name}: {len(means)} queries, mean pairwise cosine {np.mean(means):.4f}")


if __name__ == "__main__":
    main()
