"""The workspace index as retrievers: by embedding similarity and by words."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kairox.retrieval import Hit, Query, ScoreKind
from kairox.retrieval.filters import ALL_OPERATORS
from kairox.retrieval.vectors import default_fusion_weight
from kairox.workspace.index_types import NOT_INDEXED

#: Why the by-vector retriever does not answer when the index keeps words only.
NO_VECTORS = (
    "the workspace index keeps no vectors ([workspace] vectors = false, the default with the "
    "hashing embedder); set vectors = true and run `kairox index` to search by meaning too"
)

if TYPE_CHECKING:
    from kairox.workspace.rag_index import WorkspaceRagIndex


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
        self.fusion_weight = (
            default_fusion_weight(self.embedder) if fusion_weight is None else float(fusion_weight)
        )

    def switched_off(self) -> bool:
        """The index keeps words only (``[workspace] vectors = false``, the default with
        the hashing embedder): this retriever is left out of every search plan."""
        return not self.index.vectors

    def unavailable_reason(self) -> str | None:
        if not self.index.vectors:
            return NO_VECTORS
        return None if self.index.is_indexed() else NOT_INDEXED

    def retrieve_local(self, query: Query) -> list[Hit]:
        """:meth:`retrieve` in the calling thread: the local index, no network."""
        if not query.text.strip():
            return []
        vector = query.embeddings.get(self.embedder.name)
        if vector is None:
            vector = self.embedder.embed([query.embed_text or query.text])[0]
        return self.index.search_vector(vector, query.k, query.filter, source=self.name)

    async def retrieve(self, query: Query) -> list[Hit]:
        return await asyncio.to_thread(self.retrieve_local, query)


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
        return await asyncio.to_thread(self.retrieve_local, query)

    def retrieve_local(self, query: Query) -> list[Hit]:
        """:meth:`retrieve` in the calling thread: the local index, no network."""
        return self.index.search_words(query.text, query.k, query.filter, source=self.name)
