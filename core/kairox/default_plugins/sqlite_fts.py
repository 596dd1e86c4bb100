"""The built-in ``sqlite-fts`` knowledge-base kind: SQLite FTS5 over title and body.

Documents live in a plain table; an external-content FTS5 table (``porter unicode61``)
indexes their title and body and is kept in step by triggers, so add/update/delete by id
is one statement on the documents table. FTS5's ``bm25()`` is *lower is better*; hits
carry its negation so that, like every Kairox score, higher is better. Unfiltered
searches score a memory-mapped copy of the postings instead, with the same ranking, while
it matches the documents (:mod:`kairox.default_plugins.sqlite_fts_pack`). Files are opened
through :mod:`kairox.retrieval.sqlite_engine` (apsw), so that several indexes searched in
parallel threads really run in parallel.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import apsw
import numpy as np

from kairox.default_plugins.sqlite_fts_config import DEFAULT_TITLE_WEIGHT, SqliteFtsConfig
from kairox.default_plugins.sqlite_fts_pack import INVALIDATE, WordsPacks
from kairox.default_plugins.sqlite_fts_pack import SCHEMA as WORDS_PACK_SCHEMA
from kairox.default_plugins.sqlite_vectors import DocumentVectors
from kairox.plugin_host.registry import BuildContext, KnowledgeBaseKind, registers
from kairox.retrieval import Document, Hit, Query, QueryError, ScoreKind, sqlite_engine
from kairox.retrieval.ann import ANN_THRESHOLD
from kairox.retrieval.bm25_pack import Weights
from kairox.retrieval.embedding import EmbeddingBackend
from kairox.retrieval.filters import ALL_OPERATORS, FilterExpr, parse_filter
from kairox.retrieval.filters.sql import compile_sql, register_functions
from kairox.retrieval.fts5 import match_terms
from kairox.retrieval.fts5_common import CommonTerms
from kairox.retrieval.fts5_merge import merge_segments, worth_merging
from kairox.retrieval.fusion import fuse
from kairox.retrieval.sqlite_engine import connect, enable_wal
from kairox.retrieval.vectors import SENTENCE_WEIGHT, default_sentence_weight
from kairox.store.sqlite import immediate_transaction
from kairox.support.errors import KairoxError
from kairox.support.paths import SQLITE_COMPANIONS, in_kairox_home, private_file, private_folder

#: One stored document: (id, title, body, uri, metadata).
_Row = tuple[str, str, str, "str | None", dict[str, Any]]

# 2: kb_words_packs (kairox.default_plugins.sqlite_fts_pack); a version 1 file gains it.
_SCHEMA_VERSION = 2
_TOKENIZE = "porter unicode61 remove_diacritics 2"

_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS documents (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL,
    uri TEXT,
    metadata TEXT NOT NULL DEFAULT '{}',
    fingerprint TEXT NOT NULL DEFAULT ''
);
CREATE VIRTUAL TABLE IF NOT EXISTS documents_fts USING fts5(
    title, body, content='documents', content_rowid='rowid',
    tokenize='"""
    + _TOKENIZE
    + """'
);
CREATE TRIGGER IF NOT EXISTS documents_ai AFTER INSERT ON documents BEGIN
    INSERT INTO documents_fts(rowid, title, body) VALUES (new.rowid, new.title, new.body);
END;
CREATE TRIGGER IF NOT EXISTS documents_ad AFTER DELETE ON documents BEGIN
    INSERT INTO documents_fts(documents_fts, rowid, title, body)
    VALUES ('delete', old.rowid, old.title, old.body);
END;
CREATE TRIGGER IF NOT EXISTS documents_au AFTER UPDATE ON documents BEGIN
    INSERT INTO documents_fts(documents_fts, rowid, title, body)
    VALUES ('delete', old.rowid, old.title, old.body);
    INSERT INTO documents_fts(rowid, title, body) VALUES (new.rowid, new.title, new.body);
END;
"""
    + WORDS_PACK_SCHEMA
)


class SqliteFtsError(KairoxError, RuntimeError):
    """The index file is missing, unreadable or not a Kairox FTS index."""


