"""Vectors beside a ``sqlite-fts`` knowledge base, so it searches by meaning as well.

With ``embedding_backend`` set, every document stored is also embedded, whole and
sentence by sentence (when ``sentence_weight`` is not 0), as the workspace index embeds
its chunks: vectors are addressed by (text hash, embedder), so an unchanged text is never
embedded twice and vectors of two models never meet, and searches are sentence-aware (a
document's score blends its own cosine with its best sentence's). Each vector is stored
once, compact, in a pack next to the knowledge base that a new process maps at once
(:mod:`kairox.default_plugins.sqlite_vector_store`); vectors embedded since the last
ingest's end wait as rows of the database. Which texts each document has vectors of is
one row a document (:mod:`kairox.default_plugins.sqlite_vector_keys`). With
``ann_threshold`` passages on (and with numkong installed), the pack gets an approximate
index of its vectors beside it (:mod:`kairox.retrieval.ann`: int8 codes, rebuilt after
each ingest from the previous one's codes, quantising only new vectors); unfiltered
searches then score the index's candidates exactly instead of every passage, and, while
vectors wait as rows, the index's candidates among the pack's passages and every passage
using a waiting row (:mod:`kairox.default_plugins.sqlite_vector_waiting`). A filtered
search scores every passage the filter allows exactly, decoding only theirs when they are
few (:data:`~kairox.workspace.vector_store.FILTERED_SHARE`).
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import apsw
import numpy as np

from kairox.default_plugins.sqlite_vector_index import Approximate, PackIndex
from kairox.default_plugins.sqlite_vector_keys import (
    REFERENCED,
    arrange,
    digest,
    prepare_split,
    upgrade,
)
from kairox.default_plugins.sqlite_vector_keys import SCHEMA as KEYS_SCHEMA
from kairox.default_plugins.sqlite_vector_store import (
    STORE_SCHEMA,
    current_store,
    reclaim_space,
    record_store,
    unarrange,
    unpack_store,
    write_store,
)
from kairox.default_plugins.sqlite_vector_waiting import JoinedRows, WaitingIndex
from kairox.retrieval import Document
from kairox.retrieval.ann import rescored_top_k, top_k_among
from kairox.retrieval.embedding import EmbeddingBackend
from kairox.retrieval.vectors import EMBED_BATCH, embed_unit, top_k
from kairox.store.sqlite import immediate_transaction
from kairox.support.terminal import printable
from kairox.workspace.chunking import split_sentences
from kairox.workspace.vector_pack import (
    VectorPack,
    adopt_pack,
    pack_key,
    read_pack,
    remove_packs,
)
from kairox.workspace.vector_store import FILTERED_SHARE, PackArrays, digests, find_rows

_SCHEMA = (
    *KEYS_SCHEMA,
    # Vectors waiting for the next pack (the store, with vector_pack = false), by hex hash.
    "CREATE TABLE IF NOT EXISTS kb_embeddings (text_hash TEXT NOT NULL, embedder TEXT NOT NULL,"
    " dim INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (text_hash, embedder, dim))",
    # Before the pack was the store: which pack held a copy of kb_embeddings (read while
    # an old knowledge base has not been ingested into since; the next ingest drops it).
    "CREATE TABLE IF NOT EXISTS kb_vector_packs (embedder TEXT NOT NULL, dim INTEGER NOT NULL,"
    " token TEXT NOT NULL, PRIMARY KEY (embedder, dim))",
    *STORE_SCHEMA,
)

_NO_VECTORS = np.empty((0, 0), dtype=np.float32)

# Recorded packs (folder, token) found missing, told once per process.
_LOST: set[tuple[Path, str]] = set()


def _tell_lost(folder: Path, token: str) -> None:
    """Say once that the recorded pack ``token`` in ``folder`` cannot be read: its
    vectors are gone (a file copied without its folder, the partition's files of an
    int8 pack deleted), and the next ingest embeds the documents again."""
    if (folder, token) in _LOST:
        return
    _LOST.add((folder, token))
    print(
        printable(
            f"warning: the vector pack of this knowledge base is missing or unreadable "
            f"(in {folder}: copied or moved without that folder, or files deleted from "
            "it); searches are by words only until the next `kairox kb ingest` of its "
            "documents embeds them again and writes a new pack"
        ),
        file=sys.stderr,
    )


def pack_location(path: Path, embedder: EmbeddingBackend) -> tuple[Path, str]:
    """The folder and key of the packs (and approximate indexes) of the knowledge-base
    file ``path`` for ``embedder``: the folder beside the file, named after it, and a key
    of the embedder alone (the folder is the file's), so a knowledge base moved or
    copied with its folder finds its vectors."""
    return path.parent / f"{path.name}.vectors", pack_key("", embedder.name, embedder.dim)


def _path_key(path: Path, embedder: EmbeddingBackend) -> str:
    """The key packs had before :func:`pack_location`'s: of the file's absolute path."""
    return pack_key(str(path.resolve()), embedder.name, embedder.dim)


def passage_text(document: Document) -> str:
    """What is embedded for a document: its title line, then its text."""
    return f"{document.title}\n{document.text}" if document.title else document.text


@dataclass(frozen=True)
class _Prepared:
    id: str
    text_hash: bytes
    sentences: tuple[bytes, ...]  # text digests, in order
    vectors: list[tuple[bytes, bytes]]  # (text digest, vector) not stored yet


class DocumentVectors:
    """The vectors of one knowledge-base file for one embedder (shares its connection)."""

    def __init__(
        self,
        db: apsw.Connection,
        lock: threading.Lock,
        path: Path,
        embedder: EmbeddingBackend,
        *,
        sentence_weight: float,
        vector_pack: bool = True,
        vector_format: str = "float16",
        ann_threshold: int | None = None,
    ) -> None:
        self._db = db
        self._lock = lock
        self.embedder = embedder
        self.sentence_weight = sentence_weight
        self.vector_pack = vector_pack
        self.vector_format = vector_format
        self.ann_threshold = ann_threshold
        self._pack_folder, self._pack_key = pack_location(path, embedder)
        self._index = PackIndex(self._pack_folder, self._pack_key, embedder.dim, ann_threshold)
        self._kind = (embedder.name, embedder.dim)
        self._cache: tuple[tuple[int, int], PackArrays, Approximate | None] | None = None
        self._store_cache: tuple[str, VectorPack | None] | None = None
        with self._lock:
            if upgrade(self._db):  # the layout before: its rows' pages given back
                reclaim_space(self._db)
        with self._lock, self._db:
            for statement in _SCHEMA:
                self._db.execute(statement)
        with self._lock:
            self._adopt_packs(path)

    def _adopt_packs(self, path: Path) -> None:
        """Packs written when their names came from the file's absolute path, renamed to
        :func:`pack_location`'s key: found by the tokens the database records, wherever
        the knowledge base was when they were written (nothing is embedded again)."""
        recorded = [
            row[0]
            for table in ("kb_vector_store", "kb_vector_packs")
            for row in self._db.execute(
                f"SELECT token FROM {table} WHERE embedder = ? AND dim = ?", self._kind
            )
        ]
        adopted = [adopt_pack(self._pack_folder, self._pack_key, token) for token in recorded]
        if any(adopted):  # older packs left under the old key go (not moved since)
            remove_packs(self._pack_folder, _path_key(path, self.embedder))

    # -- writing ------------------------------------------------------------------

    def embedded_ids(self) -> set[str]:
        """The ids whose passage vector this embedder has made (waiting or stored)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT t.id, t.passage, e.rowid IS NOT NULL FROM kb_texts t LEFT JOIN "
                "kb_embeddings e ON e.text_hash = lower(hex(t.passage)) AND e.embedder = ? "
                "AND e.dim = ?",
                self._kind,
            ).fetchall()
            stored = self._has_stored([h for _, h, waiting in rows if not waiting])
        return {doc_id for doc_id, _, waiting in rows if waiting} | {
            doc_id for (doc_id, h, waiting) in rows if not waiting and h in stored
        }

    def _has_stored(self, hashes: Sequence[bytes]) -> set[bytes]:
        """Those of the digests ``hashes`` the pack holds."""
        pack = self._pack_store()
        if pack is None or pack.hashes is None:
            return set()
        rows = find_rows(pack.hashes, np.array(hashes, dtype="S32"))
        return {h for h, row in zip(hashes, rows, strict=True) if row >= 0}

    def _pack_store(self) -> VectorPack | None:
        """The recorded pack with its hashes (kept while it stays current)."""
        stored = current_store(self._db, self._kind)
        if stored is None:
            return None
        if self._store_cache is None or self._store_cache[0] != stored.token:
            pack = read_pack(
                self._pack_folder, self._pack_key, stored.token, self.embedder.dim, with_hashes=True
            )
            if pack is None:
                _tell_lost(self._pack_folder, stored.token)
            self._store_cache = (stored.token, pack)
        return self._store_cache[1]

    def _have(self, hashes: Sequence[bytes]) -> set[bytes]:
        with self._lock:
            waiting = {
                bytes.fromhex(row[0])
                for row in self._db.execute(
                    "SELECT text_hash FROM kb_embeddings WHERE embedder = ? AND dim = ? AND "
                    "text_hash IN (SELECT value FROM json_each(?))",
                    (*self._kind, json.dumps([h.hex() for h in hashes])),
                )
            }
            return waiting | self._has_stored([h for h in hashes if h not in waiting])

    def prepare(self, documents: Sequence[Document]) -> list[_Prepared]:
        """Split and embed ``documents`` (outside any transaction: this is the slow part)."""
        texts: dict[bytes, str] = {}
        plans: list[tuple[str, bytes, tuple[bytes, ...]]] = []
        for document in documents:
            whole = passage_text(document)
            whole_hash = digest(whole)
            texts[whole_hash] = whole
            found = split_sentences(document.text) if self.sentence_weight else []
            sentence_hashes = []
            if len(found) > 1:  # one sentence: the passage's own vector serves
                for sentence in found:
                    sentence_hashes.append(digest(sentence.text))
                    texts[sentence_hashes[-1]] = sentence.text
            plans.append((document.id, whole_hash, tuple(sentence_hashes)))
        have = self._have(sorted(texts))
        missing = sorted(h for h in texts if h not in have)
        made: dict[bytes, bytes] = {}
        for start in range(0, len(missing), EMBED_BATCH):
            part = missing[start : start + EMBED_BATCH]
            vectors = embed_unit(self.embedder, [texts[h] for h in part])
            made.update((h, vectors[i].astype(np.float32).tobytes()) for i, h in enumerate(part))
        prepared = []
        for doc_id, whole_hash, sentence_hashes in plans:
            # Each new vector is written once, with the first document that uses it (a
            # sentence can repeat within a document and across documents).
            own = [h for h in dict.fromkeys((whole_hash, *sentence_hashes)) if h in made]
            prepared.append(
                _Prepared(doc_id, whole_hash, sentence_hashes, [(h, made.pop(h)) for h in own])
            )
        return prepared

    def write(self, prepared: Sequence[_Prepared]) -> None:
        """Store prepared documents' vectors, replacing what their ids had. Called with
        the connection's lock held, inside the transaction that writes the documents
        themselves (``SqliteFtsIndex.upsert``'s ``also``): a document's text and the
        record of its vectors change together, or a run killed between two transactions
        would leave a changed text marked as embedded, with its old vector."""
        self._db.execute("DELETE FROM kb_vector_packs")
        unarrange(self._db)
        self._db.executemany(
            "INSERT OR REPLACE INTO kb_texts VALUES (?, ?, ?)",
            [(item.id, item.text_hash, b"".join(item.sentences)) for item in prepared],
        )
        self._db.executemany(
            "INSERT OR REPLACE INTO kb_embeddings VALUES (?, ?, ?, ?)",
            [(h.hex(), *self._kind, v) for item in prepared for h, v in item.vectors],
        )

    def delete(self, ids: Sequence[str]) -> None:
        """Forget the documents ``ids``' vectors; like :meth:`write`, inside the
        transaction that deletes the documents, the lock held."""
        self._db.execute("DELETE FROM kb_vector_packs")
        unarrange(self._db)
        self._db.executemany("DELETE FROM kb_texts WHERE id = ?", [(doc_id,) for doc_id in ids])
        # Waiting vectors no passage or sentence uses any more (of any embedder) go
        # too; the pack's go when the next ingest's end writes a new one.
        if self._db.execute("SELECT 1 FROM kb_embeddings LIMIT 1").fetchone():
            prepare_split(self._db)
            self._db.execute(f"DELETE FROM kb_embeddings WHERE text_hash NOT IN ({REFERENCED})")

    def _forget_lost_pack(self) -> None:
        """A recorded pack that cannot be read is forgotten (its vectors are lost: the
        documents' texts are not, and what was embedded again waits as rows), so a new
        pack is written from the waiting rows instead of failing every run; inside the
        transaction that writes it, the lock held."""
        stored = current_store(self._db, self._kind)
        if stored is None:
            return
        found = read_pack(
            self._pack_folder,
            self._pack_key,
            stored.token,
            self.embedder.dim,
            with_hashes=True,
            layout=False,
        )
        if found is None:
            _tell_lost(self._pack_folder, stored.token)
            self._db.execute(
                "DELETE FROM kb_vector_store WHERE embedder = ? AND dim = ?", self._kind
            )

    def unfinished(self) -> bool:
        """Vectors wait in the database for :meth:`finish`, or the pack's index arrays
        are stale (or, with packs switched off, a pack is left to unpack)."""
        with self._lock:
            stored = current_store(self._db, self._kind)
            if not self.vector_pack:
                return stored is not None
            waiting = self._db.execute(
                "SELECT 1 FROM kb_embeddings WHERE embedder = ? AND dim = ? LIMIT 1", self._kind
            ).fetchone()
            return waiting is not None or (stored is not None and not stored.arranged)

    def finish(self) -> None:
        """Merge the vectors embedded since into a new pack (after an ingest run). When
        it cannot be written they wait in the database, searched from there, until the
        next run's end."""
        with self._lock:
            if not self.vector_pack:
                # Vectors kept as database rows only: a pack's are moved back first.
                try:
                    with immediate_transaction(self._db):
                        self._forget_lost_pack()
                        unpack_store(self._db, self._pack_folder, self._pack_key, self._kind)
                except OSError:
                    return
                remove_packs(self._pack_folder, self._pack_key)
                return
            try:
                # One transaction, the write lock taken first: the count, the rows and
                # the vectors are one snapshot, and the new pack is recorded with the
                # waiting rows it took let go.
                with immediate_transaction(self._db):
                    self._forget_lost_pack()
                    token = write_store(
                        self._db,
                        self._pack_folder,
                        self._pack_key,
                        self._kind,
                        self.vector_format,
                        self._pack_index,
                    )
                    record_store(self._db, self._kind, token, self.vector_format)
            except OSError:
                return
            # The index before the old packs go: it reuses their codes. On failure no
            # codes are saved, so searches stay exact.
            with contextlib.suppress(OSError, ValueError):
                self._index.write(token)
            remove_packs(self._pack_folder, self._pack_key, keep=token)
            reclaim_space(self._db)

    def _pack_index(self, hashes: np.ndarray) -> VectorPack:
        """The new pack's index arrays (no vectors), its rows found by their ``hashes``."""
        return arrange(self._db, lambda wanted: find_rows(hashes, wanted), _NO_VECTORS)

    # -- searching ----------------------------------------------------------------

    def _from_rows(self, store: VectorPack | None = None) -> VectorPack:
        """The search arrays from the waiting rows and the pack's vectors (an ingest
        not finished yet, or a knowledge base written before the pack was the store):
        the pack's rows first, then the waiting ones (:class:`JoinedRows`, decoded as
        they are read)."""
        rows = self._db.execute(
            "SELECT text_hash, vector FROM kb_embeddings WHERE embedder = ? AND dim = ? "
            "ORDER BY text_hash",
            self._kind,
        ).fetchall()
        waiting = digests([h for h, _ in rows])  # sorted: hex orders as the bytes do
        vectors = np.frombuffer(b"".join(v for _, v in rows), dtype=np.float32)
        vectors = vectors.reshape(len(rows), self.embedder.dim)
        packed = store if store is not None and store.hashes is not None else None
        first = 0 if packed is None else len(packed.vectors)

        def rows_of(wanted: np.ndarray) -> np.ndarray:
            found = find_rows(waiting, wanted)  # a waiting row is newer than the pack's
            found[found >= 0] += first
            if packed is not None:
                missing = found < 0
                found[missing] = find_rows(packed.hashes, wanted[missing])
            return found

        return arrange(
            self._db, rows_of, vectors if packed is None else JoinedRows(packed, vectors)
        )

    def _old_layout_pack(self) -> tuple[str, VectorPack] | None:
        """A knowledge base written before the pack was the store: its float32 copy."""
        row = self._db.execute(
            "SELECT token FROM kb_vector_packs WHERE embedder = ? AND dim = ?", self._kind
        ).fetchone()
        if not self.vector_pack or row is None:
            return None
        pack = read_pack(self._pack_folder, self._pack_key, row[0], self.embedder.dim)
        return None if pack is None else (row[0], pack)

    def _search_pack(self) -> tuple[str | None, VectorPack]:
        """The arrays to search: the pack when it is current and arranged, else the
        waiting rows with the pack's vectors; with the token of a pack that matches the
        passages exactly (for its approximate index), if any."""
        stored = current_store(self._db, self._kind)
        if stored is None:
            old = self._old_layout_pack()
            return old if old is not None else (None, self._from_rows())
        if stored.arranged:
            pack = read_pack(self._pack_folder, self._pack_key, stored.token, self.embedder.dim)
            if pack is not None:
                return stored.token, pack
        return None, self._from_rows(self._pack_store())

    def _arrays(self) -> tuple[PackArrays, Approximate | None]:
        """The current pack's arrays (decoded as the searches need them) and its
        approximate index (or ``None``), kept while the database is unchanged."""
        key = (self._db.execute("PRAGMA data_version").fetchone()[0], self._db.total_changes())
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1:]
        token, pack = self._search_pack()
        approximate = self._approximate(token, pack)
        arrays = PackArrays(pack, self.sentence_weight)
        self._cache = (key, arrays, approximate)
        return arrays, approximate

    def _approximate(self, token: str | None, pack: VectorPack) -> Approximate | None:
        """The approximate index of the arrays to search: the pack's (``token``), or, while
        vectors wait as rows, the recorded pack's for its rows (the waiting ones scored
        exactly, :class:`WaitingIndex`), or ``None``."""
        if token is not None:
            return self._index.stored(token, pack)
        if not isinstance(pack.vectors, JoinedRows):
            return None
        stored = current_store(self._db, self._kind)
        own = None if stored is None else self._index.stored(stored.token, pack.vectors.pack)
        if own is None:
            return None
        return Approximate(WaitingIndex(own.index, pack, pack.vectors.packed), pack.chunk_rows)

    def search(
        self, vector: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        """``(document rowid, score)`` of the ``k`` nearest documents, best first."""
        with self._lock:
            arrays, approximate = self._arrays()
            ids = arrays.ids
            if len(ids) == 0:
                return []
            query = np.asarray(vector, dtype=np.float32)
            mask = None if allowed is None else np.isin(ids, allowed)
            if mask is not None and mask.sum() <= FILTERED_SHARE * len(ids):
                # Few passages allowed: only theirs and their sentences' rows are decoded.
                matrix, sentences = arrays.rows()
                rows, scores = top_k_among(
                    np.flatnonzero(mask),
                    matrix,
                    query,
                    k,
                    sentences=sentences,
                    sentence_weight=self.sentence_weight,
                )
            elif approximate is not None and allowed is None:
                # Only the candidates' vectors are decoded, never the whole pack.
                matrix, sentences = arrays.rows()
                rows, scores = rescored_top_k(
                    approximate.index,
                    approximate.chunk_rows,
                    matrix,
                    query,
                    k,
                    sentences=sentences,
                    sentence_weight=self.sentence_weight,
                )
            else:  # small, or broadly filtered (the index knows nothing of metadata): exact
                matrix, sentences = arrays.exact()
                rows, scores = top_k(
                    matrix,
                    query,
                    k,
                    mask=mask,
                    sentences=sentences,
                    sentence_weight=self.sentence_weight,
                )
            return [(int(ids[r]), float(s)) for r, s in zip(rows, scores, strict=True)]
