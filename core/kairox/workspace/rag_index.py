"""``WorkspaceRagIndex``: the workspace's files, chunked, embedded and searchable.

Each batch of files is replaced in one transaction, so a run killed at any point
leaves every file's chunks from one version; the next run finishes the job. An
advisory file lock keeps two ``kairox index`` runs on one workspace from interleaving.
The tables are in :mod:`~kairox.workspace.index_schema`; embedding, vector packs and
search are mixed in from :mod:`~kairox.workspace.index_embedding`,
:mod:`~kairox.workspace.index_packs` and :mod:`~kairox.workspace.index_search`.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kairox.embed_progress import EmbedProgress
from kairox.embedding import EmbeddingBackend, model_loaded, release_model
from kairox.paths import disk_full_errors, state_lock
from kairox.retrieval.fts5_common import CommonTerms
from kairox.retrieval.fts5_merge import merge_segments, worth_merging
from kairox.retrieval.vectors import SENTENCE_WEIGHT, SentenceVectors, check_sentence_weight
from kairox.workspace.chunking import split_sentences
from kairox.workspace.code_chunks import chunk_source
from kairox.workspace.convert.base import Converted
from kairox.workspace.convert.converters import CONVERSION_FAILED, Converters
from kairox.workspace.convert.sections import DocumentChunk, chunk_converted
from kairox.workspace.failed_files import Failure, forget_and_remember, known_failures
from kairox.workspace.files import Skipped, WorkspaceFile, iter_workspace_files
from kairox.workspace.index_embedding import _INSERT_VECTORS, EmbeddingMixin
from kairox.workspace.index_packs import VectorPacksMixin
from kairox.workspace.index_retrievers import WorkspaceDenseRetriever, WorkspaceLexicalRetriever
from kairox.workspace.index_schema import open_database
from kairox.workspace.index_search import SearchMixin
from kairox.workspace.index_types import (
    NOT_INDEXED,
    ChunkVector,
    IndexBusyError,
    IndexStats,
    WorkspaceIndexError,
    _Chunk,
    _PendingFile,
    _Sentence,
    _text_hash,
    embed_text,
)
from kairox.workspace.line_chunks import SourceChunk
from kairox.workspace.line_store import (
    chunker_for,
    delete_file_lines,
    insert_lines,
    stale_files,
)
from kairox.workspace.selection import FileSelection

__all__ = [
    "FILES_PER_BATCH",
    "NOT_INDEXED",
    "ChunkVector",
    "IndexBusyError",
    "IndexStats",
    "WorkspaceDenseRetriever",
    "WorkspaceIndexError",
    "WorkspaceLexicalRetriever",
    "WorkspaceRagIndex",
    "open_database",
]

# Files whose chunks are embedded and written together: small enough that a killed run
# loses little work, large enough to batch the embedder well.
FILES_PER_BATCH = 32


class WorkspaceRagIndex(EmbeddingMixin, VectorPacksMixin, SearchMixin):
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
    :param vectors: embed and store vectors at all; ``False`` keeps words only (no
        embedding, nothing on disk for vectors; the by-vector retriever then says it is
        unavailable), and the next :meth:`index` deletes the workspace's packs.
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
        vectors: bool = True,
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
        self.vectors = vectors
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
        self._common_terms = CommonTerms("rag_chunks_fts")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- indexing -------------------------------------------------------------------

    @contextlib.contextmanager
    def _exclusive(self, wait: bool) -> Iterator[None]:
        try:
            with state_lock(self.database, "index", self.workspace_id, wait=wait):
                yield
        except BlockingIOError:
            raise IndexBusyError(
                f"another `kairox index` is running on {self.root}; wait for it to "
                "finish, or run without --no-wait to wait for it automatically"
            ) from None

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
        with disk_full_errors(self.database.parent), self._exclusive(wait), self._lock:
            self._progress = embedding
            try:
                return self._index(progress)
            finally:
                self._progress = None

    def _index(self, progress: Callable[[str, int, int], None] | None) -> IndexStats:
        stats = IndexStats()
        # A model this run loads is released when its last batch is embedded: the
        # FTS5 merge and the vector pack would otherwise be built next to it, which set
        # the run's peak memory (#16). A model loaded before (a warm process) stays.
        release_after = not model_loaded(self.embedder)
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
        failed = known_failures(self._db, self.workspace_id)
        failures: list[Failure] = []  # this run's, remembered at the end
        seen: set[str] = set()
        pending: list[_PendingFile] = []
        touched: list[tuple[int, int, str, str]] = []  # new stat of unchanged content
        for done, file in enumerate(files, start=1):
            previous = known.get(file.relpath)
            failure = failed.get(file.relpath)
            if previous is not None and previous[1:] == (file.size, file.mtime_ns):
                seen.add(file.relpath)
                stats.unchanged += 1
            elif failure is not None and failure.matches(file.size, file.mtime_ns):
                # Failed to convert before and not changed since: not read again.
                failures.append(failure)
                stats.skip(file.relpath, failure.reason, failure.detail)
            else:
                # Binary, unreadable or gone since the walk: not indexed (leaves if it was).
                converted = self.converters.read(file.path, max_bytes=self.max_file_bytes)
                if isinstance(converted, Skipped):
                    stats.skip(file.relpath, converted.reason, converted.detail)
                    if converted.reason == CONVERSION_FAILED:
                        failures.append(
                            Failure(
                                file.relpath,
                                file.size,
                                file.mtime_ns,
                                converted.reason,
                                converted.detail,
                            )
                        )
                else:
                    text = converted.text
                    seen.add(file.relpath)
                    content_hash = _text_hash(text)
                    if previous is not None and previous[0] == content_hash:
                        stats.unchanged += 1
                        touched.append((file.size, file.mtime_ns, self.workspace_id, file.relpath))
                    else:
                        pending.append(self._prepare(file, converted, content_hash))
                        if previous is None:
                            stats.added += 1
                        else:
                            stats.updated += 1
            if progress is not None:
                progress(file.relpath, done, len(files))
        # Chunked first, embedded after: the work to do is known before it starts, so
        # progress has a total (chunks hold text only; vectors are written per batch).
        self._plan(pending, FILES_PER_BATCH)
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
            forget_and_remember(self._db, self.workspace_id, failures)
        stats.removed = len(gone)
        stats.sentences_embedded += self._add_missing_sentences()
        embedded = self._embed_missing()
        stats.chunks_embedded += embedded.chunks
        stats.sentences_embedded += embedded.sentences
        if release_after:
            release_model(self.embedder)
        self._collect_garbage()
        # A run that rewrote a good share of the files merges the words' index (a query
        # reads every segment its batches left; kairox.retrieval.fts5_merge). The table
        # holds every workspace of this database, so the share is of all their files.
        changed = stats.added + stats.updated + stats.removed
        total = self._db.execute("SELECT count(*) FROM rag_files").fetchone()[0] + len(gone)
        if worth_merging(changed, total):
            merge_segments(self._db, "rag_chunks_fts")
        stats.pack_bytes = self._refresh_pack()
        stats.chunks_total = self.chunk_count()
        return stats

    def _chunker(self, relpath: str) -> str:
        chunker = chunker_for(relpath, self.syntax_chunks)
        spec = self.converters.claiming(relpath) if chunker == "lines" else None
        # Bumped when converted documents are cut differently (1: by page and heading).
        return f"converted:{spec.name}:1" if spec is not None else chunker

    def _prepare(
        self, file: WorkspaceFile, converted: Converted, content_hash: str
    ) -> _PendingFile:
        chunker = self._chunker(file.relpath)
        if not converted.source_lines:
            chunks = self._document_chunks(converted)
            return _PendingFile(
                file.relpath, content_hash, file.size, file.mtime_ns, chunks, chunker
            )
        chunks = []
        for c in chunk_source(
            converted.text,
            path=file.relpath,
            max_tokens=self.chunk_tokens,
            overlap_tokens=self.chunk_overlap,
            encoding=self.encoding,
            syntax=chunker != "lines",
        ):
            chunks.append(
                self._chunk(
                    c,
                    c.context,
                    line_start=c.line_start,
                    line_end=c.line_end,
                    symbol=c.symbol,
                    language=c.language,
                )
            )
        return _PendingFile(file.relpath, content_hash, file.size, file.mtime_ns, chunks, chunker)

    def _document_chunks(self, converted: Converted) -> list[_Chunk]:
        """A PDF's (HTML page's, notebook's...) chunks cut at its pages and headings, each
        labelled with them; its lines are 0, the extracted text's lines being no place in
        the file. The heading path is the chunk's search context."""
        chunks = []
        for c in chunk_converted(
            converted,
            max_tokens=self.chunk_tokens,
            overlap_tokens=self.chunk_overlap,
            encoding=self.encoding,
        ):
            labels = {k: v for k, v in c.metadata.items() if k not in {"line_start", "line_end"}}
            chunks.append(
                self._chunk(
                    c,
                    str(labels.get("heading", "")),
                    labels=json.dumps(labels, sort_keys=True) if labels else "",
                )
            )
        return chunks

    def _chunk(self, c: SourceChunk | DocumentChunk, context: str, **where: Any) -> _Chunk:
        """The stored form of chunk ``c``, searched with ``context``; ``where`` are its
        place fields (lines, symbol, labels)."""
        # The vector (addressed by this hash) is of the context and the text together.
        text_hash = _text_hash(embed_text(context, c.text))
        sentences = self._sentences(c.text, text_hash)
        return _Chunk(
            c.index,
            c.start,
            c.end,
            c.token_count,
            text_hash,
            c.text,
            sentences,
            context=context,
            **where,
        )

    def _sentences(self, chunk: str, chunk_hash: str) -> tuple[_Sentence, ...]:
        if self.sentence_weight == 0 or not self.vectors:
            return ()
        found = split_sentences(chunk, encoding=self.encoding)
        if len(found) == 1:
            # The chunk is one sentence: its own vector serves (nothing more to embed).
            only = found[0]
            return (_Sentence(0, only.start, only.end, chunk_hash, chunk),)
        return tuple(_Sentence(s.index, s.start, s.end, _text_hash(s.text), s.text) for s in found)

    def _write_batch(self, batch: list[_PendingFile], stats: IndexStats) -> None:
        """Store ``batch`` in one transaction; counts what it embedded into ``stats``."""
        if not batch:
            return
        chunk_texts = {
            chunk.text_hash: embed_text(chunk.context, chunk.text)
            for f in batch
            for chunk in f.chunks
        }
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
                        "token_count, text_hash, text, context) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            self.workspace_id,
                            pending.relpath,
                            c.index,
                            c.start,
                            c.end,
                            c.token_count,
                            c.text_hash,
                            c.text,
                            c.context,
                        ),
                    )
                    self._insert_sentences(cursor.lastrowid, c.sentences)
                    lines.append(
                        (
                            cursor.lastrowid,
                            c.line_start,
                            c.line_end,
                            c.symbol,
                            c.language,
                            c.labels,
                        )
                    )
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
