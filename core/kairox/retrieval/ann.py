"""An approximate nearest-neighbour index (HNSW, from usearch) for large vector collections.

Exact search (:func:`kairox.retrieval.vectors.top_k`) reads every vector on every query,
which grows linearly with the collection; past :data:`ANN_THRESHOLD` vectors an HNSW
graph finds candidates in a few hundred distance computations instead. The candidates
are then scored exactly, on their own float32 vectors (:func:`rescored_top_k`), so the
graph only decides which rows are looked at, never the scores.

Keys are stable 64-bit numbers taken from each vector's text hash (:func:`key_of`), so
the index is built incrementally: :meth:`AnnIndex.sync` adds the vectors it has not seen
and removes those that left, and the file saved beside the vectors is memory-mapped by a
new process (:meth:`AnnIndex.open`). usearch is optional (``pip install 'kairox[ann]'``):
its wheel pulls in numkong's SIMD kernels, some 60 MB, which a collection below the
threshold never needs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from kairox.lazy_imports import LazyImport
from kairox.retrieval.vectors import SentenceVectors, normalise

__all__ = [
    "ANN_THRESHOLD",
    "USEARCH",
    "AnnIndex",
    "key_of",
    "keys_of",
    "rescored_top_k",
]

USEARCH = LazyImport(
    "usearch.index",
    needed_by="the approximate vector index of large collections",
    install="pip install 'kairox[ann]'",
)

#: Suggested passages from which to search through the graph (below: exactly); opt-in.
ANN_THRESHOLD = 100_000
#: Graph degree and build/search breadth: recall@10 against exact 0.985 after rescoring
#: on 10k hashing-embedder vectors, but 0.91 on 100k (benchmarks/README.md, "Scale").
CONNECTIVITY = 32
EXPANSION_ADD = 200
EXPANSION_SEARCH = 1024
#: Candidates looked up per result wanted, at least :data:`MIN_CANDIDATES`.
CANDIDATES_PER_RESULT = 10
MIN_CANDIDATES = 100
# Vectors added to the graph per call (bounds the memory one call copies).
_ADD_BLOCK = 8_192


def key_of(text_hash: str) -> int:
    """The graph key of a vector: the first 64 bits of its (hex) text hash."""
    return int(text_hash[:16], 16)


def keys_of(text_hashes: Iterable[str]) -> np.ndarray:
    """:func:`key_of` for many hashes, as the ``uint64`` array usearch takes."""
    return np.fromiter((key_of(h) for h in text_hashes), dtype=np.uint64)


class AnnIndex:
    """An HNSW graph of unit-length vectors (inner product), keyed by :func:`key_of`."""

    def __init__(self, dim: int, graph: Any | None = None) -> None:
        self.dim = dim
        if graph is None:
            graph = USEARCH.load().Index(
                ndim=dim,
                metric="ip",
                dtype="f32",
                connectivity=CONNECTIVITY,
                expansion_add=EXPANSION_ADD,
            )
        graph.expansion_search = EXPANSION_SEARCH
        self._graph = graph

    @classmethod
    def open(cls, path: Path, dim: int, *, view: bool = True) -> AnnIndex | None:
        """The index saved at ``path`` (memory-mapped when ``view``; to change it, open
        with ``view=False``), or ``None`` when there is none or it is unreadable or of
        another width (the caller then searches exactly, or rebuilds)."""
        if not path.is_file():
            return None
        try:
            graph = USEARCH.load().Index.restore(str(path), view=view)
        except (ValueError, RuntimeError, OSError):
            return None
        if graph is None or graph.ndim != dim:
            return None
        return cls(dim, graph)

    def __len__(self) -> int:
        return len(self._graph)

    def keys(self) -> np.ndarray:
        """Every key in the graph."""
        return np.asarray(self._graph.keys, dtype=np.uint64)

    def sync(
        self, keys: np.ndarray, vectors_of: Callable[[np.ndarray], np.ndarray]
    ) -> tuple[int, int]:
        """Make the graph hold exactly ``keys``: add those it lacks, with their vectors
        from ``vectors_of(positions in keys)``, a block at a time, and remove those no
        longer wanted. Returns ``(added, removed)``."""
        held = self.keys()
        gone = np.setdiff1d(held, keys, assume_unique=False)
        if len(gone):
            self._graph.remove(gone)
        missing = np.flatnonzero(~np.isin(keys, held))
        for start in range(0, len(missing), _ADD_BLOCK):
            positions = missing[start : start + _ADD_BLOCK]
            block = np.ascontiguousarray(vectors_of(positions), dtype=np.float32)
            self._graph.add(keys[positions], block, threads=1)
        return len(missing), len(gone)

    def save(self, path: Path) -> None:
        """Write the graph to ``path`` (through a temporary file, then renamed)."""
        partial = path.with_name(path.name + ".partial")
        self._graph.save(str(partial))
        partial.replace(path)

    def candidates(self, vector: np.ndarray, count: int) -> np.ndarray:
        """The keys of about ``count`` nearest vectors (approximate)."""
        if len(self._graph) == 0 or count < 1:
            return np.zeros(0, dtype=np.uint64)
        found = self._graph.search(np.asarray(vector, dtype=np.float32), count, threads=1)
        return np.asarray(found.keys, dtype=np.uint64)


def rescored_top_k(
    index: AnnIndex,
    sorted_keys: np.ndarray,
    rows_of_sorted: np.ndarray,
    matrix: np.ndarray,
    query: np.ndarray,
    k: int,
    *,
    sentences: SentenceVectors | None = None,
    sentence_weight: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``matrix`` and exact scores of the ``k`` best among the graph's
    candidates, best first (ties by row, rows scoring 0 or less left out, as
    :func:`~kairox.retrieval.vectors.top_k`, and sentence-aware as it is when
    ``sentences`` are given).

    ``sorted_keys`` are the rows' keys in ascending order and ``rows_of_sorted`` the row
    of each; a key the matrix does not hold (the graph is older) is left out.
    """
    query = normalise(query)[0]
    count = max(MIN_CANDIDATES, k * CANDIDATES_PER_RESULT)
    keys = index.candidates(query, count)
    at = np.searchsorted(sorted_keys, keys)
    inside = at < len(sorted_keys)
    at, keys = at[inside], keys[inside]
    rows = np.unique(rows_of_sorted[at[sorted_keys[at] == keys]])
    if len(rows) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    scores = matrix[rows] @ query
    if sentences is not None and sentence_weight and len(sentences.owners):
        best = sentences.best_of(query, rows)
        blended = (1 - sentence_weight) * scores + sentence_weight * best
        scores = np.where(np.isnan(best), scores, blended).astype(np.float32)
    order = np.lexsort((rows, -scores))[:k]
    best, best_scores = rows[order], scores[order]
    keep = best_scores > 0
    return best[keep].astype(np.int64), best_scores[keep]
