"""Exact vector search with numpy: one matrix product, never a per-row Python loop.

Rows are L2-normalised float32, so the dot product is the cosine similarity. Shared by
the workspace index and by in-memory vector sources (benchmarks, tests).

Sentence-aware scoring: a passage (a chunk, an abstract) can also carry one vector per
sentence (:class:`SentenceVectors`, sentences from
:func:`kairox.workspace.chunking.split_sentences`). Its score is then
``(1 - w) * cos(query, passage) + w * max_s cos(query, sentence_s)`` with ``w`` the
sentence weight (:data:`SENTENCE_WEIGHT` by default): a question usually restates one
sentence of the passage that answers it, and one vector for a whole passage blurs that
sentence among the others (or loses it past the embedder's input limit). On SciFact's
train split this lifts all-MiniLM-L6-v2 from nDCG@10 0.659 to 0.697, and its hybrid with
BM25 from 0.744 to 0.755 (``benchmarks/README.md``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from kairox.retrieval.embedding import EmbeddingBackend
from kairox.retrieval.model import Hit, Query, ScoreKind
from kairox.retrieval.scan import search_product
from kairox.support.native_memory import return_freed_memory


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (all-zero rows stay zero), as float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors.reshape(1, -1)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


#: How many texts one call to an embedding backend is given at most, when storing.
EMBED_BATCH = 256


def embed_unit(
    embedder: EmbeddingBackend, texts: Sequence[str], error: type[Exception] = ValueError
) -> np.ndarray:
    """``texts`` embedded by ``embedder`` as unit float32 rows, one per text (a batch of
    an indexing run: the memory the backend freed is handed back to the OS after it).

    :raises error: (the caller's error class) when the backend's answer is not one row of
        ``embedder.dim`` numbers per text, naming the backend and both shapes.
    """
    vectors = normalise(embedder.embed(list(texts)))
    # Batches come one after another for a whole index run: without this, the pages a
    # batch's activations used stay with the process (see kairox.support.native_memory).
    return_freed_memory()
    if vectors.shape != (len(texts), embedder.dim):
        raise error(
            f"embedding backend {embedder.name!r} returned shape {vectors.shape}, "
            f"expected ({len(texts)}, {embedder.dim})"
        )
    return vectors


#: How much a passage's best sentence counts against the passage's own vector (tuned on
#: SciFact's train split, ``benchmarks/tune_hybrid.py``); 0 scores passages alone.
SENTENCE_WEIGHT = 0.5


class DecodedRows:
    """Unit float32 rows kept compact elsewhere (a pack's float16 or int8 codes), decoded
    only when indexed with an array of rows: a search that reads a few of them (an
    approximate index's candidates) decodes those, never the whole matrix.

    :param decode: the float32 rows at an array of row positions.
    :param shape: ``(rows, dim)``.
    :param score: the rows' cosines with a unit query, given the row positions and the
        query (``None``: their decoded rows times the query); for rows that have their
        scores cheaper than their copies (vectors waiting in memory, scored in one pass).
    """

    def __init__(
        self,
        decode: Callable[[np.ndarray], np.ndarray],
        shape: tuple[int, int],
        score: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    ) -> None:
        self._decode = decode
        self._score = score
        self.shape = shape
        #: How many rows were decoded (or scored) so far (a row asked twice counts twice).
        self.decoded = 0

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        self.decoded += len(rows)
        return np.asarray(self._decode(rows), dtype=np.float32)

    def scores(self, rows: np.ndarray, unit_query: np.ndarray) -> np.ndarray:
        """The rows' cosines with ``unit_query`` (float32)."""
        if self._score is None:
            return self[rows] @ unit_query
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        self.decoded += len(rows)
        return np.asarray(self._score(rows, unit_query), dtype=np.float32)


def row_scores(
    matrix: np.ndarray | DecodedRows, rows: np.ndarray, unit_query: np.ndarray
) -> np.ndarray:
    """The cosines of ``matrix``'s ``rows`` with ``unit_query`` (only those rows read)."""
    if isinstance(matrix, DecodedRows):
        return matrix.scores(rows, unit_query)
    return np.asarray(matrix[rows], dtype=np.float32) @ unit_query


@dataclass(frozen=True)
class SentenceVectors:
    """Unit sentence vectors, each belonging to one row of a passage matrix.

    :param matrix: ``(vectors, dim)`` float32 rows, L2-normalised here; or unit rows
        decoded as they are read (:class:`DecodedRows`, with ``unit``).
    :param owners: for each sentence, the row of the passage it comes from. Sentences
        grouped by owner (ascending) are searched without reordering them per query.
    :param unit: the rows are unit length already (skips normalising a copy).
    :param rows: for each sentence, the row of ``matrix`` holding its vector, so that
        sentences with one text (the overlap of neighbouring chunks, repeated lines)
        share one vector and are scored once; ``None``: sentence ``i`` is row ``i``.
    """

    matrix: np.ndarray | DecodedRows
    owners: np.ndarray
    unit: bool = False
    rows: np.ndarray | None = None
    _order: np.ndarray | None = field(init=False, repr=False)  # None: grouped already
    _passages: np.ndarray = field(init=False, repr=False)
    _starts: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        matrix = self.matrix
        if not (self.unit and isinstance(matrix, DecodedRows)):
            matrix = np.asarray(matrix, dtype=np.float32)
        if len(matrix) and not self.unit:
            matrix = normalise(matrix)
        owners = np.asarray(self.owners, dtype=np.int64).reshape(-1)
        rows = None
        if self.rows is not None:
            rows = np.asarray(self.rows, dtype=np.int64).reshape(-1)
            if len(rows) != len(owners):
                raise ValueError(f"{len(owners)} sentence owners but {len(rows)} vector rows")
            if len(rows) and (rows.min() < 0 or rows.max() >= len(matrix)):
                raise ValueError(f"sentence vector rows must lie in 0..{len(matrix) - 1}")
        elif len(owners) != len(matrix):
            raise ValueError(f"{len(matrix)} sentence vectors but {len(owners)} owners")
        if len(owners) and owners.min() < 0:
            raise ValueError("sentence owners must be row positions (0 or more)")
        grouped = bool(np.all(owners[1:] >= owners[:-1]))
        order = None if grouped else np.argsort(owners, kind="stable")
        if order is not None and rows is not None:
            # Reorder the (small) row index once rather than the scores every query.
            owners, rows, order = owners[order], rows[order], None
        passages, starts = np.unique(owners if order is None else owners[order], return_index=True)
        object.__setattr__(self, "matrix", matrix)
        object.__setattr__(self, "owners", owners)
        object.__setattr__(self, "rows", rows)
        object.__setattr__(self, "_order", order)
        object.__setattr__(self, "_passages", passages)
        object.__setattr__(self, "_starts", starts)

    def best(self, unit_query: np.ndarray, rows: int) -> np.ndarray:
        """Per passage row, the best cosine of its sentences; NaN for a row with none."""
        best = np.full(rows, np.nan, dtype=np.float32)
        if len(self._passages):
            if unit_query.shape[0] != self.matrix.shape[1]:
                raise ValueError(
                    f"the query vector has {unit_query.shape[0]} dimensions; the sentence "
                    f"vectors have {self.matrix.shape[1]}"
                )
            matrix = self.matrix
            if isinstance(matrix, DecodedRows):  # every row is read: decode them all
                matrix = matrix[np.arange(len(matrix))]
            return self.best_from(search_product(matrix, unit_query), rows)
        return best

    def best_from(self, vector_scores: np.ndarray, rows: int) -> np.ndarray:
        """:meth:`best`, given every vector row's score already (an approximate index's
        estimates, say)."""
        best = np.full(rows, np.nan, dtype=np.float32)
        if len(self._passages):
            scores = vector_scores
            if self.rows is not None:
                scores = scores[self.rows]
            elif self._order is not None:
                scores = scores[self._order]
            inside = self._passages < rows
            best[self._passages[inside]] = np.maximum.reduceat(scores, self._starts)[inside]
        return best

    def best_of(self, unit_query: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """:meth:`best` for the passage rows ``positions`` only, reading only their
        sentences (a candidate set from an approximate index)."""
        best = np.full(len(positions), np.nan, dtype=np.float32)
        grouped = self.owners if self._order is None else self.owners[self._order]
        low = np.searchsorted(grouped, positions, "left")
        counts = np.searchsorted(grouped, positions, "right") - low
        has = counts > 0
        if not has.any():
            return best
        # Each position's range of sentences, without a Python loop (a filter can allow
        # tens of thousands of passages).
        lengths = counts[has]
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        picked = np.repeat(low[has] - starts, lengths) + np.arange(int(lengths.sum()))
        if self._order is not None:
            picked = self._order[picked]
        vector_rows = picked if self.rows is None else self.rows[picked]
        scores = row_scores(self.matrix, vector_rows, unit_query)
        best[has] = np.maximum.reduceat(scores, starts)
        return best


def passage_scores(
    matrix: np.ndarray,
    query: np.ndarray,
    sentences: SentenceVectors | None = None,
    sentence_weight: float = SENTENCE_WEIGHT,
) -> np.ndarray:
    """Every row's cosine with ``query``, sentence-aware when ``sentences`` are given.

    A row without sentences keeps its plain cosine, so a partly built sentence index
    still ranks every passage.
    """
    unit = normalise(query)[0]
    if unit.shape[0] != matrix.shape[1]:
        raise ValueError(
            f"the query vector has {unit.shape[0]} dimensions; the matrix has {matrix.shape[1]}"
        )
    scores = search_product(matrix, unit)
    if sentences is None or sentence_weight == 0 or not len(sentences.matrix):
        return scores
    best = sentences.best(unit, matrix.shape[0])
    blended = (1 - sentence_weight) * scores + sentence_weight * best
    return np.where(np.isnan(best), scores, blended).astype(np.float32)


def default_sentence_weight(embedder: EmbeddingBackend) -> float:
    """The sentence weight an embedder's vectors are searched with unless configured: its
    own ``sentence_weight`` when it declares one (0: no sentence vectors are made at all,
    for an embedder whose sentence vectors do not pay for their bytes), else
    :data:`SENTENCE_WEIGHT`."""
    return float(getattr(embedder, "sentence_weight", SENTENCE_WEIGHT))


def default_fusion_weight(embedder: object) -> float:
    """How much an embedder's vectors count against words in fusion unless configured: its
    own ``fusion_weight`` when it declares one (hashing's 0.05), else 1.0."""
    return float(getattr(embedder, "fusion_weight", 1.0))


def check_sentence_weight(weight: float) -> None:
    """Refuse a sentence weight outside ``[0, 1]`` (or not a number)."""
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 <= weight <= 1:
        raise ValueError(
            f"sentence_weight must be a number from 0 (passages only) to 1 (best sentence "
            f"only), got {weight!r}; {SENTENCE_WEIGHT} is the default"
        )


def top_k(
    matrix: np.ndarray,
    query: np.ndarray,
    k: int,
    *,
    mask: np.ndarray | None = None,
    sentences: SentenceVectors | None = None,
    sentence_weight: float = SENTENCE_WEIGHT,
) -> tuple[np.ndarray, np.ndarray]:
    """Row positions and scores of the ``k`` best rows, best first.

    Scores are cosines, blended with each row's best sentence when ``sentences`` are
    given (:func:`passage_scores`). Rows scoring 0 or less (no similarity at all) and
    rows outside ``mask`` are left out; ties are broken by row position so results are
    deterministic.
    """
    if matrix.shape[0] == 0 or k < 1:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    scores = passage_scores(matrix, query, sentences, sentence_weight)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    count = min(k, scores.shape[0])
    kth = scores[np.argpartition(-scores, count - 1)[count - 1]]
    # Every row tying the k-th score, not the ones argpartition happens to pick: the
    # lowest rows win a tie, as when scoring a subset of the rows (``ann.top_k_among``).
    best = np.flatnonzero(scores >= kth) if kth > 0 else np.flatnonzero(scores > 0)
    best = best[np.lexsort((best, -scores[best]))][:count]
    best = best[scores[best] > 0]
    return best, scores[best]


class VectorSource:
    """An in-memory dense source over pre-embedded documents (a ``Source``).

    With ``sentences`` (their vectors and owning rows) it scores sentence-aware, weighting
    each document's best sentence by ``sentence_weight`` (see the module docstring).
    """

    score_kind = ScoreKind.COSINE

    def __init__(
        self,
        name: str,
        embedder: EmbeddingBackend,
        ids: Sequence[str],
        texts: Sequence[str],
        matrix: np.ndarray,
        *,
        sentences: SentenceVectors | None = None,
        sentence_weight: float = SENTENCE_WEIGHT,
    ) -> None:
        if len(ids) != matrix.shape[0] or len(texts) != len(ids):
            raise ValueError("ids, texts and matrix rows must line up")
        check_sentence_weight(sentence_weight)
        self.name = name
        self.embedder = embedder
        self.ids = list(ids)
        self.texts = list(texts)
        self.matrix = normalise(matrix)
        self.sentences = sentences
        self.sentence_weight = sentence_weight

    def _search(self, query: Query) -> list[Hit]:
        if not query.text.strip():
            return []
        vector = query.embeddings.get(self.embedder.name)
        if vector is None:
            vector = self.embedder.embed([query.text])[0]
        rows, scores = top_k(
            self.matrix,
            np.asarray(vector),
            query.k,
            sentences=self.sentences,
            sentence_weight=self.sentence_weight,
        )
        return [
            Hit(self.ids[r], self.texts[r], float(s), self.name)
            for r, s in zip(rows.tolist(), scores.tolist(), strict=True)
        ]

    async def retrieve(self, query: Query) -> list[Hit]:
        return await asyncio.to_thread(self._search, query)
