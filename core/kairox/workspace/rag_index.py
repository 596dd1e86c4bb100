"""``WorkspaceRagIndex``: the workspace's files, chunked, embedded and searchable.

A run streams: it walks the workspace once to count what there is to do (when a
progress watches), then again reading, chunking, embedding and writing the new and changed files a batch at a time,
so its memory holds one batch whatever the workspace's size (what it must remember of
every file, the stored rows and the paths seen, stays in SQLite:
:mod:`~kairox.workspace.index_run_files`). Each batch of files is replaced in one
transaction, so a run killed at any point leaves every file's chunks from one version
and the index searchable; the next run finishes the job. An advisory file lock keeps
two ``kairox index`` runs on one workspace from interleaving.
The tables are in :mod:`~kairox.workspace.index_schema`; chunking, embedding, vector
packs and search are mixed in from :mod:`~kairox.workspace.index_chunks`,
:mod:`~kairox.workspace.index_embedding`, :mod:`~kairox.workspace.index_packs` and
:mod:`~kairox.workspace.index_search`.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from kairox.retrieval.embedding import EmbeddingBackend, model_loaded, release_model
from kairox.retrieval.fts5_common import CommonTerms
from kairox.retrieval.fts5_merge import merge_segments, worth_merging
from kairox.retrieval.vectors import SENTENCE_WEIGHT, SentenceVectors, check_sentence_weight
from kairox.support.embed_progress import EmbedProgress
from kairox.support.paths import disk_full_errors, state_lock
from kairox.workspace.convert.converters import CONVERSION_FAILED, Converters
from kairox.workspace.failed_files import Failure, forget_and_remember, known_failures
from kairox.workspace.files import SkipCallback, Skipped, WorkspaceFile, iter_workspace_files
from kairox.workspace.index_chunks import ChunkingMixin
from kairox.workspace.index_embedding import _INSERT_VECTORS, EmbeddingMixin
from kairox.workspace.index_packs import VectorPacksMixin
from kairox.workspace.index_retrievers import WorkspaceDenseRetriever, WorkspaceLexicalRetriever
from kairox.workspace.index_run_files import RunFiles, StoredFile
from kairox.workspace.index_schema import open_database
from kairox.workspace.index_search import SearchMixin
from kairox.workspace.index_types import (
    NOT_INDEXED,
    ChunkVector,
    IndexBusyError,
    IndexStats,
    WorkspaceIndexError,
    _PendingFile,
    _Sentence,
    _text_hash,
    embed_text,
)
from kairox.workspace.line_store import delete_file_lines, insert_lines
from kairox.workspace.selection import FileSelection
from kairox.workspace.vector_pack import FORMATS, VectorPack

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
# Walked files looked up in the index together (their stored rows in one query).
FILES_PER_LOOKUP = 256


class WorkspaceRagIndex(ChunkingMixin, EmbeddingMixin, VectorPacksMixin, SearchMixin):
    """Index a workspace's text files and search them by vector or by words.

    :param database: the SQLite file (normally ``$KAIROX_HOME/kairox.db``).
    :param root: the workspace root; its resolved path is the workspace id.
    :param embedder: the embedding backend; only its vectors are ever searched.
    :param sentence_weight: how much a chunk's best sentence counts in its vector score
        (:mod:`kairox.retrieval.vectors`); every sentence of every chunk is embedded too,
        about doubling the embedding work. 0 embeds and searches whole chunks only.
    :param vector_pack: store the vectors once, in a pack next to the database that a
        new process maps into memory at once (:mod:`kairox.workspace.index_packs`);
        ``False`` keeps them as float32 rows of the database only (the next
        :meth:`index` moves a pack's vectors back into rows and deletes it).
    :param vector_format: how the pack stores each vector
        (:data:`~kairox.workspace.vector_pack.FORMATS`); the next :meth:`index`
        rewrites a pack of another format.
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
        vector_format: str = "float16",
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
        if vector_format not in FORMATS:
            raise ValueError(
                f"unknown vector format {vector_format!r}; one of {', '.join(FORMATS)}"
            )
        self.vector_format = vector_format
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
        self._store_cache: tuple[str, VectorPack | None] | None = None
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
        :param progress: ``progress(relpath, done, total)`` after each file is taken
            (found unchanged, or read and chunked; every :data:`FILES_PER_BATCH` read
            files are embedded and written as the walk goes on). ``total`` comes from a
            first walk that counts the files.
        :param embedding: counts the files to read first (its documents, named
            "files"), then each batch's chunks and sentences as it is read and embedded
            (for a rate and an ETA).
        """
        with disk_full_errors(self.database.parent), self._exclusive(wait), self._lock:
            self._progress = embedding
            if embedding is not None:
                embedding.unit, embedding.verb = "files", "read"
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
        failed = known_failures(self._db, self.workspace_id)
        with RunFiles(self._db, self.workspace_id) as run:
            # The first walk only feeds a progress: a run without one walks once.
            watched = progress is not None or self._progress is not None
            total = self._survey(run, failed) if watched else 0
            failures = self._update_files(run, failed, stats, progress, total)
            removed = 0
            for gone in run.unseen(FILES_PER_BATCH):
                with self._db:
                    self._unarrange()
                    for relpath in gone:
                        self._delete_file(relpath)
                removed += len(gone)
        with self._db:
            forget_and_remember(self._db, self.workspace_id, failures)
        stats.removed = removed
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
        files = self._db.execute("SELECT count(*) FROM rag_files").fetchone()[0] + removed
        if worth_merging(changed, files):
            merge_segments(self._db, "rag_chunks_fts")
        stats.pack_bytes = self._refresh_pack()
        stats.chunks_total = self.chunk_count()
        return stats

    def _walk(self, on_skip: SkipCallback | None = None) -> Iterator[list[WorkspaceFile]]:
        """The workspace's files, in groups of :data:`FILES_PER_LOOKUP`."""
        files = iter_workspace_files(
            self.root, max_bytes=self.max_file_bytes, on_skip=on_skip, selection=self.selection
        )
        while group := list(itertools.islice(files, FILES_PER_LOOKUP)):
            yield group

    def _is_current(self, stored: StoredFile | None, file: WorkspaceFile) -> bool:
        """Whether ``file`` is indexed as it is: same size and time, cut by the chunker it
        would get now (a file cut by another is cut again)."""
        return (
            stored is not None
            and (stored.size, stored.mtime_ns) == (file.size, file.mtime_ns)
            and stored.chunker == self._chunker(file.relpath)
        )

    def _survey(self, run: RunFiles, failed: Mapping[str, Failure]) -> int:
        """Walk once, keeping nothing but counts: how many files there are (returned)
        and how many must be read, planned into the progress as files."""
        total = to_read = 0
        for group in self._walk():
            stored = run.stored([file.relpath for file in group])
            total += len(group)
            for file in group:
                failure = failed.get(file.relpath)
                if not self._is_current(stored.get(file.relpath), file) and not (
                    failure is not None and failure.matches(file.size, file.mtime_ns)
                ):
                    to_read += 1
            if self._progress is not None:
                self._progress.set_stage(f"finding files: {total}")
        if self._progress is not None:
            self._progress.set_stage("")
            self._progress.plan(documents=to_read)
            if to_read:
                # Before the first file is counted read: a step the progress shows only
                # while no file is done yet.
                self._load_model_as_a_step()
        return total

    def _update_files(
        self,
        run: RunFiles,
        failed: Mapping[str, Failure],
        stats: IndexStats,
        progress: Callable[[str, int, int], None] | None,
        total: int,
    ) -> list[Failure]:
        """Walk again, reading, chunking, embedding and writing the new and changed files
        a batch at a time as the walk goes: memory holds one group of paths and one
        batch of chunks, whatever the workspace's size. Returns this run's failures."""
        failures: list[Failure] = []
        pending: list[_PendingFile] = []
        done = 0
        for group in self._walk(stats.skip):
            stored = run.stored([file.relpath for file in group])
            seen: list[str] = []
            touched: list[tuple[int, int, str, str]] = []  # new stat of unchanged content
            for file in group:
                done += 1
                previous = stored.get(file.relpath)
                failure = failed.get(file.relpath)
                if self._is_current(previous, file):
                    seen.append(file.relpath)
                    stats.unchanged += 1
                elif failure is not None and failure.matches(file.size, file.mtime_ns):
                    # Failed to convert before and not changed since: not read again.
                    failures.append(failure)
                    stats.skip(file.relpath, failure.reason, failure.detail)
                else:
                    prepared = self._read(file, previous, stats, failures, seen, touched)
                    if prepared is not None:
                        pending.append(prepared)
                    if self._progress is not None:
                        self._progress.advance(documents=1)
                if progress is not None:
                    progress(file.relpath, done, total)
                if len(pending) >= FILES_PER_BATCH:
                    self._write_batch(pending, stats)
                    pending = []
            run.see(seen)
            with self._db:
                self._db.executemany(
                    "UPDATE rag_files SET size=?, mtime_ns=? WHERE workspace=? AND relpath=?",
                    touched,
                )
        self._write_batch(pending, stats)
        return failures

    def _read(
        self,
        file: WorkspaceFile,
        previous: StoredFile | None,
        stats: IndexStats,
        failures: list[Failure],
        seen: list[str],
        touched: list[tuple[int, int, str, str]],
    ) -> _PendingFile | None:
        """Read ``file``; its chunks when they must be written (new or changed text).
        Counts it into ``stats``, a failed conversion into ``failures``, a file that stays
        into ``seen`` and one whose text is unchanged under a new stat into ``touched``."""
        # Binary, unreadable or gone since the walk: not indexed (leaves if it was).
        converted = self.converters.read(file.path, max_bytes=self.max_file_bytes)
        if isinstance(converted, Skipped):
            stats.skip(file.relpath, converted.reason, converted.detail)
            if converted.reason == CONVERSION_FAILED:
                failures.append(
                    Failure(
                        file.relpath, file.size, file.mtime_ns, converted.reason, converted.detail
                    )
                )
            return None
        seen.append(file.relpath)
        content_hash = _text_hash(converted.text)
        if (
            previous is not None
            and previous.content_hash == content_hash
            and previous.chunker == self._chunker(file.relpath)
        ):
            stats.unchanged += 1
            touched.append((file.size, file.mtime_ns, self.workspace_id, file.relpath))
            return None
        if previous is None:
            stats.added += 1
        else:
            stats.updated += 1
        return self._prepare(file, converted, content_hash)

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
        if not self.vectors:  # words only: nothing to embed
            chunk_texts = sentence_texts = {}
        have = self._have_vectors(sorted(chunk_texts.keys() | sentence_texts.keys()))
        chunks = {h: t for h, t in chunk_texts.items() if h not in have}
        sentences = {h: t for h, t in sentence_texts.items() if h not in have and h not in chunks}
        if self._progress is not None:
            # Planned a batch at a time, as the walk finds the work (the files to read
            # were planned first; the bar and the ETA follow them).
            self._progress.plan(chunks=len(chunks), sentences=len(sentences))
        # Embed before opening the transaction: the slow part never holds the write lock.
        rows = self._embed(chunks)
        sentence_rows = self._embed(sentences, sentences=True)
        with self._db:
            self._unarrange()
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
        """Whether this workspace has an indexed file. Asked before every search (the
        plan's check that its sources still answer): an index lookup of the first row,
        not a count of them all (a count took 0.26 ms at 6,000 files, 4.8 at 100,000)."""
        with self._lock:
            return bool(
                self._db.execute(
                    "SELECT EXISTS (SELECT 1 FROM rag_files WHERE workspace=?)",
                    (self.workspace_id,),
                ).fetchone()[0]
            )
