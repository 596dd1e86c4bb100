"""``WorkspaceRagIndex``: the workspace's files, chunked, embedded and searchable.

Storage is the per-user SQLite database, keyed by workspace root:

* ``rag_files``: one row per indexed file with its content hash;
* ``rag_chunks``: the chunks of each file (character spans into the file), with an
  FTS5 table over them for lexical search;
* ``rag_embeddings``: vectors addressed by (chunk-text hash, embedder name), float32
  blobs, L2-normalised. Content addressing means an unchanged chunk is never embedded
  twice, even when the file around it changes, and vectors of different models (or
  widths) sit side by side without ever being compared.

* ``rag_vector_packs``: which files under ``vectors/`` next to the database hold a copy
  of a workspace's vectors ready to map into memory (:mod:`kairox.workspace.vector_pack`).

Each batch of files is replaced in one transaction, so a run killed at any point
leaves every file's chunks from one version; the next run finishes the job. An
advisory file lock keeps two ``kairox index`` runs on one workspace from interleaving.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import sqlite3
import threading
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kairox.embed_progress import EmbedProgress
from kairox.embedding import EmbeddingBackend
from kairox.errors import KairoxError
from kairox.paths import state_errors
from kairox.retrieval import Hit, Query, ScoreKind
from kairox.retrieval.filters import ALL_OPERATORS, FilterExpr, parse_filter
from kairox.retrieval.fts5 import match_expression
from kairox.retrieval.vectors import (
    SENTENCE_WEIGHT,
    SentenceVectors,
    check_sentence_weight,
    normalise,
    top_k,
)
from kairox.storage import enable_wal, ensure_component_schema
from kairox.workspace.chunking import split_sentences
from kairox.workspace.code_chunks import chunk_source
from kairox.workspace.convert.converters import Converters
from kairox.workspace.files import Skipped, WorkspaceFile, iter_workspace_files
from kairox.workspace.filtering import FILES_JOIN, chunk_metadata, filter_sql
from kairox.workspace.filtering import register as register_filter_functions
from kairox.workspace.line_store import (
    LINE_SCHEMA,
    chunker_for,
    delete_file_lines,
    insert_lines,
    line_metadata,
    stale_files,
)
from kairox.workspace.selection import FileSelection
from kairox.workspace.vector_pack import (
    VectorPack,
    pack_key,
    pack_size,
    read_pack,
    remove_packs,
    write_pack,
)

# Version 2 added rag_sentences; its statements only create what is missing, and chunks
# indexed before it get their sentences on the next run (_add_missing_sentences).
# Version 3 added rag_vector_packs (kairox.workspace.vector_pack); an index without any
# is searched from its rows until the next run writes one.
# Version 4 added line ranges (kairox.workspace.line_store); files indexed before get
# them on the next run, which cuts them again.
_SCHEMA_VERSION = 4
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS rag_files (
    workspace TEXT NOT NULL,
    relpath TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    PRIMARY KEY (workspace, relpath)
)""",
    """CREATE TABLE IF NOT EXISTS rag_chunks (
    id INTEGER PRIMARY KEY,
    workspace TEXT NOT NULL,
    relpath TEXT NOT NULL,
    chunk_index INTEGER NOT NULL,
    start INTEGER NOT NULL,
    "end" INTEGER NOT NULL,
    token_count INTEGER NOT NULL,
    text_hash TEXT NOT NULL,
    text TEXT NOT NULL,
    UNIQUE (workspace, relpath, chunk_index)
)""",
    """CREATE INDEX IF NOT EXISTS rag_chunks_text_hash ON rag_chunks(text_hash)""",
    """CREATE TABLE IF NOT EXISTS rag_embeddings (
    text_hash TEXT NOT NULL,
    embedder TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (text_hash, embedder)
)""",
    """CREATE TABLE IF NOT EXISTS rag_sentences (
    chunk_id INTEGER NOT NULL,
    sentence_index INTEGER NOT NULL,
    start INTEGER NOT NULL,
    "end" INTEGER NOT NULL,
    text_hash TEXT NOT NULL,
    PRIMARY KEY (chunk_id, sentence_index)
)""",
    """CREATE INDEX IF NOT EXISTS rag_sentences_text_hash ON rag_sentences(text_hash)""",
    # Which vector pack matches a workspace's rows now; every change to them deletes it.
    """CREATE TABLE IF NOT EXISTS rag_vector_packs (
    workspace TEXT NOT NULL,
    embedder TEXT NOT NULL,
    dim INTEGER NOT NULL,
    token TEXT NOT NULL,
    PRIMARY KEY (workspace, embedder, dim)
)""",
    """CREATE VIRTUAL TABLE IF NOT EXISTS rag_chunks_fts USING fts5(
    relpath, text, content='rag_chunks', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
)""",
    """CREATE TRIGGER IF NOT EXISTS rag_chunks_ai AFTER INSERT ON rag_chunks BEGIN
    INSERT INTO rag_chunks_fts(rowid, relpath, text) VALUES (new.id, new.relpath, new.text);
END""",
    """CREATE TRIGGER IF NOT EXISTS rag_chunks_ad AFTER DELETE ON rag_chunks BEGIN
    INSERT INTO rag_chunks_fts(rag_chunks_fts, rowid, relpath, text)
    VALUES ('delete', old.id, old.relpath, old.text);
END""",
    *LINE_SCHEMA,
)

