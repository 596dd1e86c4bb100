"""A workspace's chunks and sentences numbered by distinct text in SQL, to write its pack.

A vector pack (:mod:`~kairox.workspace.vector_pack`) holds each distinct vector once and,
for every chunk and sentence, its row. Gathering that as Python rows (an id and a 64-
character hash each) and a dictionary of hashes costs a few hundred bytes a sentence,
which at the end of a large ``kairox index`` set the run's peak. Here the distinct hashes
go into a temporary table of the index's connection (on disk), whose rowid is the pack
row; what reaches Python is the vectors a block at a time and the pack's integer arrays.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable, Iterable

import numpy as np

from kairox.retrieval.embedding import EmbeddingBackend

__all__ = ["DistinctHashes", "add_in_blocks"]

# Rows copied from the database at a time (1.5 MB of 384-wide vectors).
BLOCK_ROWS = 1024


def add_in_blocks(blobs: Iterable[bytes], dim: int, add: Callable[[np.ndarray], None]) -> None:
    """Hand the float32 vectors stored as ``blobs`` to ``add`` in blocks of up to
    ``BLOCK_ROWS`` rows; ``add`` must copy what it keeps (the block's buffer is reused)."""
    block = np.empty((BLOCK_ROWS, dim), dtype=np.float32)
    filled = 0
    for blob in blobs:
        block[filled] = np.frombuffer(blob, dtype=np.float32)
        filled += 1
        if filled == BLOCK_ROWS:
            add(block)
            filled = 0
    if filled:
        add(block[:filled])


# The text hashes of a workspace's chunks (in id order) and of their sentences.
_HASHES = (
    "SELECT c.text_hash FROM rag_chunks c WHERE c.workspace = ? ORDER BY c.id",
    "SELECT s.text_hash FROM rag_sentences s JOIN rag_chunks c ON c.id = s.chunk_id "
    "WHERE c.workspace = ?",
)


class DistinctHashes:
    """The distinct text hashes of one workspace's chunks and sentences, numbered from 0
    (chunks first, in id order), for the vectors of ``embedder``."""

    def __init__(self, db: sqlite3.Connection, workspace: str, embedder: EmbeddingBackend) -> None:
        self._db = db
        self._workspace = workspace
        self._kind = (embedder.name, embedder.dim)
        self._dim = embedder.dim
        self.count = 0

    def __enter__(self) -> DistinctHashes:
        with self._db:
            self._db.execute(
                "CREATE TEMP TABLE IF NOT EXISTS rag_pack_rows (text_hash TEXT PRIMARY KEY)"
            )
            self._db.execute("DELETE FROM temp.rag_pack_rows")
            # Ignored duplicates take no rowid: the rowids run 1..count with no gaps.
            for hashes in _HASHES:
                self._db.execute(
                    f"INSERT OR IGNORE INTO temp.rag_pack_rows (text_hash) {hashes}",
                    (self._workspace,),
                )
        self.count = self._db.execute("SELECT count(*) FROM temp.rag_pack_rows").fetchone()[0]
        return self

    def __exit__(self, *exc: object) -> None:
        with self._db:
            self._db.execute("DROP TABLE IF EXISTS temp.rag_pack_rows")

    def complete(self) -> bool:
        """Whether every hash has its vector."""
        missing = self._db.execute(
            "SELECT 1 FROM temp.rag_pack_rows p LEFT JOIN rag_embeddings e "
            "ON e.text_hash = p.text_hash AND e.embedder = ? AND e.dim = ? "
            "WHERE e.text_hash IS NULL LIMIT 1",
            self._kind,
        ).fetchone()
        return missing is None

    def copy_vectors(self, add: Callable[[np.ndarray], None]) -> None:
        """Hand every hash's vector, in row order, to ``add`` in blocks (``add`` must copy
        what it keeps: the block's buffer is reused). Call after :meth:`complete`."""
        cursor = self._db.execute(
            "SELECT e.vector FROM temp.rag_pack_rows p JOIN rag_embeddings e "
            "ON e.text_hash = p.text_hash AND e.embedder = ? AND e.dim = ? ORDER BY p.rowid",
            self._kind,
        )
        add_in_blocks((vector for (vector,) in cursor), self._dim, add)

    def positions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(chunk ids ascending, their rows, each sentence's chunk id, its row)."""
        chunks = self._pairs(
            "SELECT c.id, p.rowid - 1 FROM rag_chunks c "
            "JOIN temp.rag_pack_rows p ON p.text_hash = c.text_hash "
            "WHERE c.workspace = ? ORDER BY c.id"
        )
        sentences = self._pairs(
            "SELECT s.chunk_id, p.rowid - 1 FROM rag_sentences s "
            "JOIN rag_chunks c ON c.id = s.chunk_id "
            "JOIN temp.rag_pack_rows p ON p.text_hash = s.text_hash WHERE c.workspace = ?"
        )
        return chunks[:, 0], chunks[:, 1], sentences[:, 0], sentences[:, 1]

    def _pairs(self, sql: str) -> np.ndarray:
        cursor = self._db.execute(sql, (self._workspace,))
        flat = np.fromiter(itertools.chain.from_iterable(cursor), np.int64)
        return flat.reshape(-1, 2)
