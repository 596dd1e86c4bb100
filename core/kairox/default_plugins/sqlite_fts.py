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
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kairox.default_plugins.sqlite_fts_config import DEFAULT_TITLE_WEIGHT, SqliteFtsConfig
from kairox.default_plugins.sqlite_fts_index import (
    SqliteFtsError,
    SqliteFtsIndex,
)
from kairox.default_plugins.sqlite_vectors import DocumentVectors
from kairox.plugin_host.registry import BuildContext, KnowledgeBaseKind, registers
from kairox.retrieval import Document, Hit, Query, ScoreKind
from kairox.retrieval.ann import ANN_THRESHOLD
from kairox.retrieval.bm25_pack import Weights
from kairox.retrieval.embedding import EmbeddingBackend
from kairox.retrieval.filters import ALL_OPERATORS
from kairox.retrieval.fusion import fuse
from kairox.retrieval.vectors import (
    SENTENCE_WEIGHT,
    default_fusion_weight,
    default_sentence_weight,
)


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
        vector_weight: float | None = None,
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
        # Unset: the embedder's own fusion weight, as the workspace's (hashing's 0.05: at 1
        # its vectors took SciFact's nDCG@10 from 0.694 to 0.596, docs/vectors.md).
        if vector_weight is None:
            vector_weight = default_fusion_weight(embedder)
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
        #: in an ingest run (:meth:`begin_run` to :meth:`finish`)
        self._bulk = False
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

    def begin_run(self) -> None:
        """Before an ingest run's first write: the run ends in :meth:`finish`, so its
        writes leave FTS5's merging to the end (:meth:`SqliteFtsIndex.compact`)."""
        self._bulk = True

    def upsert(self, documents: Sequence[Document]) -> None:
        index = self._open(create=True)
        if self._vectors is None:
            index.upsert(documents, bulk=self._bulk)
            return
        vectors = self._vectors
        prepared = vectors.prepare(documents)  # embed before writing anything
        # The documents and their vectors' rows in one transaction (see write).
        index.upsert(documents, bulk=self._bulk, also=lambda: vectors.write(prepared))

    def delete(self, ids: Sequence[str]) -> None:
        index = self._open(create=True)
        vectors = self._vectors
        index.delete(ids, also=None if vectors is None else lambda: vectors.delete(ids))

    def fingerprints(self) -> dict[str, str]:
        # A document without this embedder's vector (a run cut short, a new backend)
        # counts as not stored, so the next ingest embeds it.
        return self.fingerprints_by_vectors()[0]

    def fingerprints_by_vectors(self) -> tuple[dict[str, str], dict[str, str]]:
        """The stored documents' fingerprints by id, split in two: those with this
        embedder's vectors (all of them without an embedder) and those without (their
        pack lost, a run cut short, a new backend), which the ingest embeds again and
        counts so, not as added. One read of each table, however many documents."""
        if self._index is None and not self.path.exists():
            return {}, {}
        stored = self._open().fingerprints()
        if self._vectors is None:
            return stored, {}
        embedded = self._vectors.embedded_ids()
        with_vectors: dict[str, str] = {}
        without: dict[str, str] = {}
        for doc_id, fingerprint in stored.items():
            (with_vectors if doc_id in embedded else without)[doc_id] = fingerprint
        return with_vectors, without

    def finish(self) -> None:
        """After an ingest run: merge the index's segments after a large run
        (:meth:`SqliteFtsIndex.compact`), pack the word postings and the vectors."""
        self._bulk = False
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
