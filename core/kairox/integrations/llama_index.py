"""A LlamaIndex retriever over a Kairox profile: ``KairoxLlamaRetriever``.

::

    from kairox.integrations.llama_index import KairoxLlamaRetriever

    retriever = KairoxLlamaRetriever(path=".", k=5)
    nodes = retriever.retrieve("how do failed uploads retry")

Each hit becomes a ``NodeWithScore`` (a ``TextNode`` with the fused score) whose metadata
carries the provenance (:func:`kairox.integrations.hit_metadata`); the provenance keys are
kept out of the text LlamaIndex embeds or sends to an LLM. Works wherever LlamaIndex takes a
retriever (``RetrieverQueryEngine``...). Needs ``pip install 'kairox[llamaindex]'``.
"""

from __future__ import annotations

from typing import Any

from kairox.integrations import hit_metadata
from kairox.lazy_imports import LazyImport

# The base class is needed to define the retriever, so the import happens here, with the hint.
LlamaIndexCore = LazyImport(
    "llama_index.core.base.base_retriever",
    "llama_index.core.schema",
    needed_by="kairox.integrations.llama_index",
    install="pip install 'kairox[llamaindex]'",
    distributions={"llama_index": "llama-index-core"},
)
LlamaIndexCore.load()

from llama_index.core.base.base_retriever import BaseRetriever  # noqa: E402 - after the check
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402

from kairox.api import Kairox  # noqa: E402
from kairox.api import open as open_workspace  # noqa: E402

__all__ = ["KairoxLlamaRetriever"]

_PROVENANCE_KEYS = ["id", "uri", "source", "sources", "score"]


class KairoxLlamaRetriever(BaseRetriever):
    """Fused hits from the workspace and the profile's knowledge bases, as scored nodes.

    :param path: the workspace folder (its ``kairox.toml``, else the defaults).
    :param profile: the Kairox profile (name or alias); the default profile when ``None``.
    :param k: how many nodes at most.
    :param filters: equality filters on hit metadata (``{"path": "docs/intro.md"}``).
    :param by_file: one node per workspace file (its best chunk) instead of one per chunk hit.
    :param handle: an already open :class:`kairox.api.Kairox`, instead of ``path``.
    """

    def __init__(
        self,
        path: str = ".",
        profile: str | None = None,
        *,
        k: int = 4,
        filters: dict[str, Any] | None = None,
        by_file: bool = False,
        handle: Kairox | None = None,
        **options: Any,
    ) -> None:
        if k < 1:
            raise ValueError(f"k must be at least 1, not {k}")
        super().__init__(**options)
        self.kairox = handle or open_workspace(path, profile)
        self.profile = profile
        self.k = k
        self.filters = filters
        self.by_file = by_file

    def _options(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "filters": self.filters,
            "profile": self.profile,
            "by_file": self.by_file,
        }

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = self.kairox.search(query_bundle.query_str, **self._options())
        return [_node(hit) for hit in result.hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = await self.kairox.asearch(query_bundle.query_str, **self._options())
        return [_node(hit) for hit in result.hits]


def _node(hit: Any) -> NodeWithScore:
    node = TextNode(
        id_=hit.id,
        text=hit.text,
        metadata=hit_metadata(hit),
        excluded_embed_metadata_keys=list(_PROVENANCE_KEYS),
        excluded_llm_metadata_keys=list(_PROVENANCE_KEYS),
    )
    return NodeWithScore(node=node, score=hit.score)
