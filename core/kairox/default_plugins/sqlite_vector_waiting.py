"""Searching a ``sqlite-fts`` knowledge base's recorded pack through its approximate index
while vectors wait as database rows (an ingest running, or one killed part way).

The passages are arranged as exact search arranges them over the union (each document's
texts found among the waiting rows first, then the pack's; deleted documents gone), their
vectors numbered pack rows first, then waiting rows (:class:`JoinedRows`). Passages all of
whose vectors are pack rows get their candidates from the pack's index; every passage using
a waiting vector (a new or changed document) is a candidate too; the candidates are then
scored exactly, as exact search scores them. Only the candidates' pack rows are decoded.
"""

from __future__ import annotations

import numpy as np

from kairox.retrieval.ann import CandidateIndex, PassageRows
from kairox.retrieval.scan import search_product
from kairox.retrieval.vectors import DecodedRows, SentenceVectors
from kairox.workspace.vector_pack import VectorPack

__all__ = ["JoinedRows", "WaitingIndex"]


class JoinedRows:
    """A pack's rows, then the waiting rows, as one float32 matrix (indexed as the pack's
    own array is; only the pack rows asked are decoded)."""

    def __init__(self, pack: VectorPack, waiting: np.ndarray) -> None:
        self.pack = pack
        self.waiting = waiting
        self.packed = len(pack.vectors)
        self.shape: tuple[int, int] = (self.packed + len(waiting), waiting.shape[1])
        self.dtype = np.dtype(np.float32)
        self.ndim = 2
        self._scored: tuple[bytes, np.ndarray] | None = None  # the last query's

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, which: np.ndarray | slice | int) -> np.ndarray:
        if isinstance(which, slice) and which == slice(None):  # every row (exact search)
            return np.vstack([self.pack.rows(), self.waiting])
        rows = np.arange(len(self))[which] if isinstance(which, slice | int) else which
        rows = np.asarray(rows, dtype=np.int64)
        flat = rows.reshape(-1)
        found = np.empty((len(flat), self.shape[1]), dtype=np.float32)
        packed = flat < self.packed
        if packed.any():
            found[packed] = self.pack.rows(flat[packed])
        found[~packed] = self.waiting[flat[~packed] - self.packed]
        return found.reshape((*rows.shape, self.shape[1]))

    def scores(self, rows: np.ndarray, unit_query: np.ndarray) -> np.ndarray:
        """The ``rows``' cosines with ``unit_query``: the pack rows asked decoded, every
        waiting row scored in one pass (once per query), none of them copied."""
        rows = np.asarray(rows, dtype=np.int64)
        found = np.empty(len(rows), dtype=np.float32)
        packed = rows < self.packed
        if packed.any():
            found[packed] = self.pack.rows(rows[packed]) @ unit_query
        if not packed.all():
            found[~packed] = self._waiting_scores(unit_query)[rows[~packed] - self.packed]
        return found

    def _waiting_scores(self, unit_query: np.ndarray) -> np.ndarray:
        key = unit_query.tobytes()
        if self._scored is None or self._scored[0] != key:
            self._scored = (key, search_product(self.waiting, unit_query))
        return self._scored[1]


class WaitingIndex:
    """A :class:`~kairox.retrieval.ann.CandidateIndex` over a joined layout: the pack's
    ``index`` picks among the passages whose vectors are all pack rows (below
    ``packed``), and every passage using a waiting row is a candidate."""

    def __init__(self, index: CandidateIndex, layout: VectorPack, packed: int) -> None:
        self.index = index
        chunk_rows = np.asarray(layout.chunk_rows, dtype=np.int64)
        owners = np.asarray(layout.owners, dtype=np.int64)
        sentence_rows = np.asarray(layout.sentence_rows, dtype=np.int64)
        fresh = chunk_rows >= packed
        fresh[owners[sentence_rows >= packed]] = True
        #: Passages (positions) using a waiting row: always scored exactly.
        self.fresh = np.flatnonzero(fresh)
        self._packed = np.flatnonzero(~fresh)
        position = np.full(len(chunk_rows), -1, dtype=np.int64)
        position[self._packed] = np.arange(len(self._packed))
        # Kept as they are: the partition keeps what it derives from them by identity.
        self._chunk_rows = chunk_rows[self._packed]
        kept = ~fresh[owners]
        self._sentences = None
        if kept.any():
            dim = layout.vectors.shape[1]
            unread = DecodedRows(_never_read, (packed, dim))  # the index reads its codes
            self._sentences = SentenceVectors(
                unread, position[owners[kept]], unit=True, rows=sentence_rows[kept]
            )
        self._rows = len(layout.vectors)

    def __len__(self) -> int:
        return self._rows

    def candidates(self, unit_query: np.ndarray, layout: PassageRows, count: int) -> np.ndarray:
        """The index's ``count`` best passages among those of pack rows alone, and every
        passage using a waiting row (ascending positions)."""
        found = np.zeros(0, dtype=np.int64)
        if len(self._packed):
            sentences = self._sentences if layout.sentences is not None else None
            inner = PassageRows(self._chunk_rows, sentences, layout.sentence_weight)
            picked = self.index.candidates(unit_query, inner, min(count, len(self._packed)))
            found = self._packed[picked]
        return np.union1d(found, self.fresh)


def _never_read(rows: np.ndarray) -> np.ndarray:
    raise AssertionError("an index estimates sentences from its codes, not from vectors")