# Files whose chunks are embedded and written together: small enough that a killed run
# loses little work, large enough to batch the embedder well.
FILES_PER_BATCH = 32
_EMBED_BATCH = 256
_INSERT_VECTORS = "INSERT OR REPLACE INTO rag_embeddings VALUES (?, ?, ?, ?)"
NOT_INDEXED = "this workspace is not indexed yet: run `kairox index`"


class WorkspaceIndexError(KairoxError, RuntimeError):
    """The workspace index cannot be used as asked."""


class IndexBusyError(WorkspaceIndexError):
    """Another process is indexing this workspace right now."""


@dataclass
class IndexStats:
    """What one ``index()`` run did."""

    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    skipped: int = 0
    chunks_embedded: int = 0
    chunks_total: int = 0
    sentences_embedded: int = 0
    #: size of the vector pack this run wrote (None: the one there was still fits, or
    #: packs are off or could not be written).
    pack_bytes: int | None = None
    skipped_files: list[str] = field(default_factory=list)
    #: How many files were skipped for each reason (``binary``, ``too large``, ...).
    skipped_reasons: dict[str, int] = field(default_factory=dict)

    #: ``(relpath, why)`` of the skipped files whose reason has a detail (a document
    #: its converter could not read says which converter and why).
    skipped_details: list[tuple[str, str]] = field(default_factory=list)

    def skip(self, relpath: str, reason: str, detail: str = "") -> None:
        """Count one skipped file under its reason."""
        self.skipped += 1
        self.skipped_files.append(relpath)
        self.skipped_reasons[reason] = self.skipped_reasons.get(reason, 0) + 1
        if detail:
            self.skipped_details.append((relpath, f"{reason} ({detail})"))

    def as_json(self) -> dict[str, Any]:
        return {
            "added": self.added,
            "updated": self.updated,
            "removed": self.removed,
            "unchanged": self.unchanged,
            "skipped": self.skipped,
            "skipped_reasons": dict(sorted(self.skipped_reasons.items())),
            "skipped_details": [{"path": p, "why": why} for p, why in self.skipped_details],
            "chunks_embedded": self.chunks_embedded,
            "chunks_total": self.chunks_total,
            "sentences_embedded": self.sentences_embedded,
            "pack_bytes": self.pack_bytes,
        }


@dataclass(frozen=True)
class ChunkVector:
    """One stored chunk and its vector (see :meth:`WorkspaceRagIndex.iter_chunk_vectors`)."""

    relpath: str
    chunk_index: int
    start: int
    end: int
    text: str
    text_hash: str
    vector: np.ndarray


@dataclass
class _Embedded:
    chunks: int = 0
    sentences: int = 0


@dataclass(frozen=True)
class _Sentence:
    index: int
    start: int  # character offsets into the chunk's text
    end: int
    text_hash: str
    text: str


@dataclass(frozen=True)
class _Chunk:
    index: int
    start: int
    end: int
    token_count: int
    text_hash: str
    text: str
    sentences: tuple[_Sentence, ...] = ()
    line_start: int = 0
    line_end: int = 0
    symbol: str | None = None
    language: str | None = None


@dataclass(frozen=True)
class _PendingFile:
    relpath: str
    content_hash: str
    size: int
    mtime_ns: int
    chunks: list[_Chunk]
    chunker: str = "lines"


