"""Embedding the workspace index's chunks and sentences, and counting it into a progress."""

from __future__ import annotations

import itertools
from collections.abc import Container, Mapping, Sequence

from kairox.retrieval.embedding import load_model
from kairox.retrieval.vectors import EMBED_BATCH, embed_unit
from kairox.support.embed_progress import EmbedProgress
from kairox.workspace.index_types import (
    EMBED_TEXT_SQL,
    WorkspaceIndexError,
    _Embedded,
)
from kairox.workspace.vector_store import in_pack

_INSERT_VECTORS = "INSERT OR REPLACE INTO rag_embeddings VALUES (?, ?, ?, ?)"
# The FROM and WHERE of a workspace's chunks, and of their sentences, that have no vector
# from an embedder, waiting or in the store (``temp.rag_packed``, filled by _fill_packed)
# (parameters: embedder, dim, workspace).
_MISSING_CHUNKS = (
    "FROM rag_chunks c LEFT JOIN rag_embeddings e "
    "ON e.text_hash = c.text_hash AND e.embedder = ? AND e.dim = ? "
    "WHERE c.workspace = ? AND e.text_hash IS NULL "
    "AND c.text_hash NOT IN (SELECT text_hash FROM temp.rag_packed)"
)
_MISSING_SENTENCES = (
    "FROM rag_sentences s JOIN rag_chunks c ON c.id = s.chunk_id LEFT JOIN rag_embeddings e "
    "ON e.text_hash = s.text_hash AND e.embedder = ? AND e.dim = ? "
    "WHERE c.workspace = ? AND e.text_hash IS NULL "
    "AND s.text_hash NOT IN (SELECT text_hash FROM temp.rag_packed)"
)


class EmbeddingMixin:
    """Embedding, mixed into :class:`~kairox.workspace.rag_index.WorkspaceRagIndex`
    (whose state it uses)."""

    def _have_vectors(self, hashes: Sequence[str]) -> set[str]:
        """The hashes with a vector from this embedder, waiting or in the store."""
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
        rest = [h for h in hashes if h not in have]
        have.update(itertools.compress(rest, in_pack(self._store_pack(), rest) >= 0))
        return have

    def _embed(
        self, texts_by_hash: Mapping[str, str], sentences: Container[str] | bool = False
    ) -> list[tuple[str, str, int, bytes]]:
        """Vector rows for ``texts_by_hash``; each batch is counted into the progress as
        sentences (``sentences=True``, or the hashes in ``sentences``) or chunks."""
        rows: list[tuple[str, str, int, bytes]] = []
        if not self.vectors:  # words only: nothing is embedded
            return rows
        hashes = sorted(texts_by_hash)
        if hashes:
            self._load_model_as_a_step()
        for start in range(0, len(hashes), EMBED_BATCH):
            part = hashes[start : start + EMBED_BATCH]
            texts = [texts_by_hash[h] for h in part]
            vectors = embed_unit(self.embedder, texts, WorkspaceIndexError)
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

    def _load_model_as_a_step(self) -> None:
        """Load the model (or export it, once) as a step of the progress of its own, not
        inside a first batch that would show 0 chunks at 0.0/s for half a minute."""
        if self._progress is None:
            return
        load_model(self.embedder, self._progress.set_stage)
        if self._progress.stage:
            self._progress.set_stage("")

    def _add_missing_sentences(self) -> int:
        """Split the chunks that have no sentences yet (indexed before sentence vectors,
        or with a sentence weight of 0) and embed them; returns sentences embedded."""
        if self.sentence_weight == 0 or not self.vectors:
            return 0
        embedded = 0
        after = 0
        # A page of chunks at a time (all of them, after a switch from a weight of 0).
        while rows := self._db.execute(
            "SELECT c.id, c.text, c.text_hash FROM rag_chunks c WHERE c.workspace = ? "
            "AND c.id > ? AND NOT EXISTS "
            "(SELECT 1 FROM rag_sentences s WHERE s.chunk_id = c.id) ORDER BY c.id LIMIT ?",
            (self.workspace_id, after, EMBED_BATCH),
        ).fetchall():
            after = rows[-1][0]
            part = [
                (chunk_id, self._sentences(text, text_hash)) for chunk_id, text, text_hash in rows
            ]
            texts = {s.text_hash: s.text for _, sentences in part for s in sentences}
            have = self._have_vectors(sorted(texts))
            missing = {h: t for h, t in texts.items() if h not in have}
            if self._progress is not None:
                self._progress.plan(sentences=len(missing))
            vectors = self._embed(missing, sentences=True)
            with self._db:
                self._unarrange()
                self._db.executemany(_INSERT_VECTORS, vectors)
                for chunk_id, sentences in part:
                    self._insert_sentences(chunk_id, sentences)
            embedded += len(vectors)
        return embedded

    def _embed_missing(self) -> _Embedded:
        """Embed chunks (and, when searched, sentences) with no vector from the current
        embedder: after a model switch, or when a run was cut short. Counted first, then
        read and embedded a page at a time (a switch re-embeds the whole workspace)."""
        if not self.vectors:
            return _Embedded()
        self._fill_packed()
        params = (self.embedder.name, self.embedder.dim, self.workspace_id)
        chunks = self._db.execute(f"SELECT count(DISTINCT c.text_hash) {_MISSING_CHUNKS}", params)
        sentences = [[0]]
        if self.sentence_weight != 0:
            # A sentence whose text is one of the workspace's chunks gets that vector.
            sentences = self._db.execute(
                f"SELECT count(DISTINCT s.text_hash) {_MISSING_SENTENCES} AND s.text_hash "
                "NOT IN (SELECT text_hash FROM rag_chunks WHERE workspace = ?)",
                (*params, self.workspace_id),
            ).fetchall()
        planned = _Embedded(chunks.fetchone()[0], sentences[0][0])
        if self._progress is not None:
            self._progress.plan(chunks=planned.chunks, sentences=planned.sentences)
        embedded = _Embedded()
        pages = [(f"c.text_hash, {EMBED_TEXT_SQL} {_MISSING_CHUNKS}", "c.text_hash", False)]
        if planned.sentences:
            # substr counts characters, as the stored offsets do; it is 1-based.
            text = 'substr(c.text, s.start + 1, s."end" - s.start)'
            pages.append((f"s.text_hash, {text} {_MISSING_SENTENCES}", "s.text_hash", True))
        for select, key, as_sentences in pages:
            after = ""
            while rows := self._db.execute(
                f"SELECT DISTINCT {select} AND {key} > ? ORDER BY {key} LIMIT ?",
                (*params, after, EMBED_BATCH),
            ).fetchall():
                after = rows[-1][0]
                vectors = self._embed(dict(rows), sentences=as_sentences)
                with self._db:
                    self._unarrange(this_embedder_only=True)
                    self._db.executemany(_INSERT_VECTORS, vectors)
                if as_sentences:
                    embedded.sentences += len(vectors)
                else:
                    embedded.chunks += len(vectors)
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
