"""The workspace index's vectors stored once, in a pack, and its search arrays loaded.

Each workspace's vectors (per embedder) are stored once, compact (``vector_format``:
float16 by default), in a pack under ``vectors/`` next to the database, its rows sorted
by text hash with the hashes beside them (:mod:`kairox.workspace.vector_store`, shared
with the ``sqlite-fts`` knowledge bases). ``rag_vector_store`` records which pack is the
store and whether its index arrays still match the chunks and sentences (``arranged``):
every transaction that changes them, or adds vectors, clears it. Vectors embedded since
the last pack wait as float32 rows of ``rag_embeddings``; the end of ``kairox index``
merges the pack and those rows into a new pack, written aside and renamed, and only
then, in one transaction, records it and deletes the rows it took. A run killed at any
point leaves the recorded pack and the waiting rows, searched together.

An index written before (version 5: every vector a row, the pack a float32 copy recorded
in ``rag_vector_packs``) is searched as it was until the next run converts it.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from kairox.retrieval.vectors import SentenceVectors
from kairox.store.sqlite import immediate_transaction
from kairox.workspace.index_types import ChunkVector
from kairox.workspace.vector_pack import VectorPack, pack_key, pack_size, read_pack, remove_packs
from kairox.workspace.vector_store import (
    StoredVectors,
    StoreTables,
    hex_hashes,
    in_pack,
    merge_store,
    reclaim_space,
    search_arrays,
    unpack_rows,
)

# A pack being written has its vectors on disk, not in memory.
_NO_VECTORS = np.empty((0, 0), dtype=np.float32)
# Rows copied from the database at a time (1.5 MB of 384-wide vectors).
BLOCK_ROWS = 1024

# The text hashes of a workspace's chunks and of their sentences, each once, sorted.
_REFERENCED = (
    "SELECT text_hash FROM rag_chunks WHERE workspace = ? UNION SELECT s.text_hash "
    "FROM rag_sentences s JOIN rag_chunks c ON c.id = s.chunk_id WHERE c.workspace = ? "
    "ORDER BY 1"
)
# The hashes another workspace refers to while it has no arranged pack of this embedder:
# their rows are its vectors too (parameters: workspace, embedder, dim, twice).
_WAITING_ELSEWHERE = (
    "SELECT c.text_hash FROM rag_chunks c WHERE c.workspace != ? AND c.workspace NOT IN "
    "(SELECT workspace FROM rag_vector_store WHERE embedder = ? AND dim = ? AND arranged) "
    "UNION SELECT s.text_hash FROM rag_sentences s JOIN rag_chunks c ON c.id = s.chunk_id "
    "WHERE c.workspace != ? AND c.workspace NOT IN "
    "(SELECT workspace FROM rag_vector_store WHERE embedder = ? AND dim = ? AND arranged)"
)


class VectorPacksMixin:
    """The vector store and search arrays, mixed into
    :class:`~kairox.workspace.rag_index.WorkspaceRagIndex` (whose state they use)."""

    @property
    def _pack_folder(self) -> Path:
        return self.database.parent / "vectors"

    def _pack_key(self) -> str:
        return pack_key(self.workspace_id, self.embedder.name, self.embedder.dim)

    @property
    def _kind(self) -> tuple[str, int]:
        return (self.embedder.name, self.embedder.dim)

    def _tables(self) -> StoreTables:
        return StoreTables(
            referenced=_REFERENCED,
            embeddings="rag_embeddings",
            pack_rows="rag_pack_rows",
            params=(self.workspace_id, self.workspace_id),
        )

    def _unarrange(self, *, this_embedder_only: bool = False) -> None:
        """The chunks, sentences or vectors change: the packs' index arrays no longer
        match (their vectors stay the store) and an old layout's copy is forgotten. Call
        inside the transaction that changes them. Changed chunks or sentences concern
        every embedder's pack; new vectors only their own embedder's."""
        where, params = "workspace = ?", (self.workspace_id,)
        if this_embedder_only:
            where, params = f"{where} AND embedder = ? AND dim = ?", (*params, *self._kind)
        self._db.execute(f"DELETE FROM rag_vector_packs WHERE {where}", params)
        self._db.execute(f"UPDATE rag_vector_store SET arranged = 0 WHERE {where}", params)

    def _store(self) -> StoredVectors | None:
        """This workspace's recorded pack for this embedder."""
        row = self._db.execute(
            "SELECT token, form, arranged FROM rag_vector_store "
            "WHERE workspace = ? AND embedder = ? AND dim = ?",
            (self.workspace_id, *self._kind),
        ).fetchone()
        return None if row is None else StoredVectors(row[0], row[1], bool(row[2]))

    def _store_pack(self) -> VectorPack | None:
        """The recorded pack with its hashes, mapped (kept while the record stays)."""
        stored = self._store()
        if stored is None:
            return None
        if self._store_cache is None or self._store_cache[0] != stored.token:
            pack = read_pack(
                self._pack_folder,
                self._pack_key(),
                stored.token,
                self.embedder.dim,
                with_hashes=True,
            )
            self._store_cache = (stored.token, pack)
        return self._store_cache[1]

    def _refresh_pack(self) -> int | None:
        """Merge the waiting rows into a new pack unless the recorded one is current (or
        move its vectors back to rows, when packs are switched off); returns the bytes
        written. A pack that cannot be written leaves the rows waiting, searched with the
        recorded pack, until the next run."""
        key, stored = self._pack_key(), self._store()
        if not self.vector_pack or not self.vectors:
            # Words only keeps the vectors made before as rows, as packs switched off do:
            # nothing is lost, and switching back on embeds nothing again.
            self._unpack(stored)
            return None
        if stored is not None and stored.arranged and stored.form == self.vector_format:
            return None
        recorded = None if stored is None else stored.token
        if recorded is not None and self._store_pack() is None:
            # A pack that cannot be read is not merged: this run embedded its vectors
            # again as rows (_embed_missing found them missing), and they replace it.
            recorded = None
        try:
            # The write lock first: the count, the rows and the vectors are one
            # snapshot, and the new pack is recorded with the rows it took let go.
            with immediate_transaction(self._db):
                token = merge_store(
                    self._db,
                    self._tables(),
                    (self._pack_folder, key),
                    self._kind,
                    self.vector_format,
                    recorded,
                    self._arrange_store,
                )
                self._record(token)
        except OSError:
            return None
        remove_packs(self._pack_folder, key, keep=token)
        reclaim_space(self._db, sqlite3.OperationalError)
        return pack_size(self._pack_folder, key, token)

    def _record(self, token: str) -> None:
        """Make ``token`` the store and delete the rows it took, but those another
        workspace still waits on; inside the merge's transaction."""
        kind = self._kind
        self._db.execute(
            "INSERT OR REPLACE INTO rag_vector_store VALUES (?, ?, ?, ?, ?, 1)",
            (self.workspace_id, *kind, token, self.vector_format),
        )
        self._db.execute(
            "DELETE FROM rag_vector_packs WHERE workspace = ? AND embedder = ? AND dim = ?",
            (self.workspace_id, *kind),
        )
        self._db.execute(
            "DELETE FROM rag_embeddings WHERE embedder = ? AND dim = ? AND text_hash IN "
            f"(SELECT text_hash FROM temp.rag_pack_rows) AND text_hash NOT IN "
            f"({_WAITING_ELSEWHERE})",
            (*kind, self.workspace_id, *kind, self.workspace_id, *kind),
        )
        self._db.execute("DELETE FROM temp.rag_pack_rows")

    def _unpack(self, stored: StoredVectors | None) -> None:
        """Packs (or vectors) switched off: the store's vectors go back to rows, its
        files go."""
        key = self._pack_key()
        try:
            with immediate_transaction(self._db):
                if stored is not None:
                    location = (self._pack_folder, key)
                    unpack_rows(self._db, self._tables(), location, self._kind, stored.token)
                    self._db.execute(
                        "DELETE FROM rag_vector_store "
                        "WHERE workspace = ? AND embedder = ? AND dim = ?",
                        (self.workspace_id, *self._kind),
                    )
                self._unarrange(this_embedder_only=True)
        except OSError:
            return
        remove_packs(self._pack_folder, key)

    def _arrange_store(self, hashes: np.ndarray) -> VectorPack:
        """The new pack's index arrays (no vectors), from ``rag_pack_rows`` (which has
        each of its ``hashes``' row): the chunks and sentences whose vector it holds."""
        chunks = self._pairs(
            "SELECT c.id, r.row FROM rag_chunks c JOIN temp.rag_pack_rows r "
            "ON r.text_hash = c.text_hash WHERE c.workspace = ? ORDER BY c.id"
        )
        sentences = self._pairs(
            "SELECT s.chunk_id, r.row FROM rag_sentences s JOIN rag_chunks c "
            "ON c.id = s.chunk_id JOIN temp.rag_pack_rows r ON r.text_hash = s.text_hash "
            "WHERE c.workspace = ?"
        )
        pack, _ = self._arrange_rows(
            chunks[:, 0], chunks[:, 1], sentences[:, 0], sentences[:, 1], _NO_VECTORS
        )
        return pack

    def _pairs(self, sql: str) -> np.ndarray:
        """A two-integer-column query of this workspace as an ``(n, 2)`` array, streamed."""
        cursor = self._db.execute(sql, (self.workspace_id,))
        flat = np.fromiter(itertools.chain.from_iterable(cursor), np.int64)
        return flat.reshape(-1, 2)

    def _old_layout_token(self) -> str | None:
        """The token of an index written before the pack was the store: its copy of the
        rows, while it still matches them."""
        row = self._db.execute(
            "SELECT token FROM rag_vector_packs WHERE workspace = ? AND embedder = ? AND dim = ?",
            (self.workspace_id, *self._kind),
        ).fetchone()
        return None if row is None else row[0]

    def _stored_pack(self) -> VectorPack | None:
        """The pack to search as it is: the store when its arrays match the chunks (or
        an old layout's copy); ``None`` when the rows must be read too."""
        stored = self._store()
        if stored is not None:
            token = stored.token if stored.arranged else None
        else:
            token = self._old_layout_token() if self.vector_pack else None
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
        pack = self._stored_pack()
        if pack is None:
            pack = self._load_from_rows(with_sentences=self.sentence_weight != 0)
        ids, matrix, sentences = search_arrays(pack, self.sentence_weight)
        self._matrix_cache = (key, ids, matrix, sentences)
        return ids, matrix, sentences

    def _load_from_rows(self, *, with_sentences: bool) -> VectorPack:
        """The search arrays from the waiting rows and the store's vectors (a run not
        finished, or an index written before the pack was the store)."""
        chunks, found = self._rows(with_sentences=with_sentences)
        needed = {h for _, h in chunks} | {h for _, h in found}
        row_of, vectors = self._load_vectors(needed)
        store = self._store_pack()
        if store is not None:
            wanted = sorted(needed - row_of.keys())
            at = in_pack(store, wanted)
            picked = at >= 0
            start = len(vectors)
            row_of.update((h, start + n) for n, h in enumerate(itertools.compress(wanted, picked)))
            vectors = np.vstack([vectors, store.rows(at[picked])])
        return self._arrange(chunks, found, row_of, vectors)[0]

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
        """The current embedder's waiting vectors for the text hashes in ``needed``: (row
        of each hash, matrix of unit rows)."""
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
        """Hand the current embedder's waiting vectors for the text hashes in ``needed``
        to ``add`` in blocks of rows, each distinct hash once (neighbouring chunks
        overlap, so many sentences share a text and a vector); returns the row of each.
        ``add`` must copy what it keeps: the block's buffer is reused."""
        kind = self._kind
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
        block = np.empty((BLOCK_ROWS, self.embedder.dim), dtype=np.float32)
        row_of: dict[str, int] = {}
        filled = 0
        for text_hash, vector in cursor:
            if text_hash in needed and text_hash not in row_of:
                block[filled] = np.frombuffer(vector, dtype=np.float32)
                row_of[text_hash] = len(row_of)
                filled += 1
                if filled == BLOCK_ROWS:
                    add(block)
                    filled = 0
        if filled:
            add(block[:filled])
        return row_of

    def _fill_packed(self) -> None:
        """The temp table ``rag_packed``: the hashes the store holds, for SQL that must
        tell which chunks and sentences have no vector anywhere."""
        self._db.execute("CREATE TEMP TABLE IF NOT EXISTS rag_packed (text_hash TEXT PRIMARY KEY)")
        with self._db:
            self._db.execute("DELETE FROM temp.rag_packed")
            store = self._store_pack()
            if store is None:
                return
            for start in range(0, len(store.vectors), BLOCK_ROWS):
                hashes = hex_hashes(store, slice(start, start + BLOCK_ROWS))
                self._db.executemany(
                    "INSERT OR IGNORE INTO temp.rag_packed VALUES (?)", ((h,) for h in hashes)
                )

    def iter_chunk_vectors(self) -> Iterator[ChunkVector]:
        """Every chunk of this workspace with its vector from this index's embedder."""
        with self._lock:
            rows = self._db.execute(
                'SELECT c.relpath, c.chunk_index, c.start, c."end", c.text, c.text_hash, '
                "e.vector FROM rag_chunks c LEFT JOIN rag_embeddings e "
                "ON e.text_hash = c.text_hash AND e.embedder = ? AND e.dim = ? "
                "WHERE c.workspace = ? ORDER BY c.relpath, c.chunk_index",
                (*self._kind, self.workspace_id),
            ).fetchall()
            store = self._store_pack()
        packed = in_pack(store, [row[5] for row in rows if row[6] is None])
        from_store = iter(packed)
        for relpath, index, start, end, text, text_hash, blob in rows:
            if blob is not None:
                vector = np.frombuffer(blob, np.float32)
            else:
                at = int(next(from_store))
                if at < 0 or store is None:
                    continue  # not embedded (a run cut short)
                vector = store.rows(np.array([at]))[0]
            yield ChunkVector(relpath, index, start, end, text, text_hash, vector)