def _text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def open_database(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) the state database with the RAG tables in place."""
    with state_errors(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, check_same_thread=False, timeout=30)
        register_filter_functions(db)
    try:
        with state_errors(path):
            db.execute("PRAGMA busy_timeout=30000")
            # Versioned per component: the database is shared with events and memories.
            ensure_component_schema(db, "workspace_index", _SCHEMA_VERSION, _SCHEMA)
            enable_wal(db, 30)
    except BaseException:
        db.close()
        raise
    return db


class WorkspaceRagIndex:
    """Index a workspace's text files and search them by vector or by words.

    :param database: the SQLite file (normally ``$KAIROX_HOME/kairox.db``).
    :param root: the workspace root; its resolved path is the workspace id.
    :param embedder: the embedding backend; only its vectors are ever searched.
    :param sentence_weight: how much a chunk's best sentence counts in its vector score
        (:mod:`kairox.retrieval.vectors`); every sentence of every chunk is embedded too,
        about doubling the embedding work. 0 embeds and searches whole chunks only.
    :param vector_pack: keep a copy of the vectors in files next to the database that a
        new process maps into memory at once (:mod:`kairox.workspace.vector_pack`);
        ``False`` searches from the rows only and deletes the workspace's packs on the
        next :meth:`index`.
    :param converters: how files are read (PDF, HTML, Office, notebooks as text; see
        :mod:`kairox.workspace.convert`); ``None`` means the built-in converters.
    """

    def __init__(
        self,
        database: Path,
        root: Path,
        embedder: EmbeddingBackend,
        *,
        chunk_tokens: int = 256,
        chunk_overlap: int = 32,
        encoding: str = "o200k_base",
        max_file_bytes: int = 2_000_000,
        sentence_weight: float = SENTENCE_WEIGHT,
        vector_pack: bool = True,
        syntax_chunks: bool = True,
        selection: FileSelection | None = None,
        converters: Converters | None = None,
    ) -> None:
        check_sentence_weight(sentence_weight)
        self.database = Path(database)
        self.root = Path(root).resolve()
        self.workspace_id = str(self.root)
        self.embedder = embedder
        self.chunk_tokens = chunk_tokens
        self.chunk_overlap = chunk_overlap
        self.encoding = encoding
        self.max_file_bytes = max_file_bytes
        self.sentence_weight = sentence_weight
        self.vector_pack = vector_pack
        self.syntax_chunks = syntax_chunks
        self.selection = selection
        self.converters = converters if converters is not None else Converters.builtin()
        self._db = open_database(self.database)
        self._progress: EmbedProgress | None = None  # set for the length of one run
        # One connection, used from asyncio.to_thread workers: serialise access to it.
        self._lock = threading.RLock()
        self._matrix_cache: (
            tuple[tuple[int, int], np.ndarray, np.ndarray, SentenceVectors | None] | None
        ) = None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- indexing -------------------------------------------------------------------

    @contextlib.contextmanager
    def _exclusive(self, wait: bool) -> Iterator[None]:
        lock_dir = self.database.parent / "locks"
        lock_dir.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha256(self.workspace_id.encode()).hexdigest()[:16]
        with open(lock_dir / f"index-{name}.lock", "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                raise IndexBusyError(
                    f"another `kairox index` is running on {self.root}; wait for it to "
                    "finish, or run without --no-wait to wait for it automatically"
                ) from None
            # The kernel drops a flock when its process dies, even by SIGKILL.
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def is_busy(self) -> bool:
        """Whether another process is indexing this workspace right now."""
        try:
            with self._exclusive(wait=False):
                return False
        except IndexBusyError:
            return True

    def index(
        self,
        *,
        wait: bool = True,
        progress: Callable[[str, int, int], None] | None = None,
        embedding: EmbedProgress | None = None,
    ) -> IndexStats:
        """Bring the index in line with the files on disk; returns what changed.

        :param wait: wait for another process's run to finish instead of raising
            :class:`IndexBusyError`.
        :param progress: ``progress(relpath, done, total)`` after each file is read and
            chunked (before any embedding).
        :param embedding: counts the chunks and sentences to embed, then each batch
            embedded (for a rate and an ETA).
        """
        with self._exclusive(wait), self._lock:
            self._progress = embedding
            try:
                return self._index(progress)
            finally:
                self._progress = None

    def _index(self, progress: Callable[[str, int, int], None] | None) -> IndexStats:
        stats = IndexStats()
        known = {
            relpath: (content_hash, size, mtime)
            for relpath, content_hash, size, mtime in self._db.execute(
                "SELECT relpath, content_hash, size, mtime_ns FROM rag_files WHERE workspace=?",
                (self.workspace_id,),
            )
        }
        # Files cut by another chunker than they would get now are cut again.
        for relpath in stale_files(self._db, self.workspace_id, self._chunker):
            known[relpath] = ("", -1, -1)
        files = list(
            iter_workspace_files(
                self.root,
                max_bytes=self.max_file_bytes,
                on_skip=stats.skip,
                selection=self.selection,
            )
        )
        seen: set[str] = set()
        pending: list[_PendingFile] = []
        touched: list[tuple[int, int, str, str]] = []  # new stat of unchanged content
        for done, file in enumerate(files, start=1):
            previous = known.get(file.relpath)
            if previous is not None and previous[1:] == (file.size, file.mtime_ns):
                seen.add(file.relpath)
                stats.unchanged += 1
            else:
                # Binary, unreadable or gone since the walk: not indexed (leaves if it was).
                converted = self.converters.read(file.path, max_bytes=self.max_file_bytes)
                if isinstance(converted, Skipped):
                    stats.skip(file.relpath, converted.reason, converted.detail)
                else:
                    text = converted.text
                    seen.add(file.relpath)
                    content_hash = _text_hash(text)
                    if previous is not None and previous[0] == content_hash:
                        stats.unchanged += 1
                        touched.append((file.size, file.mtime_ns, self.workspace_id, file.relpath))
                    else:
                        pending.append(self._prepare(file, text, content_hash))
                        if previous is None:
                            stats.added += 1
                        else:
                            stats.updated += 1
            if progress is not None:
                progress(file.relpath, done, len(files))
        # Chunked first, embedded after: the work to do is known before it starts, so
        # progress has a total (chunks hold text only; vectors are written per batch).
        self._plan(pending)
        for start in range(0, len(pending), FILES_PER_BATCH):
            self._write_batch(pending[start : start + FILES_PER_BATCH], stats)
        gone = sorted(set(known) - seen)
        with self._db:
            self._db.executemany(
                "UPDATE rag_files SET size=?, mtime_ns=? WHERE workspace=? AND relpath=?",
                touched,
            )
            if gone:
                self._drop_packs()
            for relpath in gone:
                self._delete_file(relpath)
        stats.removed = len(gone)
        stats.sentences_embedded += self._add_missing_sentences()
        embedded = self._embed_missing()
        stats.chunks_embedded += embedded.chunks
        stats.sentences_embedded += embedded.sentences
        self._collect_garbage()
        stats.pack_bytes = self._refresh_pack()
        stats.chunks_total = self.chunk_count()
        return stats

    def _chunker(self, relpath: str) -> str:
        return chunker_for(relpath, self.syntax_chunks)

    def _prepare(self, file: WorkspaceFile, text: str, content_hash: str) -> _PendingFile:
        chunks = []
        chunker = self._chunker(file.relpath)
        for c in chunk_source(
            text,
            path=file.relpath,
            max_tokens=self.chunk_tokens,
            overlap_tokens=self.chunk_overlap,
            encoding=self.encoding,
            syntax=chunker != "lines",
        ):
            text_hash = _text_hash(c.text)
            sentences = self._sentences(c.text, text_hash)
            chunks.append(
                _Chunk(
                    c.index,
                    c.start,
                    c.end,
                    c.token_count,
                    text_hash,
                    c.text,
                    sentences,
                    c.line_start,
                    c.line_end,
                    c.symbol,
                    c.language,
                )
            )
        return _PendingFile(file.relpath, content_hash, file.size, file.mtime_ns, chunks, chunker)

    def _sentences(self, chunk: str, chunk_hash: str) -> tuple[_Sentence, ...]:
        if self.sentence_weight == 0:
            return ()
        found = split_sentences(chunk, encoding=self.encoding)
        if len(found) == 1:
            # The chunk is one sentence: its own vector serves (nothing more to embed).
            only = found[0]
            return (_Sentence(0, only.start, only.end, chunk_hash, chunk),)
        return tuple(_Sentence(s.index, s.start, s.end, _text_hash(s.text), s.text) for s in found)

    def _plan(self, pending: Sequence[_PendingFile]) -> None:
        """Tell the progress how many distinct chunks and sentences need a vector."""
        if self._progress is None or not pending:
            return
        chunks = {c.text_hash for f in pending for c in f.chunks}
        sentences = {s.text_hash for f in pending for c in f.chunks for s in c.sentences}
        sentences -= chunks
        have = self._have_vectors(sorted(chunks | sentences))
        self._progress.plan(chunks=len(chunks - have), sentences=len(sentences - have))

    def _have_vectors(self, hashes: Sequence[str]) -> set[str]:
        have: set[str] = set()
        for start in range(0, len(hashes), 500):
            part = list(hashes[start : start + 500])
            marks = ",".join("?" * len(part))
            have.update(
                row[0]
                for row in self._db.execute(
                    "SELECT text_hash FROM rag_embeddings WHERE embedder=? AND dim=? "
                    f"AND text_hash IN ({marks})",
                    (self.embedder.name, self.embedder.dim, *part),
                )
            )
        return have

    def _embed(
        self, texts_by_hash: Mapping[str, str], sentences: Container[str] | bool = False
    ) -> list[tuple[str, str, int, bytes]]:
        """Vector rows for ``texts_by_hash``; each batch is counted into the progress as
        sentences (``sentences=True``, or the hashes in ``sentences``) or chunks."""
        rows: list[tuple[str, str, int, bytes]] = []
        hashes = sorted(texts_by_hash)
        for start in range(0, len(hashes), _EMBED_BATCH):
            part = hashes[start : start + _EMBED_BATCH]
            vectors = normalise(self.embedder.embed([texts_by_hash[h] for h in part]))
            if vectors.shape != (len(part), self.embedder.dim):
                raise WorkspaceIndexError(
                    f"embedding backend {self.embedder.name!r} returned shape "
                    f"{vectors.shape}, expected ({len(part)}, {self.embedder.dim})"
                )
            rows.extend(
                (h, self.embedder.name, self.embedder.dim, vectors[i].tobytes())
                for i, h in enumerate(part)
            )
            if self._progress is not None:
                if isinstance(sentences, bool):
                    as_sentences = len(part) if sentences else 0
                else:
                    as_sentences = sum(1 for h in part if h in sentences)
                self._progress.advance(chunks=len(part) - as_sentences, sentences=as_sentences)
        return rows

    def _write_batch(self, batch: list[_PendingFile], stats: IndexStats) -> None:
        """Store ``batch`` in one transaction; counts what it embedded into ``stats``."""
        if not batch:
            return
        chunk_texts = {chunk.text_hash: chunk.text for f in batch for chunk in f.chunks}
        sentence_texts = {
            s.text_hash: s.text for f in batch for chunk in f.chunks for s in chunk.sentences
        }
        have = self._have_vectors(sorted(chunk_texts.keys() | sentence_texts.keys()))
        # Embed before opening the transaction: the slow part never holds the write lock.
        rows = self._embed({h: t for h, t in chunk_texts.items() if h not in have})
        embedded = {row[0] for row in rows}
        sentence_rows = self._embed(
            {h: t for h, t in sentence_texts.items() if h not in have and h not in embedded},
            sentences=True,
        )
        with self._db:
            self._drop_packs()
            self._db.executemany(_INSERT_VECTORS, rows + sentence_rows)
            for pending in batch:
                self._delete_file(pending.relpath)
                lines = []
                for c in pending.chunks:
                    cursor = self._db.execute(
                        'INSERT INTO rag_chunks(workspace, relpath, chunk_index, start, "end", '
                        "token_count, text_hash, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            self.workspace_id,
                            pending.relpath,
                            c.index,
                            c.start,
                            c.end,
                            c.token_count,
                            c.text_hash,
                            c.text,
                        ),
                    )
                    self._insert_sentences(cursor.lastrowid, c.sentences)
                    lines.append((cursor.lastrowid, c.line_start, c.line_end, c.symbol, c.language))
                insert_lines(self._db, self.workspace_id, pending.relpath, pending.chunker, lines)
                self._db.execute(
                    "INSERT INTO rag_files VALUES (?, ?, ?, ?, ?)",
                    (
                        self.workspace_id,
                        pending.relpath,
                        pending.content_hash,
                        pending.size,
                        pending.mtime_ns,
                    ),
                )
        stats.chunks_embedded += len(rows)
        stats.sentences_embedded += len(sentence_rows)

    def _insert_sentences(self, chunk_id: int | None, sentences: Sequence[_Sentence]) -> None:
        self._db.executemany(
            'INSERT INTO rag_sentences(chunk_id, sentence_index, start, "end", text_hash) '
            "VALUES (?, ?, ?, ?, ?)",
            [(chunk_id, s.index, s.start, s.end, s.text_hash) for s in sentences],
        )

    def _add_missing_sentences(self) -> int:
        """Split the chunks that have no sentences yet (indexed before sentence vectors,
        or with a sentence weight of 0) and embed them; returns sentences embedded."""
        if self.sentence_weight == 0:
            return 0
        rows = self._db.execute(
            "SELECT c.id, c.text, c.text_hash FROM rag_chunks c WHERE c.workspace = ? "
            "AND NOT EXISTS "
            "(SELECT 1 FROM rag_sentences s WHERE s.chunk_id = c.id) ORDER BY c.id",
            (self.workspace_id,),
        ).fetchall()
        embedded = 0
        for start in range(0, len(rows), _EMBED_BATCH):
            part = [
                (chunk_id, self._sentences(text, text_hash))
                for chunk_id, text, text_hash in rows[start : start + _EMBED_BATCH]
            ]
            texts = {s.text_hash: s.text for _, sentences in part for s in sentences}
            have = self._have_vectors(sorted(texts))
            missing = {h: t for h, t in texts.items() if h not in have}
            if self._progress is not None:
                self._progress.plan(sentences=len(missing))
            vectors = self._embed(missing, sentences=True)
            with self._db:
                self._drop_packs()
                self._db.executemany(_INSERT_VECTORS, vectors)
                for chunk_id, sentences in part:
                    self._insert_sentences(chunk_id, sentences)
            embedded += len(vectors)
        return embedded

    def _delete_file(self, relpath: str) -> None:
        key = (self.workspace_id, relpath)
        delete_file_lines(self._db, self.workspace_id, relpath)
        self._db.execute(
            "DELETE FROM rag_sentences WHERE chunk_id IN "
            "(SELECT id FROM rag_chunks WHERE workspace=? AND relpath=?)",
            key,
        )
        self._db.execute("DELETE FROM rag_chunks WHERE workspace=? AND relpath=?", key)
        self._db.execute("DELETE FROM rag_files WHERE workspace=? AND relpath=?", key)

    def _embed_missing(self) -> _Embedded:
        """Embed chunks (and, when searched, sentences) with no vector from the current
        embedder: after a model switch, or when a run was cut short."""
        params = (self.embedder.name, self.embedder.dim, self.workspace_id)
        chunk_rows = self._db.execute(
            "SELECT DISTINCT c.text_hash, c.text FROM rag_chunks c LEFT JOIN rag_embeddings e "
            "ON e.text_hash = c.text_hash AND e.embedder = ? AND e.dim = ? "
            "WHERE c.workspace = ? AND e.text_hash IS NULL",
            params,
        ).fetchall()
        sentence_rows = []
        if self.sentence_weight != 0:
            # substr counts characters, as the stored offsets do; it is 1-based.
            sentence_rows = self._db.execute(
                'SELECT DISTINCT s.text_hash, substr(c.text, s.start + 1, s."end" - s.start) '
                "FROM rag_sentences s JOIN rag_chunks c ON c.id = s.chunk_id "
                "LEFT JOIN rag_embeddings e "
                "ON e.text_hash = s.text_hash AND e.embedder = ? AND e.dim = ? "
                "WHERE c.workspace = ? AND e.text_hash IS NULL",
                params,
            ).fetchall()
        chunk_hashes = {h for h, _ in chunk_rows}
        rows = chunk_rows + [r for r in sentence_rows if r[0] not in chunk_hashes]
        sentence_hashes = {h for h, _ in rows} - chunk_hashes
        if self._progress is not None:
            self._progress.plan(chunks=len(chunk_hashes), sentences=len(sentence_hashes))
        embedded = _Embedded()
        for start in range(0, len(rows), _EMBED_BATCH):
            vectors = self._embed(dict(rows[start : start + _EMBED_BATCH]), sentence_hashes)
            with self._db:
                self._drop_packs(this_embedder_only=True)
                self._db.executemany(_INSERT_VECTORS, vectors)
            for text_hash, *_ in vectors:
                if text_hash in chunk_hashes:
                    embedded.chunks += 1
                else:
                    embedded.sentences += 1
        return embedded

    def embed_missing(self, embedding: EmbedProgress | None = None) -> int:
        """Give every chunk a vector from this index's embedder; returns how many chunk
        vectors were made (sentences missing theirs are embedded too, not counted).

        ``kairox kb sync`` uses it to push a knowledge base's model even when the workspace
        searches with another: vectors of both models are kept side by side.
        """
        with self._exclusive(wait=True), self._lock:
            self._progress = embedding
            try:
                return self._embed_missing().chunks
            finally:
                self._progress = None

    def iter_chunk_vectors(self) -> Iterator[ChunkVector]:
        """Every chunk of this workspace with its vector from this index's embedder."""
        with self._lock:
            rows = self._db.execute(
                'SELECT c.relpath, c.chunk_index, c.start, c."end", c.text, c.text_hash, '
                "e.vector FROM rag_chunks c JOIN rag_embeddings e ON e.text_hash = c.text_hash "
                "AND e.embedder = ? AND e.dim = ? WHERE c.workspace = ? "
                "ORDER BY c.relpath, c.chunk_index",
                (self.embedder.name, self.embedder.dim, self.workspace_id),
            ).fetchall()
        for relpath, index, start, end, text, text_hash, blob in rows:
            yield ChunkVector(
                relpath, index, start, end, text, text_hash, np.frombuffer(blob, np.float32)
            )

    # -- vector packs -----------------------------------------------------------------

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
        if not self.vector_pack:
            with self._db:
                self._drop_packs(this_embedder_only=True)
            remove_packs(self._pack_folder, key)
            return None
        if self._pack_token() is not None:
            return None
        pack, complete = self._load_from_rows(with_sentences=True)
        if not complete or not len(pack.ids):
            return None
        try:
            token = write_pack(self._pack_folder, key, pack)
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

    def _collect_garbage(self) -> None:
        # Vectors that no chunk of any workspace refers to any more.
        with self._db:
            self._db.execute(
                "DELETE FROM rag_embeddings WHERE text_hash NOT IN "
                "(SELECT text_hash FROM rag_chunks UNION SELECT text_hash FROM rag_sentences)"
            )

    # -- inspection -------------------------------------------------------------------

    def file_count(self) -> int:
        with self._lock:
            return self._db.execute(
                "SELECT count(*) FROM rag_files WHERE workspace=?", (self.workspace_id,)
            ).fetchone()[0]

    def chunk_count(self) -> int:
        with self._lock:
            return self._db.execute(
                "SELECT count(*) FROM rag_chunks WHERE workspace=?", (self.workspace_id,)
            ).fetchone()[0]

    def is_indexed(self) -> bool:
        return self.file_count() > 0

    # -- search ---------------------------------------------------------------------

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
        chunks = self._db.execute(
            "SELECT id, text_hash FROM rag_chunks WHERE workspace = ? ORDER BY id",
            (self.workspace_id,),
        ).fetchall()
        found: list[tuple[int, str]] = []
        if with_sentences and chunks:
            # No ORDER BY: SQLite would sort in a temporary B-tree; numpy groups the
            # sentences by chunk below in one pass instead.
            found = self._db.execute(
                "SELECT s.chunk_id, s.text_hash FROM rag_sentences s "
                "JOIN rag_chunks c ON c.id = s.chunk_id WHERE c.workspace = ?",
                (self.workspace_id,),
            ).fetchall()
        # Each distinct vector is loaded once, whoever uses it: neighbouring chunks
        # overlap, so many sentences (and one-sentence chunks) share a text and a vector.
        row_of, distinct = self._load_vectors({h for _, h in chunks} | {h for _, h in found})

        # A chunk whose vector is missing (embedding interrupted) is not searched.
        chunk_rows = np.fromiter((row_of.get(h, -1) for _, h in chunks), np.int64, len(chunks))
        embedded = chunk_rows >= 0
        ids = np.fromiter((i for i, _ in chunks), np.int64, len(chunks))[embedded]
        owner_ids = np.fromiter((c for c, _ in found), np.int64, len(found))
        vector_rows = np.fromiter((row_of.get(h, -1) for _, h in found), np.int64, len(found))
        owners = np.searchsorted(ids, owner_ids)
        # Sentences without a vector, or of a chunk that is not searched, are not
        # searched either.
        keep = np.zeros(len(found), dtype=bool)
        if len(ids):
            keep = (owners < len(ids)) & (ids[np.minimum(owners, len(ids) - 1)] == owner_ids)
        keep &= vector_rows >= 0
        order = np.flatnonzero(keep)[np.argsort(owners[keep], kind="stable")]
        pack = VectorPack(
            ids=ids,
            chunk_rows=chunk_rows[embedded],
            owners=owners[order],
            sentence_rows=vector_rows[order],
            vectors=distinct,
        )
        return pack, bool(embedded.all() and keep.all())

    def _load_vectors(self, needed: set[str]) -> tuple[dict[str, int], np.ndarray]:
        """The current embedder's vectors for the text hashes in ``needed``: (row of each
        hash, matrix of unit rows)."""
        kind = (self.embedder.name, self.embedder.dim)
        everything = self._db.execute("SELECT count(*) FROM rag_embeddings").fetchone()[0]
        if everything <= 2 * len(needed):
            # Mostly this workspace's vectors: reading the table straight through beats
            # looking each hash up (two B-tree searches a vector).
            rows = [
                row
                for row in self._db.execute(
                    "SELECT text_hash, vector FROM rag_embeddings WHERE embedder = ? AND dim = ?",
                    kind,
                )
                if row[0] in needed
            ]
        else:
            rows = self._db.execute(
                "SELECT text_hash, vector FROM rag_embeddings WHERE embedder = ? AND dim = ? "
                "AND text_hash IN (SELECT value FROM json_each(?))",
                (*kind, json.dumps(sorted(needed))),
            ).fetchall()
        row_of = {text_hash: row for row, (text_hash, _) in enumerate(rows)}
        # Stored vectors are unit length already (_embed normalises them).
        matrix = np.frombuffer(b"".join(v for _, v in rows), dtype=np.float32)
        return row_of, matrix.reshape(len(rows), self.embedder.dim)

    def _hits(self, scored: Sequence[tuple[int, float]], source: str) -> list[Hit]:
        if not scored:
            return []
        marks = ",".join("?" * len(scored))
        rows = {
            row[0]: row[1:]
            for row in self._db.execute(
                f'SELECT c.id, c.relpath, c.chunk_index, c.start, c."end", c.text, f.size, '
                f"f.mtime_ns FROM rag_chunks c {FILES_JOIN} WHERE c.id IN ({marks})",
                [chunk_id for chunk_id, _ in scored],
            )
        }
        lines = line_metadata(self._db, list(rows))
        hits = []
        for chunk_id, score in scored:
            if chunk_id not in rows:
                continue  # removed by a `kairox index` that committed since the search began
            relpath, index, start, end, text, size, mtime_ns = rows[chunk_id]
            hits.append(
                Hit(
                    id=f"{relpath}#{index}",
                    text=text,
                    score=float(score),
                    source=source,
                    uri=str(self.root / relpath),
                    metadata={
                        **chunk_metadata(relpath, size, mtime_ns),
                        "chunk": index,
                        "start": start,
                        "end": end,
                        **lines.get(chunk_id, {}),
                    },
                )
            )
        return hits

    def _filter_clause(
        self, filters: Mapping[str, Any] | FilterExpr | None
    ) -> tuple[str, list[Any]]:
        """SQL over ``rag_chunks c`` joined with ``rag_files f`` (:data:`FILES_JOIN`) for a
        filter on chunk metadata (``""`` when none); see :mod:`kairox.workspace.filtering`."""
        return filter_sql(parse_filter(filters))

    def search_vector(
        self,
        vector: np.ndarray,
        k: int,
        filters: Mapping[str, Any] | FilterExpr | None = None,
        *,
        source: str = "workspace",
    ) -> list[Hit]:
        """Cosine similarity of one query vector against every chunk (blended with the
        chunk's best sentence unless the sentence weight is 0); the top ``k``."""
        with self._lock:
            ids, matrix, sentences = self._matrix()
            if len(ids) == 0:
                return []
            if np.asarray(vector).shape[-1] != matrix.shape[1]:
                raise WorkspaceIndexError(
                    f"the query vector has {np.asarray(vector).shape[-1]} dimensions; the "
                    f"index holds {matrix.shape[1]} ({self.embedder.name})"
                )
            mask = None
            if filters:
                clause, params = self._filter_clause(filters)
                allowed = np.fromiter(
                    (
                        row[0]
                        for row in self._db.execute(
                            f"SELECT c.id FROM rag_chunks c {FILES_JOIN} "
                            f"WHERE c.workspace = ?{clause}",
                            [self.workspace_id, *params],
                        )
                    ),
                    dtype=np.int64,
                )
                mask = np.isin(ids, allowed)
            rows, scores = top_k(
                matrix,
                np.asarray(vector),
                k,
                mask=mask,
                sentences=sentences,
                sentence_weight=self.sentence_weight,
            )
            chosen = [(int(ids[r]), float(s)) for r, s in zip(rows, scores, strict=True)]
            return self._hits(chosen, source)

    def search_words(
        self,
        text: str,
        k: int,
        filters: Mapping[str, Any] | FilterExpr | None = None,
        *,
        source: str = "workspace-fts",
    ) -> list[Hit]:
        """BM25 (FTS5) over chunk text and file paths; the top ``k``. Any text is safe."""
        expression = match_expression(text)
        if expression is None:
            return []
        clause, params = self._filter_clause(filters or {})
        with self._lock:
            rows = self._db.execute(
                "SELECT rag_chunks_fts.rowid, bm25(rag_chunks_fts) AS rank FROM rag_chunks_fts "
                f"JOIN rag_chunks c ON c.id = rag_chunks_fts.rowid {FILES_JOIN} "
                f"WHERE rag_chunks_fts MATCH ? AND c.workspace = ?{clause} "
                "ORDER BY rank, c.id LIMIT ?",
                [expression, self.workspace_id, *params, k],
            ).fetchall()
            return self._hits([(row[0], -row[1]) for row in rows], source)


