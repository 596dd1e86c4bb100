"""Embedding the workspace index's chunks and sentences, and counting it into a progress."""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence

from kairox.embed_progress import EmbedProgress
from kairox.embedding import load_model
from kairox.retrieval.vectors import EMBED_BATCH, embed_unit
from kairox.workspace.index_types import (
    EMBED_TEXT_SQL,
    WorkspaceIndexError,
    _Embedded,
    _PendingFile,
    _Sentence,
)

_INSERT_VECTORS = "INSERT OR REPLACE INTO rag_embeddings VALUES (?, ?, ?, ?)"


class EmbeddingMixin:
    """Embedding, mixed into :class:`~kairox.workspace.rag_index.WorkspaceRagIndex`
    (whose state it uses)."""

    def _plan(self, pending: Sequence[_PendingFile], files_per_batch: int) -> None:
        """Tell the progress how many distinct chunks and sentences need a vector.

        Counted batch by batch as :meth:`_write_batch` embeds them: a sentence whose text
        is a chunk of a later batch is embedded (and counted) as a sentence, and that
        chunk then finds its vector made, so the totals match what is done."""
        if self._progress is None or not pending or not self.vectors:
            return
        every = {h for f in pending for c in f.chunks for h in (c.text_hash, *_hashes(c.sentences))}
        made = self._have_vectors(sorted(every))
        chunks = sentences = 0
        for start in range(0, len(pending), files_per_batch):
            batch = pending[start : start + files_per_batch]
            batch_chunks = {c.text_hash for f in batch for c in f.chunks} - made
            made |= batch_chunks
            batch_sentences = {h for f in batch for c in f.chunks for h in _hashes(c.sentences)}
            batch_sentences -= made
            made |= batch_sentences
            chunks += len(batch_chunks)
            sentences += len(batch_sentences)
        self._progress.plan(chunks=chunks, sentences=sentences)

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
        if not self.vectors:  # words only: nothing is embedded
            return rows
        hashes = sorted(texts_by_hash)
        if self._progress is not None and hashes:
            # The model loads (or is exported, once) as a step of its own, not inside a
            # first batch that would show 0 chunks at 0.0/s for half a minute.
            load_model(self.embedder, self._progress.set_stage)
            if self._progress.stage:
                self._progress.set_stage("")
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

    def _add_missing_sentences(self) -> int:
        """Split the chunks that have no sentences yet (indexed before sentence vectors,
        or with a sentence weight of 0) and embed them; returns sentences embedded."""
        if self.sentence_weight == 0 or not self.vectors:
            return 0
        rows = self._db.execute(
            "SELECT c.id, c.text, c.text_hash FROM rag_chunks c WHERE c.workspace = ? "
            "AND NOT EXISTS "
            "(SELECT 1 FROM rag_sentences s WHERE s.chunk_id = c.id) ORDER BY c.id",
            (self.workspace_id,),
        ).fetchall()
        embedded = 0
        for start in range(0, len(rows), EMBED_BATCH):
            part = [
                (chunk_id, self._sentences(text, text_hash))
                for chunk_id, text, text_hash in rows[start : start + EMBED_BATCH]
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

    def _embed_missing(self) -> _Embedded:
        """Embed chunks (and, when searched, sentences) with no vector from the current
        embedder: after a model switch, or when a run was cut short."""
        if not self.vectors:
            return _Embedded()
        params = (self.embedder.name, self.embedder.dim, self.workspace_id)
        chunk_rows = self._db.execute(
            f"SELECT DISTINCT c.text_hash, {EMBED_TEXT_SQL} FROM rag_chunks c "
            "LEFT JOIN rag_embeddings e "
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
        for start in range(0, len(rows), EMBED_BATCH):
            vectors = self._embed(dict(rows[start : start + EMBED_BATCH]), sentence_hashes)
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


def _hashes(sentences: Sequence[_Sentence]) -> list[str]:
    return [s.text_hash for s in sentences]