def _filter_sql(filters: Mapping[str, Any] | FilterExpr | None) -> tuple[str, list[Any]]:
    # The one compiler over the JSON metadata column: names and values are bound.
    expr = parse_filter(filters)
    if expr is None:
        return "", []
    sql, params = compile_sql(expr, "d.metadata")
    return f" AND {sql}", params


class SqliteFtsIndex:
    """One FTS5 index file: add, replace, delete and search documents by id."""

    def __init__(self, path: Path | str, *, create: bool = False) -> None:
        self.path = Path(path)
        if not create and not self.path.exists():
            raise SqliteFtsError(f"index file {self.path} does not exist")
        if create and in_kairox_home(self.path):
            # Inside Kairox's own state: owner-only like the rest of it (kairox.support.paths).
            private_folder(self.path.parent)
            private_file(self.path, companions=SQLITE_COMPANIONS)
        elif create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # One connection shared by the worker threads of asyncio.to_thread; the lock
        # serialises use of it (SQLite would serialise the writes anyway).
        self._lock = threading.Lock()
        #: documents written (added, replaced, deleted) since opened or last compacted.
        self._written = 0
        self._common = CommonTerms("documents_fts")
        try:
            self._db = connect(self.path, create=create)
        except apsw.Error as exc:
            raise SqliteFtsError(
                f"cannot open the index file {self.path}: {exc}; check that the path is "
                "right and that its folder is readable and writable"
            ) from exc
        try:
            if create and not self._db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                # A new file gives the pages it frees back (set before anything else: a
                # file's first table fixes the mode). Vectors wait as rows until an
                # ingest's end packs them; their pages then go (sqlite_vector_store).
                self._db.execute("PRAGMA auto_vacuum = INCREMENTAL")
            enable_wal(self._db)
            register_functions(self._db)
            if self._schema_version() != _SCHEMA_VERSION:
                self._create_schema()
        except apsw.BusyError as exc:
            self._db.close()
            raise SqliteFtsError(
                f"{self.path} stayed locked by another connection for "
                f"{sqlite_engine.BUSY_TIMEOUT_S:g} s ({exc}); if `kairox kb ingest` is writing "
                "to it, try again when it has finished"
            ) from exc
        except apsw.Error as exc:
            self._db.close()
            raise SqliteFtsError(f"{self.path} is not a readable SQLite FTS index: {exc}") from exc
        except SqliteFtsError:
            self._db.close()
            raise
        self.words = WordsPacks(self._db, self._lock, self.path, _TOKENIZE)

    def _schema_version(self) -> int:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > _SCHEMA_VERSION:
            raise SqliteFtsError(
                f"{self.path} was written by a newer Kairox (schema {version}); upgrade kairox"
            )
        return version

    def _create_schema(self) -> None:
        # IMMEDIATE takes the write lock before reading, so a second opener of a new file
        # waits out the busy timeout and then finds the schema there. A deferred
        # transaction would read first and then fail at once with "database is locked"
        # (SQLITE_BUSY_SNAPSHOT) when another connection wrote in between.
        with immediate_transaction(self._db):
            if self._schema_version() != _SCHEMA_VERSION:
                self._db.execute(_SCHEMA)
                self._db.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def upsert(self, documents: Iterable[Document]) -> int:
        rows = [
            (
                d.id,
                d.title,
                d.text,
                d.uri,
                json.dumps(dict(d.metadata), sort_keys=True, default=str),
                d.fingerprint,
            )
            for d in documents
        ]
        # One transaction per batch: a crash leaves every document old or new, never torn.
        with self._lock, self._db:
            self._db.execute(INVALIDATE)
            self._db.executemany(
                "INSERT INTO documents(id, title, body, uri, metadata, fingerprint) "
                "VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET title=excluded.title, body=excluded.body, "
                "uri=excluded.uri, metadata=excluded.metadata, fingerprint=excluded.fingerprint",
                rows,
            )
            self._written += len(rows)
        return len(rows)

    def fingerprints(self) -> dict[str, str]:
        with self._lock:
            return dict(self._db.execute("SELECT id, fingerprint FROM documents"))

    def delete(self, ids: Iterable[str]) -> int:
        deleted = 0
        with self._lock, self._db:
            self._db.execute(INVALIDATE)
            for doc_id in ids:
                self._db.execute("DELETE FROM documents WHERE id = ?", (doc_id,))
                deleted += self._db.changes()  # the row itself, not the trigger's FTS rows
            self._written += deleted
        return deleted

    def compact(self) -> bool:
        """Merge the full-text index into one segment when enough of its documents were
        written since this object opened or last compacted
        (:func:`~kairox.retrieval.fts5_merge.worth_merging`); whether it did."""
        with self._lock:
            total = self._db.execute("SELECT count(*) FROM documents").fetchone()[0]
            if not worth_merging(self._written, total):
                return False
            merge_segments(self._db, "documents_fts")
            self._written = 0
            return True

    def count(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM documents").fetchone()[0]

    def vectors(self, embedder: EmbeddingBackend, **options: Any) -> DocumentVectors:
        """The vectors of this file for ``embedder`` (same connection, same lock)."""
        return DocumentVectors(self._db, self._lock, self.path, embedder, **options)

    def rows(self, rowids: Sequence[int]) -> dict[int, _Row]:
        """``rowid -> (id, title, body, uri, metadata)`` of the given documents."""
        with self._lock:
            found = self._db.execute(
                "SELECT rowid, id, title, body, uri, metadata FROM documents "
                "WHERE rowid IN (SELECT value FROM json_each(?))",
                (json.dumps(list(rowids)),),
            ).fetchall()
        return {r: (i, t, b, u, _metadata(m)) for r, i, t, b, u, m in found}

    def matching_rowids(self, filters: Mapping[str, Any]) -> list[int]:
        """The rowids of the documents whose metadata passes ``filters``."""
        where, params = _filter_sql(filters)
        with self._lock:
            return [
                row[0]
                for row in self._db.execute(
                    f"SELECT d.rowid FROM documents d WHERE 1{where}", params
                )
            ]

    def unfinished(self) -> bool:
        """Whether :meth:`finish` has work left from an earlier run (vectors waiting to be
        packed: a run cut short, or a knowledge base of the layout before the pack was
        the store, which ``kairox kb ingest`` then upgrades in place)."""
        if self.embedder is None or (self._index is None and not self.path.exists()):
            return False
        self._open()
        return self._vectors is not None and self._vectors.unfinished()

    def documents(self, ids: Sequence[str]) -> list[Document]:
        """The stored documents with these ids, in that order (missing ids left out)."""
        found: dict[str, Document] = {}
        with self._lock:
            for start in range(0, len(ids), 500):
                part = list(ids[start : start + 500])
                marks = ",".join("?" * len(part))
                for doc_id, title, body, uri, metadata in self._db.execute(
                    f"SELECT id, title, body, uri, metadata FROM documents WHERE id IN ({marks})",
                    part,
                ):
                    found[doc_id] = Document(
                        doc_id, body, title=title, uri=uri, metadata=_metadata(metadata)
                    )
        return [found[i] for i in ids if i in found]

    def search(
        self,
        text: str,
        k: int,
        filters: Mapping[str, Any] | FilterExpr | None = None,
        *,
        title_weight: float = 1.0,
        body_weight: float = 1.0,
    ) -> list[tuple[str, str, str, str | None, dict[str, Any], float]]:
        """Best first: ``(id, title, body, uri, metadata, score)`` with score = -bm25."""
        terms = match_terms(text)
        if not terms:
            return []
        where, params = _filter_sql(filters)
        if not where:
            best = self.words.top(terms, k, Weights(title_weight, body_weight))
            if best is not None:
                found = self.rows([rowid for rowid, _ in best])
                return [(*found[rowid], score) for rowid, score in best if rowid in found]
        if where:
            sql = (
                "SELECT d.id, d.title, d.body, d.uri, d.metadata, "
                "bm25(documents_fts, ?, ?) AS rank "
                "FROM documents_fts JOIN documents d ON d.rowid = documents_fts.rowid "
                f"WHERE documents_fts MATCH ?{where} ORDER BY rank, d.rowid LIMIT ?"
            )
        else:
            # Rank inside FTS5 first and join only the top k: joining every match before
            # sorting costs more than the ranking itself on long OR queries.
            sql = (
                "SELECT d.id, d.title, d.body, d.uri, d.metadata, top.rank FROM ("
                "SELECT rowid, bm25(documents_fts, ?, ?) AS rank FROM documents_fts "
                "WHERE documents_fts MATCH ? ORDER BY rank, rowid LIMIT ?"
                ") AS top JOIN documents d ON d.rowid = top.rowid ORDER BY top.rank, d.rowid"
            )

        def ranked(expression: str) -> list[Any]:
            return self._db.execute(
                sql, [title_weight, body_weight, expression, *params, k]
            ).fetchall()

        try:
            with self._lock:
                # Terms that bm25() scores as nothing are left out while the rest still
                # fill the k (kairox.retrieval.fts5_common).
                rows = self._common.ranked(self._db, terms, k, ranked)
        except apsw.SQLError as exc:
            if "fts5" not in str(exc):
                raise
            # Every term is quoted, so this should not happen; if FTS5 still objects,
            # say so plainly rather than leaking the engine's parser error.
            raise QueryError(f"SQLite FTS5 could not run the query {text!r}: {exc}") from exc
        return [(i, t, b, u, _metadata(m), -rank) for i, t, b, u, m, rank in rows]


def _metadata(stored: str) -> dict[str, Any]:
    # Most documents carry none; skipping the parser for them is measurable per query.
    return {} if stored == "{}" else json.loads(stored)


class SqliteFtsSource:
    """A knowledge base served from a :class:`SqliteFtsIndex`."""

    score_kind = ScoreKind.BM25
    filter_support = ALL_OPERATORS

    def __init__(
        self,
        name: str,
        path: Path,
        *,
        title_weight: float = DEFAULT_TITLE_WEIGHT,
        body_weight: float = 1.0,
        embedder: EmbeddingBackend | None = None,
        sentence_weight: float | None = None,
        vector_weight: float = 1.0,
        vector_pack: bool = True,
        vector_format: str = "float16",
        ann_threshold: int | None = ANN_THRESHOLD,
        words_pack: bool = True,
    ) -> None:
        self.name = name
        self.path = path
        self.title_weight = title_weight
        self.body_weight = body_weight
        #: With an embedder the source is hybrid: words and meaning, fused (convex).
        self.embedder = embedder
        self.vector_weight = vector_weight
        if sentence_weight is None:
            sentence_weight = (
                SENTENCE_WEIGHT if embedder is None else default_sentence_weight(embedder)
            )
        self.words_pack = words_pack
        self._vector_options = {
            "sentence_weight": sentence_weight,
            "vector_pack": vector_pack,
            "vector_format": vector_format,
            "ann_threshold": ann_threshold,
        }
        self._vectors: DocumentVectors | None = None
        self._index: SqliteFtsIndex | None = None
        # Concurrent first queries run in several worker threads; they must share one
        # index rather than each open (and leak) a connection of its own.
        self._open_lock = threading.Lock()

    def _open(self, *, create: bool = False) -> SqliteFtsIndex:
        with self._open_lock:
            if self._index is None:
                if not create and not self.path.exists():
                    raise SqliteFtsError(
                        f"knowledge base {self.name!r}: index file {self.path} does not "
                        f"exist. Fill it with `kairox kb ingest {self.name} PATH...`, or "
                        "correct `path`."
                    )
                self._index = SqliteFtsIndex(self.path, create=create)
                if self.embedder is not None:
                    self._vectors = self._index.vectors(self.embedder, **self._vector_options)
            return self._index

    # -- IngestableSource: `kairox kb ingest` creates the file on first write ----------

    def upsert(self, documents: Sequence[Document]) -> None:
        index = self._open(create=True)
        if self._vectors is None:
            index.upsert(documents)
            return
        prepared = self._vectors.prepare(documents)  # embed before writing anything
        index.upsert(documents)
        self._vectors.write(prepared)

    def delete(self, ids: Sequence[str]) -> None:
        self._open(create=True).delete(ids)
        if self._vectors is not None:
            self._vectors.delete(ids)

    def fingerprints(self) -> dict[str, str]:
        if self._index is None and not self.path.exists():
            return {}
        stored = self._open().fingerprints()
        if self._vectors is None:
            return stored
        # A document without this embedder's vector (a run cut short, a new backend)
        # counts as not stored, so the next ingest embeds it.
        embedded = self._vectors.embedded_ids()
        return {doc_id: fp for doc_id, fp in stored.items() if doc_id in embedded}

    def finish(self) -> None:
        """After an ingest run: merge the index's segments after a large run
        (:meth:`SqliteFtsIndex.compact`), pack the word postings and the vectors."""
        if self._index is not None:
            self._index.compact()
            if self.words_pack:
                self._index.words.write(Weights(self.title_weight, self.body_weight))
            else:
                self._index.words.remove()
        if self._vectors is not None:
            self._vectors.finish()

    def unfinished(self) -> bool:
        """Whether :meth:`finish` has work left from an earlier run (vectors waiting to be
        packed: a run cut short, or a knowledge base of the layout before the pack was
        the store, which ``kairox kb ingest`` then upgrades in place)."""
        if self.embedder is None or (self._index is None and not self.path.exists()):
            return False
        self._open()
        return self._vectors is not None and self._vectors.unfinished()

    def documents(self, ids: Sequence[str]) -> list[Document]:
        """Stored documents by id (``kairox bench generate-queries`` reads passages back)."""
        return self._open().documents(ids)

    def _search(self, query: Query) -> list[Hit]:
        rows = self._open().search(
            query.text,
            query.k,
            query.filter,
            title_weight=self.title_weight,
            body_weight=self.body_weight,
        )
        words = [self._hit(doc_id, t, b, u, m, score) for doc_id, t, b, u, m, score in rows]
        if self._vectors is None or self.embedder is None or not query.text.strip():
            return words
        vector = query.embeddings.get(self.embedder.name)
        if vector is None:
            vector = self.embedder.embed([query.text])[0]
        allowed = None
        if query.filters:
            allowed = np.asarray(self._open().matching_rowids(query.filters), dtype=np.int64)
        nearest = self._vectors.search(vector, query.k, allowed)
        found = self._open().rows([rowid for rowid, _ in nearest])
        meaning = [self._hit(*found[r], score) for r, score in nearest if r in found]
        fused = fuse(
            {"words": words, "meaning": meaning},
            method="convex",
            score_kinds={"words": ScoreKind.BM25, "meaning": ScoreKind.COSINE},
            weights={"meaning": self.vector_weight},
            limit=query.k,
        )
        return [
            Hit(f.id, f.text, f.score, self.name, uri=f.uri, metadata=f.metadata) for f in fused
        ]

    def _hit(
        self, doc_id: str, title: str, body: str, uri: str | None, metadata: dict, score: float
    ) -> Hit:
        return Hit(
            id=doc_id,
            text=f"{title}\n{body}" if title else body,
            score=score,
            source=self.name,
            uri=uri,
            metadata={**metadata, "title": title} if title else metadata,
        )

    async def retrieve(self, query: Query) -> list[Hit]:
        return await asyncio.to_thread(self._search, query)

    def retrieve_local(self, query: Query) -> list[Hit]:
        """:meth:`retrieve` in the calling thread: one local file, no network."""
        return self._search(query)


def build_source(kb_id: str, config: SqliteFtsConfig, ctx: BuildContext) -> SqliteFtsSource:
    path = ctx.resolve(config.path)
    embedder = None
    if config.embedding_backend is not None:
        embedder = ctx.embedding_backend(config.embedding_backend)
    return SqliteFtsSource(
        kb_id,
        path,
        title_weight=config.title_weight,
        body_weight=config.body_weight,
        embedder=embedder,
        sentence_weight=config.sentence_weight,
        vector_weight=config.vector_weight,
        vector_pack=config.vector_pack,
        vector_format=config.vector_format,
        ann_threshold=config.ann_threshold or None,
        words_pack=config.words_pack,
    )


kairox_register_knowledge_base_kinds = registers(
    KnowledgeBaseKind(
        name="sqlite-fts",
        config_model=SqliteFtsConfig,
        factory=build_source,
        description=(
            "SQLite FTS5 (porter unicode61) over title and body; bm25. With "
            "embedding_backend, also by meaning (sentence-aware), fused in one source."
        ),
    )
)
