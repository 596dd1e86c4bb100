"""The approximate indexes measured by ``kairox bench scale --vectors``: the linear int8
scan of a knowledge base's vectors (:mod:`kairox.retrieval.ann`) and their partition
(:mod:`kairox.retrieval.ann_ivf`) against exact search.

The vectors are the knowledge base's own pack, as the benchmark's ingest left it
(passages and sentences); the queries are embedded by the same backend. Reported: the
index's build time (wall and CPU, every core) and its rebuild time when nothing changed
(what an ingest that adds nothing pays), and per query, interleaved, exact top-k and the
index's rescored top-k, both sentence-aware as the knowledge base searches, with
recall@k of the latter against the former: with the shipped number of rescored
candidates (``ann_*``) and with twice as many (``ann_wide_*``), what more would buy; the
partition's as shipped (``ivf_*``, probing ``ivf_probes`` clusters) and with :data:`PROBE_SWEEP`
clusters probed (``ivf_p<probes>[_r<rows>]_*``), its build and
rebuild times ``ivf_build_s``, ``ivf_rebuild_s``); and recall counting a passage that
ties the k-th exact score as found (``recall_ties``).
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
from kairox.default_plugins.sqlite_vector_store import current_store
from kairox.default_plugins.sqlite_vectors import pack_location
from kairox.retrieval.ann import AnnIndex, CandidateIndex, candidates_for, rescored_top_k
from kairox.retrieval.ann_ivf import ROWS_PER_CANDIDATE, build_ivf, probes_for
from kairox.retrieval.embedding import EmbeddingBackend
from kairox.retrieval.vectors import SENTENCE_WEIGHT, embed_unit, top_k
from kairox.workspace.vector_pack import VectorPack, read_pack
from kairox.workspace.vector_store import pack_keys, search_arrays

# Exact scores this close are a tie (float32 products over different row subsets).
_TIE = 1e-5
#: Clusters probed per query in the partition's measurements, and how many of the best
#: scanned rows per candidate give candidates (``ivf_p<probes>[_r<rows>]_*``; ``None``:
#: the shipped rule, :func:`~kairox.retrieval.ann_ivf.probes_for` or
#: :data:`~kairox.retrieval.ann_ivf.ROWS_PER_CANDIDATE`, unnamed: ``ivf_*`` is as shipped).
PROBE_SWEEP = (
    (None, None),
    (8, None),
    (16, None),
    (32, None),
    (64, None),
    (128, None),
    (32, 4),
    (None, 4),
)


def stored_pack(kb_path: Path, embedder: EmbeddingBackend) -> VectorPack:
    """The vector pack (the store) of a ``sqlite-fts`` file for ``embedder``."""
    db = sqlite3.connect(f"file:{kb_path}?mode=ro", uri=True)
    try:
        stored = current_store(db, (embedder.name, embedder.dim))  # type: ignore[arg-type]
    finally:
        db.close()
    folder, key = pack_location(kb_path, embedder)
    pack = None
    if stored is not None and stored.arranged:
        pack = read_pack(folder, key, stored.token, embedder.dim, with_hashes=True)
    if pack is None:
        raise BenchError(f"{kb_path} has no vector pack for {embedder.name!r}")
    return pack


def measure_ann(
    kb_path: Path,
    embedder: EmbeddingBackend,
    queries: Sequence[str],
    k: int,
    sentence_weight: float = SENTENCE_WEIGHT,
) -> dict[str, Any]:
    """Build time, exact and approximate p50, and recall@k of the latter against exact."""
    pack = stored_pack(kb_path, embedder)
    keys = pack_keys(pack)
    _, matrix, sentences = search_arrays(pack, sentence_weight)
    began, cpu = time.perf_counter(), time.process_time()
    index, _ = AnnIndex.build(keys, pack.rows, embedder.dim)
    build_s, build_cpu_s = time.perf_counter() - began, time.process_time() - cpu
    began = time.perf_counter()
    AnnIndex.build(keys, pack.rows, embedder.dim, previous=index)
    rebuild_s = time.perf_counter() - began
    began, cpu = time.perf_counter(), time.process_time()
    ivf, _ = build_ivf(pack.rows, len(keys))
    ivf.codes = index.codes[ivf.order]  # as the knowledge base saves them, cluster by cluster
    ivf_build = time.perf_counter() - began, time.process_time() - cpu
    began = time.perf_counter()
    build_ivf(pack.rows, len(keys), previous=(ivf, keys), keys=keys)
    ivf_rebuild_s = time.perf_counter() - began
    # The shipped number of rescored candidates, and twice as many: what more would buy;
    # the partition at each number of probes.
    ways: dict[str, tuple[CandidateIndex, int]] = {
        "ann": (index, candidates_for(k)),
        "ann_wide": (index, 2 * candidates_for(k)),
    }
    shipped = probes_for(len(ivf.centroids))
    settings = {
        "ivf" + (f"_p{probes}" if probes else "") + (f"_r{rows}" if rows else ""): (
            probes or shipped,
            rows or ROWS_PER_CANDIDATE,
        )
        for probes, rows in PROBE_SWEEP
    }
    ways.update((name, (ivf, candidates_for(k))) for name in settings)
    exact_ms: list[float] = []
    spent: dict[str, list[float]] = {name: [] for name in ways}
    recall: dict[str, list[float]] = {name: [] for name in ways}
    tied: dict[str, list[float]] = {name: [] for name in ways}
    for vector in embed_unit(embedder, list(queries)):
        began = time.perf_counter()
        exact, exact_scores = top_k(
            matrix, vector, k, sentences=sentences, sentence_weight=sentence_weight
        )
        exact_ms.append((time.perf_counter() - began) * 1000)
        for name, (way, width) in ways.items():
            if name in settings:
                ivf.probes, ivf.rows_per_candidate = settings[name]
            began = time.perf_counter()
            found, scores = rescored_top_k(
                way,
                pack.chunk_rows,
                matrix,
                vector,
                k,
                sentences=sentences,
                sentence_weight=sentence_weight,
                candidates=width,
            )
            spent[name].append((time.perf_counter() - began) * 1000)
            if len(exact):
                hits = len(set(found.tolist()) & set(exact.tolist()))
                recall[name].append(hits / len(exact))
                # A passage scoring as the k-th does is as good a find (the corpus repeats
                # passages: copies tie, and the last bits of a product over a subset of
                # rows can order them otherwise than over all of them).
                level = exact_scores[-1] - _TIE
                tied[name].append(min(1.0, float(np.sum(scores >= level)) / len(exact)))
    report: dict[str, Any] = {
        "ann_passages": len(pack.ids),
        "ann_vectors": len(keys),
        "ann_build_s": round(build_s, 2),
        "ann_build_cpu_s": round(build_cpu_s, 2),
        "ann_rebuild_s": round(rebuild_s, 2),
        "ann_mb": round(index.codes.nbytes / 2**20, 1),
        "ivf_clusters": len(ivf.centroids),
        "ivf_probes": shipped,
        "ivf_build_s": round(ivf_build[0], 2),
        "ivf_build_cpu_s": round(ivf_build[1], 2),
        "ivf_rebuild_s": round(ivf_rebuild_s, 2),
        "exact_p50_ms": round(percentile(exact_ms, 50), 3),
    }
    for name, (_, width) in ways.items():
        report[f"{name}_candidates"] = width
        report[f"{name}_p50_ms"] = round(percentile(spent[name], 50), 3)
        report[f"{name}_p95_ms"] = round(percentile(spent[name], 95), 3)
        for measure, shares in ((f"recall@{k}", recall), (f"recall_ties@{k}", tied)):
            found_share = shares[name]
            report[f"{name}_{measure}"] = (
                round(float(np.mean(found_share)), 4) if found_share else None
            )
    return report
