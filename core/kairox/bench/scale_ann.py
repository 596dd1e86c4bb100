"""The approximate index measured by ``kairox bench scale --vectors``: the index of a
knowledge base's vectors (:mod:`kairox.retrieval.ann`) against exact search.

The vectors are the knowledge base's own pack, as the benchmark's ingest left it
(passages and sentences); the queries are embedded by the same backend. Reported: the
index's build time (wall and CPU, every core) and its rebuild time when nothing changed
(what an ingest that adds nothing pays), and per query, interleaved, exact top-k and the
index's rescored top-k, both sentence-aware as the knowledge base searches, with
recall@k of the latter against the former.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kairox.bench import BenchError
from kairox.bench.report import percentile
from kairox.default_plugins.sqlite_vectors import pack_location
from kairox.embedding import EmbeddingBackend
from kairox.retrieval.ann import AnnIndex, keys_of, rescored_top_k
from kairox.retrieval.vectors import SENTENCE_WEIGHT, SentenceVectors, embed_unit, top_k
from kairox.workspace.vector_pack import VectorPack, read_pack


def stored_pack(kb_path: Path, embedder: EmbeddingBackend) -> tuple[VectorPack, np.ndarray]:
    """The vector pack of a ``sqlite-fts`` file for ``embedder``, with each row's key."""
    kind = (embedder.name, embedder.dim)
    db = sqlite3.connect(f"file:{kb_path}?mode=ro", uri=True)
    try:
        token = db.execute(
            "SELECT token FROM kb_vector_packs WHERE embedder = ? AND dim = ?", kind
        ).fetchone()
        hashes = db.execute(
            "SELECT text_hash FROM kb_embeddings WHERE embedder = ? AND dim = ? ORDER BY rowid",
            kind,
        )
        keys = keys_of(h for (h,) in hashes)
    finally:
        db.close()
    folder, key = pack_location(kb_path, embedder)
    pack = None if token is None else read_pack(folder, key, token[0], embedder.dim)
    if pack is None or len(pack.vectors) != len(keys):
        raise BenchError(f"{kb_path} has no vector pack for {embedder.name!r}")
    return pack, keys


def measure_ann(
    kb_path: Path,
    embedder: EmbeddingBackend,
    queries: Sequence[str],
    k: int,
    sentence_weight: float = SENTENCE_WEIGHT,
) -> dict[str, Any]:
    """Build time, exact and approximate p50, and recall@k of the latter against exact."""
    pack, keys = stored_pack(kb_path, embedder)
    matrix = np.asarray(pack.vectors[pack.chunk_rows])
    sentences = None
    if sentence_weight and len(pack.owners):
        sentences = SentenceVectors(pack.vectors, pack.owners, unit=True, rows=pack.sentence_rows)
    began, cpu = time.perf_counter(), time.process_time()
    index, _ = AnnIndex.build(keys, lambda positions: pack.vectors[positions], embedder.dim)
    build_s, build_cpu_s = time.perf_counter() - began, time.process_time() - cpu
    began = time.perf_counter()
    AnnIndex.build(keys, lambda positions: pack.vectors[positions], embedder.dim, previous=index)
    rebuild_s = time.perf_counter() - began
    exact_ms, ann_ms, recall = [], [], []
    for vector in embed_unit(embedder, list(queries)):
        began = time.perf_counter()
        exact, _ = top_k(matrix, vector, k, sentences=sentences, sentence_weight=sentence_weight)
        exact_ms.append((time.perf_counter() - began) * 1000)
        began = time.perf_counter()
        found, _ = rescored_top_k(
            index,
            pack.chunk_rows,
            matrix,
            vector,
            k,
            sentences=sentences,
            sentence_weight=sentence_weight,
        )
        ann_ms.append((time.perf_counter() - began) * 1000)
        if len(exact):
            recall.append(len(set(found.tolist()) & set(exact.tolist())) / len(exact))
    return {
        "ann_passages": len(pack.ids),
        "ann_vectors": len(keys),
        "ann_build_s": round(build_s, 2),
        "ann_build_cpu_s": round(build_cpu_s, 2),
        "ann_rebuild_s": round(rebuild_s, 2),
        "ann_mb": round(index.codes.nbytes / 2**20, 1),
        "exact_p50_ms": round(percentile(exact_ms, 50), 3),
        "ann_p50_ms": round(percentile(ann_ms, 50), 3),
        f"ann_recall@{k}": round(float(np.mean(recall)), 4) if recall else None,
    }
