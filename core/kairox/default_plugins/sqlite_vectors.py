"""Vectors beside a ``sqlite-fts`` knowledge base, so it searches by meaning as well.

With ``embedding_backend`` set, every document stored is also embedded, whole and
sentence by sentence, exactly as the workspace index embeds its chunks: vectors are
addressed by (text hash, embedder), so an unchanged text is never embedded twice and
vectors of two models never meet, and searches are sentence-aware (a document's score
blends its own cosine with its best sentence's, ``sentence_weight``). They live in the
knowledge base's own SQLite file, and after each ingest a copy is packed next to it
(:mod:`kairox.workspace.vector_pack`) for a new process to map at once. With
``ann_threshold`` passages on (and with numkong installed), the pack gets an approximate
index of its vectors beside it (:mod:`kairox.retrieval.ann`: int8 codes, rebuilt after
each ingest from the previous one's codes, quantising only new vectors); unfiltered
searches then score the index's candidates exactly instead of every passage.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import apsw
import numpy as np

from kairox.embedding import EmbeddingBackend
from kairox.retrieval import Document
from kairox.retrieval.ann import NUMKONG, AnnIndex, keys_of, rescored_top_k
from kairox.retrieval.vectors import EMBED_BATCH, SentenceVectors, embed_unit, top_k
from kairox.workspace.chunking import split_sentences
from kairox.workspace.vector_pack import (
    PackWriter,
    VectorPack,
    pack_key,
    read_pack,
    remove_packs,
)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS kb_passages (id TEXT PRIMARY KEY, text_hash TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS kb_sentences (id TEXT NOT NULL, sentence_index INTEGER NOT NULL,"
    " text_hash TEXT NOT NULL, PRIMARY KEY (id, sentence_index))",
    "CREATE INDEX IF NOT EXISTS kb_sentences_hash ON kb_sentences(text_hash)",
    "CREATE TABLE IF NOT EXISTS kb_embeddings (text_hash TEXT NOT NULL, embedder TEXT NOT NULL,"
    " dim INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (text_hash, embedder, dim))",
    "CREATE TABLE IF NOT EXISTS kb_vector_packs (embedder TEXT NOT NULL, dim INTEGER NOT NULL,"
    " token TEXT NOT NULL, PRIMARY KEY (embedder, dim))",
)


# Vectors copied from the database to a pack at a time (1.5 MB of 384-wide vectors).
_COPY_ROWS = 1024
_NO_VECTORS = np.empty((0, 0), dtype=np.float32)


# Knowledge bases told once per process that numkong would speed their searches up.
_HINTED: set[str] = set()


@dataclass(frozen=True)
class _Approximate:
    """A pack's approximate index (one row per pack row), and each passage's row."""

    index: AnnIndex
    chunk_rows: np.ndarray


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def pack_location(path: Path, embedder: EmbeddingBackend) -> tuple[Path, str]:
    """The folder and key of the packs (and approximate indexes) of the knowledge-base
    file ``path`` for ``embedder``."""
    return path.parent / f"{path.name}.vectors", pack_key(
        str(path.resolve()), embedder.name, embedder.dim
    )


def passage_text(document: Document) -> str:
    """What is embedded for a document: its title line, then its text."""
    return f"{document.title}\n{document.text}" if document.title else document.text


def _arrange(
    passages: Sequence[tuple[int, str]],
    sentences: Sequence[tuple[int, str]],
    row_of: dict[str, int],
    vectors: np.ndarray,
) -> VectorPack:
    """The pack's index arrays: passages and sentences whose vector exists, by row."""
    kept = [(rowid, row_of[h]) for rowid, h in passages if h in row_of]
    position = {rowid: n for n, (rowid, _) in enumerate(kept)}
    owned = [(position[r], row_of[h]) for r, h in sentences if r in position and h in row_of]
    return VectorPack(
        ids=np.array([rowid for rowid, _ in kept], dtype=np.int64),
        chunk_rows=np.array([row for _, row in kept], dtype=np.int64),
        owners=np.array([o for o, _ in owned], dtype=np.int64),
        sentence_rows=np.array([row for _, row in owned], dtype=np.int64),
        vectors=vectors,
    )


