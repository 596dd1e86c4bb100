"""The workspace index's vector packs kept current, and its search arrays loaded."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from kairox.retrieval.vectors import SentenceVectors
from kairox.workspace.index_pack_rows import DistinctHashes, add_in_blocks
from kairox.workspace.vector_pack import (
    PackWriter,
    VectorPack,
    pack_key,
    pack_size,
    read_pack,
    remove_packs,
)

# A pack being written has its vectors on disk, not in memory.
_NO_VECTORS = np.empty((0, 0), dtype=np.float32)


class VectorPacksMixin:
    """Vector packs and search arrays, mixed into
    :class:`~kairox.workspace.rag_index.WorkspaceRagIndex` (whose state they use)."""

    @property
    def _pack_folder(self) -> Path:
        return self.database.parent / "vectors"

    def _pack_key(self) -> str:
        return pack_key(self.workspace_id, self.embedder.name, self.embedder.dim)

    def _drop_packs(self, *, this_embedder_only: bool = False) -> None:
        """Forget this workspace's packs; call inside the transaction that changes its
        rows, so no reader can pair old files with new rows. Changed chunks or sentences
        concern every embedder's pack; new vectors only their own embedder's."""
        if this_embedder_only:
            self._db.execute(
                "DELETE FROM rag_vector_packs WHERE workspace = ? AND embedder = ? AND dim = ?",
                (self.workspace_id, self.embedder.name, self.embedder.dim),
            )
        else:
            self._db.execute(
                "DELETE FROM rag_vector_packs WHERE workspace = ?", (self.workspace_id,)
            )

    def _refresh_pack(self) -> int | None:
        """Write a pack of the current rows unless a valid one exists (or delete the
        packs, when they are switched off); returns the bytes written. Only a complete
        index (every chunk and sentence has its vector) is packed; a pack that cannot be
        written is skipped: searches then load from the database, as without packs."""
        key = self._pack_key()
        if not self.vector_pack or not self.vectors:
            with self._db:
                self._drop_packs(this_embedder_only=True)
            remove_packs(self._pack_folder, key)
            return None
        if self._pack_token() is not None:
            return None
        # The vectors go straight from the database into the pack's file, block by
        # block, and each chunk and sentence is numbered in SQL (a temporary table of
        # the distinct text hashes): this runs at the end of an index run, and neither a
        # matrix of every vector nor a Python row per sentence may follow the corpus.
        try:
            with DistinctHashes(self._db, self.workspace_id, self.embedder) as distinct:
                if not distinct.complete():
                    return None
                with PackWriter(
                    self._pack_folder, key, rows=distinct.count, dim=self.embedder.dim
                ) as writer:
                    distinct.copy_vectors(writer.add)
                    pack, complete = self._arrange_rows(*distinct.positions(), _NO_VECTORS)
                    if not complete or not len(pack.ids):
                        return None
                    token = writer.finish(pack)
        except OSError:
            return None
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO rag_vector_packs VALUES (?, ?, ?, ?)",
                (self.workspace_id, self.embedder.name, self.embedder.dim, token),
            )
        remove_packs(self._pack_folder, key, keep=token)
        return pack_size(self._pack_folder, key, token)

    def _pack_token(self) -> str | None:
        """The token of the pack that matches this workspace's rows for this embedder."""
        row = self._db.execute(
            "SELECT token FROM rag_vector_packs WHERE workspace = ? AND embedder = ? AND dim = ?",
            (self.workspace_id, self.embedder.name, self.embedder.dim),
        ).fetchone()
        return None if row is None else row[0]

    def _stored_pack(self) -> VectorPack | None:
        token = self._pack_token() if self.vector_pack else None
        if token is None:
            return None
        return read_pack(self._pack_folder, self._pack_key(), token, self.embedder.dim)

    def _matrix(self) -> tuple[np.ndarray, np.ndarray, SentenceVectors | None]:
        """(chunk ids, vectors, sentence vectors) of this workspace for the current
        embedder, cached until the database changes."""
        # data_version changes when another connection commits; total_changes when we do.
        key = (self._db.execute("PRAGMA data_version").fetchone()[0], self._db.total_changes)
        if self._matrix_cache is not None and self._matrix_cache[0] == key:
            return self._matrix_cache[1:]
        with_sentences = self.sentence_weight != 0
        pack = self._stored_pack()
        if pack is None:
            pack, _ = self._load_from_rows(with_sentences=with_sentences)
        ids, matrix = pack.ids, np.asarray(pack.vectors[pack.chunk_rows])
        sentences = None
        if with_sentences and len(pack.owners):
            sentences = SentenceVectors(
                pack.vectors, pack.owners, unit=True, rows=pack.sentence_rows
            )
        self._matrix_cache = (key, ids, matrix, sentences)
        return ids, matrix, sentences

    def _load_from_rows(self, *, with_sentences: bool) -> tuple[VectorPack, bool]:
        """Assemble the search arrays from the database rows; also whether every chunk
        (and sentence, if asked for) had its vector."""
        chunks, found = self._rows(with_sentences=with_sentences)
        row_of, distinct = self._load_vectors({h for _, h in chunks} | {h for _, h in found})
        return self._arrange(chunks, found, row_of, distinct)

    def _rows(self, *, with_sentences: bool) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
        """(id, text hash) of this workspace's chunks, ascending, and (chunk id, text
        hash) of their sentences (none unless ``with_sentences``)."""
        chunks = self._db.execute(
            "SELECT id, text_hash FROM rag_chunks WHERE workspace = ? ORDER BY id",
            (self.workspace_id,),
        ).fetchall()
        found: list[tuple[int, str]] = []
        if with_sentences and chunks:
            # No ORDER BY: SQLite would sort in a temporary B-tree; numpy groups the
            # sentences by chunk in _arrange in one pass instead.
            found = self._db.execute(
                "SELECT s.chunk_id, s.text_hash FROM rag_sentences s "
                "JOIN rag_chunks c ON c.id = s.chunk_id WHERE c.workspace = ?",
                (self.workspace_id,),
            ).fetchall()
        return chunks, found

    @classmethod
    def _arrange(
        cls,
        chunks: list[tuple[int, str]],
        found: list[tuple[int, str]],
        row_of: dict[str, int],
        vectors: np.ndarray,
    ) -> tuple[VectorPack, bool]:
        """The pack of ``chunks`` and their sentences ``found`` whose vectors are the
        rows ``row_of`` of ``vectors``; also whether every one of them had its vector."""
        return cls._arrange_rows(
            np.fromiter((i for i, _ in chunks), np.int64, len(chunks)),
            np.fromiter((row_of.get(h, -1) for _, h in chunks), np.int64, len(chunks)),
            np.fromiter((c for c, _ in found), np.int64, len(found)),
            np.fromiter((row_of.get(h, -1) for _, h in found), np.int64, len(found)),
            vectors,
        )

    @staticmethod
    def _arrange_rows(
        chunk_ids: np.ndarray,
        chunk_rows: np.ndarray,
        owner_ids: np.ndarray,
        vector_rows: np.ndarray,
        vectors: np.ndarray,
    ) -> tuple[VectorPack, bool]:
        """The pack of the chunks ``chunk_ids`` (ascending) whose vectors are the rows
        ``chunk_rows`` of ``vectors``, and of sentences of the chunks ``owner_ids`` whose
        vectors are the rows ``vector_rows`` (-1: none); also whether every one had its
        vector."""
        # A chunk whose vector is missing (embedding interrupted) is not searched.
        embedded = chunk_rows >= 0
        ids = chunk_ids[embedded]
        owners = np.searchsorted(ids, owner_ids)
        # Sentences without a vector, or of a chunk that is not searched, are not
        # searched either.
        keep = np.zeros(len(owner_ids), dtype=bool)
        if len(ids):
            keep = (owners < len(ids)) & (ids[np.minimum(owners, len(ids) - 1)] == owner_ids)
        keep &= vector_rows >= 0
        order = np.flatnonzero(keep)[np.argsort(owners[keep], kind="stable")]
        pack = VectorPack(
            ids=ids,
            chunk_rows=chunk_rows[embedded],
            owners=owners[order],
            sentence_rows=vector_rows[order],
            vectors=vectors,
        )
        return pack, bool(embedded.all() and keep.all())

    def _load_vectors(self, needed: set[str]) -> tuple[dict[str, int], np.ndarray]:
        """The current embedder's vectors for the text hashes in ``needed``: (row of each
        hash, matrix of unit rows)."""
        # Each vector is copied straight into one matrix as it is read: holding the rows
        # (and joining their bytes) first would need the vectors' size twice over.
        matrix = np.empty((len(needed), self.embedder.dim), dtype=np.float32)
        filled = 0

        def place(block: np.ndarray) -> None:
            nonlocal filled
            matrix[filled : filled + len(block)] = block
            filled += len(block)

        row_of = self._copy_vectors(needed, place)
        # Stored vectors are unit length already (_embed normalises them).
        return row_of, matrix[: len(row_of)]

    def _copy_vectors(self, needed: set[str], add: Callable[[np.ndarray], None]) -> dict[str, int]:
        """Hand the current embedder's vectors for the text hashes in ``needed`` to
        ``add`` in blocks of rows, each distinct hash once (neighbouring chunks overlap,
        so many sentences share a text and a vector); returns the row of each. ``add``
        must copy what it keeps: the block's buffer is reused."""
        kind = (self.embedder.name, self.embedder.dim)
        everything = self._db.execute("SELECT count(*) FROM rag_embeddings").fetchone()[0]
        if everything <= 2 * len(needed):
            # Mostly this workspace's vectors: reading the table straight through beats
            # looking each hash up (two B-tree searches a vector).
            cursor = self._db.execute(
                "SELECT text_hash, vector FROM rag_embeddings WHERE embedder = ? AND dim = ?",
                kind,
            )
        else:
            cursor = self._db.execute(
                "SELECT text_hash, vector FROM rag_embeddings WHERE embedder = ? AND dim = ? "
                "AND text_hash IN (SELECT value FROM json_each(?))",
                (*kind, json.dumps(sorted(needed))),
            )
        row_of: dict[str, int] = {}

        def distinct() -> Iterator[bytes]:
            for text_hash, vector in cursor:
                if text_hash in needed and text_hash not in row_of:
                    row_of[text_hash] = len(row_of)
                    yield vector

        add_in_blocks(distinct(), self.embedder.dim, add)
        return row_of
