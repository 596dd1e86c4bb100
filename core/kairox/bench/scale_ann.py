"""The approximate index measured by ``kairox bench scale --vectors``: the graph of a
knowledge base's passage vectors (:mod:`kairox.retrieval.ann`) against exact search.

The vectors are read back from the knowledge base the benchmark just filled; the
queries are embedded by the same backend. Reported: the graph's build time (one
thread), and per query, interleaved, exact top-k and the graph's rescored top-k, with
recall@k of the latter against the former.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kairox.bench.report import percentile
from kairox.default_plugins.sqlite_fts import SqliteFtsIndex
from kairox.embedding import EmbeddingBackend
from kairox.retrieval.ann import AnnIndex, keys_of, rescored_top_k
from kairox.retrieval.vectors import embed_unit, top_k


def passage_vectors(kb_path: Path, embedder: EmbeddingBackend) -> tuple[list[str], np.ndarray]:
    """The distinct passage vectors of a ``sqlite-fts`` file for ``embedder`` (as its
    searches read them), with their text hashes."""
    index = SqliteFtsIndex(kb_path)
    try:
        _, hashes, matrix = index.vectors(embedder, sentence_weight=0).passage_vectors()
    finally:
        index.close()
    _, first = np.unique(np.asarray(hashes), return_index=True)
    first.sort()
    return [hashes[n] for n in first], np.ascontiguousarray(matrix[first])


def measure_ann(
    kb_path: Path, embedder: EmbeddingBackend, queries: Sequence[str], k: int
) -> dict[str, Any]:
    """Build time, exact and graph p50, and recall@k of the graph against exact."""
    hashes, matrix = passage_vectors(kb_path, embedder)
    keys = keys_of(hashes)
    began, cpu = time.perf_counter(), time.process_time()
    index = AnnIndex(embedder.dim)
    index.sync(keys, lambda positions: matrix[positions])
    build_s, build_cpu_s = time.perf_counter() - began, time.process_time() - cpu
    order = np.argsort(keys)
    sorted_keys = keys[order]
    exact_ms, graph_ms, recall = [], [], []
    for vector in embed_unit(embedder, list(queries)):
        began = time.perf_counter()
        exact, _ = top_k(matrix, vector, k)
        exact_ms.append((time.perf_counter() - began) * 1000)
        began = time.perf_counter()
        found, _ = rescored_top_k(index, sorted_keys, order, matrix, vector, k)
        graph_ms.append((time.perf_counter() - began) * 1000)
        if len(exact):
            recall.append(len(set(found.tolist()) & set(exact.tolist())) / len(exact))
    return {
        "ann_vectors": len(keys),
        "ann_build_s": round(build_s, 2),
        "ann_build_cpu_s": round(build_cpu_s, 2),
        "exact_p50_ms": round(percentile(exact_ms, 50), 3),
        "ann_p50_ms": round(percentile(graph_ms, 50), 3),
        f"ann_recall@{k}": round(float(np.mean(recall)), 4) if recall else None,
    }