@dataclass(frozen=True)
class _Prepared:
    id: str
    text_hash: str
    sentences: tuple[str, ...]  # text hashes, in order
    vectors: list[tuple[str, bytes]]  # (text hash, vector) not stored yet


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
        ann_threshold: int | None = None,
    ) -> None:
        self._db = db
        self._lock = lock
        self.embedder = embedder
        self.sentence_weight = sentence_weight
        self.vector_pack = vector_pack
        self.ann_threshold = ann_threshold
        self._pack_folder, self._pack_key = pack_location(path, embedder)
        self._kind = (embedder.name, embedder.dim)
        self._cache: tuple[
            tuple[int, int], np.ndarray, np.ndarray, SentenceVectors | None, _Approximate | None
        ]
        self._cache = None  # type: ignore[assignment]
        with self._lock, self._db:
            for statement in _SCHEMA:
                self._db.execute(statement)

    # -- writing ------------------------------------------------------------------

    def embedded_ids(self) -> set[str]:
        """The ids whose passage vector this embedder has made."""
        with self._lock:
            return {
                row[0]
                for row in self._db.execute(
                    "SELECT p.id FROM kb_passages p JOIN kb_embeddings e ON e.text_hash = "
                    "p.text_hash AND e.embedder = ? AND e.dim = ?",
                    self._kind,
                )
            }

    def _have(self, hashes: Sequence[str]) -> set[str]:
        with self._lock:
            return {
                row[0]
                for row in self._db.execute(
                    "SELECT text_hash FROM kb_embeddings WHERE embedder = ? AND dim = ? AND "
                    "text_hash IN (SELECT value FROM json_each(?))",
                    (*self._kind, json.dumps(list(hashes))),
                )
            }

    def prepare(self, documents: Sequence[Document]) -> list[_Prepared]:
        """Split and embed ``documents`` (outside any transaction: this is the slow part)."""
        texts: dict[str, str] = {}
        plans: list[tuple[str, str, tuple[str, ...]]] = []
        for document in documents:
            whole = passage_text(document)
            whole_hash = _hash(whole)
            texts[whole_hash] = whole
            found = split_sentences(document.text) if self.sentence_weight else []
            sentence_hashes = []
            if len(found) > 1:  # one sentence: the passage's own vector serves
                for sentence in found:
                    sentence_hashes.append(_hash(sentence.text))
                    texts[sentence_hashes[-1]] = sentence.text
            plans.append((document.id, whole_hash, tuple(sentence_hashes)))
        have = self._have(sorted(texts))
        missing = sorted(h for h in texts if h not in have)
        made: dict[str, bytes] = {}
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
        """Store prepared documents' vectors, replacing what their ids had."""
        with self._lock, self._db:
            self._db.execute("DELETE FROM kb_vector_packs")
            for item in prepared:
                self._db.execute("DELETE FROM kb_sentences WHERE id = ?", (item.id,))
                self._db.execute(
                    "INSERT OR REPLACE INTO kb_passages VALUES (?, ?)", (item.id, item.text_hash)
                )
                self._db.executemany(
                    "INSERT INTO kb_sentences VALUES (?, ?, ?)",
                    [(item.id, n, h) for n, h in enumerate(item.sentences)],
                )
                self._db.executemany(
                    "INSERT OR REPLACE INTO kb_embeddings VALUES (?, ?, ?, ?)",
                    [(h, *self._kind, v) for h, v in item.vectors],
                )

    def delete(self, ids: Sequence[str]) -> None:
        with self._lock, self._db:
            self._db.execute("DELETE FROM kb_vector_packs")
            for doc_id in ids:
                self._db.execute("DELETE FROM kb_sentences WHERE id = ?", (doc_id,))
                self._db.execute("DELETE FROM kb_passages WHERE id = ?", (doc_id,))
            # Vectors no passage or sentence uses any more (of any embedder) go too.
            self._db.execute(
                "DELETE FROM kb_embeddings WHERE text_hash NOT IN (SELECT text_hash FROM "
                "kb_passages UNION SELECT text_hash FROM kb_sentences)"
            )

    def finish(self) -> None:
        """Pack the vectors for the next process (after an ingest run); best effort."""
        if not self.vector_pack:
            remove_packs(self._pack_folder, self._pack_key)
            return
        with self._lock:
            try:
                token = self._write_pack()
            except OSError:
                return  # searches read the rows, as without a pack
            with self._db:
                self._db.execute(
                    "INSERT OR REPLACE INTO kb_vector_packs VALUES (?, ?, ?)", (*self._kind, token)
                )
            remove_packs(self._pack_folder, self._pack_key, keep=token)

    def _write_pack(self) -> str:
        """A new pack of this embedder's vectors, copied from the database a block at a
        time, its index arrays built in SQL and streamed (an ingest run's end never holds
        the whole matrix, nor a Python object per vector); returns its token."""
        dim = self.embedder.dim
        # One transaction: the count, the rows and the vectors are one snapshot, whatever
        # another process commits meanwhile.
        with self._db:
            (count,) = self._db.execute(
                "SELECT count(*) FROM kb_embeddings WHERE embedder = ? AND dim = ?", self._kind
            ).fetchone()
            # Each vector's row in the pack, in the order they are copied (temp: this
            # connection only, never in the file).
            self._db.execute(
                "CREATE TEMP TABLE IF NOT EXISTS kb_pack_rows "
                "(text_hash TEXT PRIMARY KEY, row INTEGER NOT NULL)"
            )
            self._db.execute("DELETE FROM kb_pack_rows")
            self._db.execute(
                "INSERT INTO kb_pack_rows SELECT text_hash, row_number() OVER (ORDER BY rowid) "
                "- 1 FROM kb_embeddings WHERE embedder = ? AND dim = ?",
                self._kind,
            )
            try:
                with PackWriter(self._pack_folder, self._pack_key, rows=count, dim=dim) as writer:
                    rows = self._db.execute(
                        "SELECT vector FROM kb_embeddings WHERE embedder = ? AND dim = ? "
                        "ORDER BY rowid",
                        self._kind,
                    )
                    while block := list(itertools.islice(rows, _COPY_ROWS)):
                        vectors = np.frombuffer(b"".join(v for (v,) in block), dtype=np.float32)
                        writer.add(vectors.reshape(len(block), dim))
                    token = writer.finish(self._pack_index())
                if self._wants_index(count):
                    # On failure no codes are saved, so searches stay exact.
                    with contextlib.suppress(OSError, ValueError):
                        self._write_index(token)
            finally:
                self._db.execute("DELETE FROM kb_pack_rows")
            return token

    def _pack_index(self) -> VectorPack:
        """The pack's index arrays (no vectors), from ``kb_pack_rows``: passages and
        sentences whose vector exists, by document rowid (as :func:`_arrange` makes them)."""
        passages = self._pairs(
            "SELECT d.rowid, r.row FROM kb_passages p JOIN documents d ON d.id = p.id "
            "JOIN kb_pack_rows r ON r.text_hash = p.text_hash ORDER BY d.rowid"
        )
        sentences = self._pairs(
            "SELECT d.rowid, r.row FROM kb_sentences s JOIN documents d ON d.id = s.id "
            "JOIN kb_pack_rows r ON r.text_hash = s.text_hash "
            "ORDER BY d.rowid, s.sentence_index"
        )
        ids = passages[:, 0]
        # A sentence belongs to the position of its document among the passages kept.
        at = np.searchsorted(ids, sentences[:, 0])
        owned = at < len(ids)
        owned[owned] = ids[at[owned]] == sentences[owned, 0]
        return VectorPack(
            ids=ids.copy(),
            chunk_rows=passages[:, 1].copy(),
            owners=at[owned].astype(np.int64),
            sentence_rows=sentences[owned, 1].copy(),
            vectors=_NO_VECTORS,
        )

    def _pairs(self, sql: str) -> np.ndarray:
        """A two-integer-column query as an ``(n, 2)`` int64 array, streamed."""
        flat = itertools.chain.from_iterable(self._db.execute(sql))
        return np.fromiter(flat, dtype=np.int64).reshape(-1, 2)

    def _index_paths(self, token: str) -> tuple[Path, Path]:
        # Named as the pack's files are, so they go when the pack does (remove_packs).
        stem = self._pack_folder / f"{self._pack_key}-{token}"
        return Path(f"{stem}.ann-codes.npy"), Path(f"{stem}.ann-keys.npy")

    def _wants_index(self, passages: int) -> bool:
        """Whether a collection of ``passages`` is searched through the approximate index
        (from ``ann_threshold`` on, with numkong installed; without it, a hint, once)."""
        if self.ann_threshold is None or passages < self.ann_threshold:
            return False
        if NUMKONG.available():
            return True
        if self._pack_key not in _HINTED:
            _HINTED.add(self._pack_key)
            print(
                f"hint: this knowledge base has {passages:,} passages (from "
                f"{self.ann_threshold:,} on, searches by meaning go through an approximate "
                f"index); `pip install 'kairox[ann]'` to use it (searching exactly meanwhile)",
                file=sys.stderr,
            )
        return False

    def _previous_index(self, token: str) -> AnnIndex | None:
        """The newest other pack's index, whose codes a new one reuses (best effort)."""
        others = [
            path
            for path in self._pack_folder.glob(f"{self._pack_key}-*.ann-keys.npy")
            if not path.name.startswith(f"{self._pack_key}-{token}.")
        ]
        for keys_path in sorted(others, key=_modified, reverse=True):
            codes_path = keys_path.with_name(keys_path.name.replace(".ann-keys.", ".ann-codes."))
            index = AnnIndex.open(codes_path, keys_path, self.embedder.dim)
            if index is not None:
                return index
        return None

    def _write_index(self, token: str) -> None:
        """The approximate index of the pack ``token``'s vectors (one row per pack row),
        from the previous pack's codes and the new vectors, saved beside the pack."""
        pack = read_pack(self._pack_folder, self._pack_key, token, self.embedder.dim)
        if pack is None or not self._wants_index(len(pack.ids)):
            return
        hashes = self._db.execute(
            "SELECT text_hash FROM kb_embeddings WHERE embedder = ? AND dim = ? ORDER BY rowid",
            self._kind,
        )
        keys = keys_of(h for (h,) in hashes)
        if len(keys) != len(pack.vectors):
            return  # not the snapshot the pack was copied from: stay exact
        index, _ = AnnIndex.build(
            keys,
            lambda positions: pack.vectors[positions],
            self.embedder.dim,
            previous=self._previous_index(token),
        )
        index.save(*self._index_paths(token))

    # -- searching ----------------------------------------------------------------

    def _index_rows(self) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
        """(document rowid, text hash) of every passage, and of every sentence in order."""
        passages = self._db.execute(
            "SELECT d.rowid, p.text_hash FROM kb_passages p JOIN documents d ON d.id = p.id "
            "ORDER BY d.rowid"
        ).fetchall()
        sentences = self._db.execute(
            "SELECT d.rowid, s.text_hash FROM kb_sentences s JOIN documents d ON d.id = s.id "
            "ORDER BY d.rowid, s.sentence_index"
        ).fetchall()
        return passages, sentences

    def _from_rows(self) -> VectorPack:
        passages, sentences = self._index_rows()
        rows = self._db.execute(
            "SELECT text_hash, vector FROM kb_embeddings WHERE embedder = ? AND dim = ? "
            "ORDER BY rowid",
            self._kind,
        ).fetchall()
        row_of = {h: n for n, (h, _) in enumerate(rows)}
        vectors = np.frombuffer(b"".join(v for _, v in rows), dtype=np.float32)
        return _arrange(passages, sentences, row_of, vectors.reshape(len(rows), self.embedder.dim))

    def _pack_token(self) -> str | None:
        if not self.vector_pack:
            return None
        row = self._db.execute(
            "SELECT token FROM kb_vector_packs WHERE embedder = ? AND dim = ?", self._kind
        ).fetchone()
        return None if row is None else row[0]

    def _stored_pack(self, token: str | None = None) -> VectorPack | None:
        token = token or self._pack_token()
        if token is None:
            return None
        return read_pack(self._pack_folder, self._pack_key, token, self.embedder.dim)

    def _stored_index(self, token: str, pack: VectorPack) -> _Approximate | None:
        """The pack's approximate index, when it has one that matches it (else exact)."""
        if not self._wants_index(len(pack.ids)):
            return None
        index = AnnIndex.open(*self._index_paths(token), self.embedder.dim)
        if index is None or len(index) != len(pack.vectors):
            return None
        return _Approximate(index, pack.chunk_rows)

    def _arrays(
        self,
    ) -> tuple[np.ndarray, np.ndarray, SentenceVectors | None, _Approximate | None]:
        key = (self._db.execute("PRAGMA data_version").fetchone()[0], self._db.total_changes())
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1:]
        token = self._pack_token()
        pack = self._stored_pack(token)
        approximate = None if pack is None or token is None else self._stored_index(token, pack)
        pack = pack or self._from_rows()
        matrix = np.asarray(pack.vectors[pack.chunk_rows])
        sentences = None
        if self.sentence_weight and len(pack.owners):
            sentences = SentenceVectors(
                pack.vectors, pack.owners, unit=True, rows=pack.sentence_rows
            )
        self._cache = (key, pack.ids, matrix, sentences, approximate)
        return pack.ids, matrix, sentences, approximate

    def search(
        self, vector: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        """``(document rowid, score)`` of the ``k`` nearest documents, best first."""
        with self._lock:
            ids, matrix, sentences, approximate = self._arrays()
            if len(ids) == 0:
                return []
            query = np.asarray(vector, dtype=np.float32)
            if approximate is not None and allowed is None:
                rows, scores = rescored_top_k(
                    approximate.index,
                    approximate.chunk_rows,
                    matrix,
                    query,
                    k,
                    sentences=sentences,
                    sentence_weight=self.sentence_weight,
                )
            else:  # small, or filtered (the index knows nothing of metadata): exact
                mask = None if allowed is None else np.isin(ids, allowed)
                rows, scores = top_k(
                    matrix,
                    query,
                    k,
                    mask=mask,
                    sentences=sentences,
                    sentence_weight=self.sentence_weight,
                )
            return [(int(ids[r]), float(s)) for r, s in zip(rows, scores, strict=True)]
