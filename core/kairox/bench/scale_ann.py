"""The approximate index measured by ``kairox bench scale --vectors``: the graph of a
knowledge base's passage vectors (:mod:`kairox.retrieval.ann`) against exact search.

The vectors are read back from the knowledge base the benchmark just filled; the
queries are embedded by the same backend. Reported: the graph's build time (one
thread), and per query, interleaved, exact top-k and the graph's rescored top-k, with
recall@k of the latter against the former.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kairox.bench.report import percentile
from kairox.embedding import EmbeddingBackend
from kairox.retrieval.ann import AnnIndex, keys_of, rescored_top_k
from kairox.retrieval.vectors import embed_unit, top_k


def passage_vectors(kb_path: Path, embedder: EmbeddingBackend) -> tuple[list[str], np.ndarray]:
    """The distinct passage vectors of a ``sqlite-fts`` file for ``embedder``, with their
    text hashes."""
    kind = (embedder.name, embedder.dim)
    select = (
        "FROM kb_embeddings e WHERE e.embedder = ? AND e.dim = ? AND e.text_hash IN "
        "(SELECT text_hash FROM kb_passages)"
    )
    db = sqlite3.connect(f"file:{kb_path}?mode=ro", uri=True)
    try:
        (count,) = db.execute(f"SELECT count(*) {select}", kind).fetchone()
        matrix = np.empty((count, embedder.dim), dtype=np.float32)
        hashes = []
        for row, (text_hash, vector) in enumerate(
            db.execute(f"SELECT e.text_hash, e.vector {select}", kind)
        ):
            hashes.append(text_hash)
            matrix[row] = np.frombuffer(vector, dtype=np.float32)
    finally:
        db.close()
    return hashes, matrix


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
