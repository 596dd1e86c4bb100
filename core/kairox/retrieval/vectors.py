"""Exact vector search with numpy: one matrix product, never a per-row Python loop.

Rows are L2-normalised float32, so the dot product is the cosine similarity. Shared by
the workspace index and by in-memory vector sources (benchmarks, tests).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np

from kairox.embedding import EmbeddingBackend
from kairox.retrieval.model import Hit, Query, ScoreKind


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (all-zero rows stay zero), as float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors.reshape(1, -1)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def top_k(
    matrix: np.ndarray, query: np.ndarray, k: int, *, mask: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Row positions and cosine scores of the ``k`` best rows, best first.

    Rows scoring 0 or less (no similarity at all) and rows outside ``mask`` are left
    out; ties are broken by row position so results are deterministic.
    """
    if matrix.shape[0] == 0 or k < 1:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    unit = normalise(query)[0]
    if unit.shape[0] != matrix.shape[1]:
        raise ValueError(
            f"the query vector has {unit.shape[0]} dimensions; the matrix has {matrix.shape[1]}"
        )
    scores = matrix @ unit
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    count = min(k, scores.shape[0])
    best = np.argpartition(-scores, count - 1)[:count]
    best = best[np.lexsort((best, -scores[best]))]
    best = best[scores[best] > 0]
    return best, scores[best]


class VectorSource:
    """An in-memory dense source over pre-embedded documents (a ``WorkspaceRetriever``)."""

    score_kind = ScoreKind.COSINE

    def __init__(
        self,
        name: str,
        embedder: EmbeddingBackend,
        ids: Sequence[str],
        texts: Sequence[str],
        matrix: np.ndarray,
    ) -> None:
        if len(ids) != matrix.shape[0] or len(texts) != len(ids):
            raise ValueError("ids, texts and matrix rows must line up")
        self.name = name
        self.embedder = embedder
        self.ids = list(ids)
        self.texts = list(texts)
        self.matrix = normalise(matrix)

    def _search(self, query: Query) -> list[Hit]:
        if not query.text.strip():
            return []
        vector = query.embeddings.get(self.embedder.name)
        if vector is None:
            vector = self.embedder.embed([query.text])[0]
        rows, scores = top_k(self.matrix, np.asarray(vector), query.k)
        return [
            Hit(self.ids[r], self.texts[r], float(s), self.name)
            for r, s in zip(rows.tolist(), scores.tolist(), strict=True)
        ]

    async def retrieve(self, query: Query) -> list[Hit]:
        return await asyncio.to_thread(self._search, query)