class WorkspaceDenseRetriever:
    """The workspace index searched by embedding similarity."""

    score_kind = ScoreKind.COSINE
    filter_support = ALL_OPERATORS

    def __init__(
        self, index: WorkspaceRagIndex, name: str = "workspace", fusion_weight: float | None = None
    ) -> None:
        self.index = index
        self.name = name
        self.embedder = index.embedder
        #: The weight the composite gives this source unless told otherwise: the one
        #: given, else the embedder's own ``fusion_weight`` (1.0 when it names none).
        self.fusion_weight = float(
            getattr(self.embedder, "fusion_weight", 1.0) if fusion_weight is None else fusion_weight
        )

    def unavailable_reason(self) -> str | None:
        return None if self.index.is_indexed() else NOT_INDEXED

    def _search(self, query: Query) -> list[Hit]:
        if not query.text.strip():
            return []
        vector = query.embeddings.get(self.embedder.name)
        if vector is None:
            vector = self.embedder.embed([query.embed_text or query.text])[0]
        return self.index.search_vector(vector, query.k, query.filter, source=self.name)

    async def retrieve(self, query: Query) -> list[Hit]:
        return await asyncio.to_thread(self._search, query)


class WorkspaceLexicalRetriever:
    """The workspace index searched by words (FTS5 BM25 over chunks and paths)."""

    score_kind = ScoreKind.BM25
    filter_support = ALL_OPERATORS

    def __init__(self, index: WorkspaceRagIndex, name: str = "workspace-fts") -> None:
        self.index = index
        self.name = name

    def unavailable_reason(self) -> str | None:
        return None if self.index.is_indexed() else NOT_INDEXED

    async def retrieve(self, query: Query) -> list[Hit]:
        return await asyncio.to_thread(
            self.index.search_words, query.text, query.k, query.filter, source=self.name
        )
