"""Searching the workspace index by vector and by words, and turning its rows into hits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kairox.retrieval import Hit
from kairox.retrieval.filters import FilterExpr, parse_filter
from kairox.retrieval.fts5 import match_terms
from kairox.retrieval.vectors import top_k
from kairox.workspace.filtering import FILES_JOIN, chunk_metadata, filter_sql
from kairox.workspace.index_types import WorkspaceIndexError
from kairox.workspace.line_store import line_metadata

#: BM25 weights of the FTS columns (path, text, context). A code chunk's context (its
#: symbol path and enclosing headers) says what the chunk is; 6 was the best of 1-10 on
#: the code benchmark's train queries (benchmarks/README.md).
FTS_WEIGHTS = (1.0, 1.0, 6.0)


class SearchMixin:
    """Search, mixed into :class:`~kairox.workspace.rag_index.WorkspaceRagIndex`
    (whose state it uses)."""

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
        terms = match_terms(text)
        if not terms:
            return []
        clause, params = self._filter_clause(filters or {})

        def ranked(expression: str) -> list[Any]:
            return self._db.execute(
                "SELECT rag_chunks_fts.rowid, bm25(rag_chunks_fts, ?, ?, ?) AS rank "
                "FROM rag_chunks_fts "
                f"JOIN rag_chunks c ON c.id = rag_chunks_fts.rowid {FILES_JOIN} "
                f"WHERE rag_chunks_fts MATCH ? AND c.workspace = ?{clause} "
                "ORDER BY rank, c.id LIMIT ?",
                [*FTS_WEIGHTS, expression, self.workspace_id, *params, k],
            ).fetchall()

        with self._lock:
            # Terms that bm25() scores as nothing are left out while the rest still
            # fill the k (kairox.retrieval.fts5_common).
            rows = self._common_terms.ranked(self._db, terms, k, ranked)
            return self._hits([(row[0], -row[1]) for row in rows], source)
