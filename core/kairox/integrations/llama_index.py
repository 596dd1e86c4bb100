"""A LlamaIndex retriever over a Kairox profile: ``KairoxLlamaRetriever``.

::

    from kairox.integrations.llama_index import KairoxLlamaRetriever

    retriever = KairoxLlamaRetriever(path=".", similarity_top_k=5)
    nodes = retriever.retrieve("how do failed uploads retry")
    fewer = retriever.retrieve("how do failed uploads retry", similarity_top_k=2)

Each hit becomes a ``NodeWithScore`` (a ``TextNode`` with the fused score). The node's
``ref_doc_id`` (its SOURCE relationship) is the document it came from
(:func:`kairox.integrations.document_id`), and its metadata is flat
(:func:`kairox.integrations.flat_metadata`: the provenance ``sources`` as JSON text), so
nodes can be inserted into any vector store; the provenance keys are kept out of the text
LlamaIndex embeds or sends to an LLM. Filters are Kairox's language (JSON or text form) or
LlamaIndex ``MetadataFilters``, translated (:func:`kairox_filter`). Works wherever
LlamaIndex takes a retriever (``RetrieverQueryEngine``...). Needs
``pip install 'kairox[llamaindex]'``.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

from kairox.integrations import document_id, flat_metadata, search_options
from kairox.support.lazy_imports import LazyImport

# The base class is needed to define the retriever, so the import happens here, with the hint.
LlamaIndexCore = LazyImport(
    "llama_index.core.base.base_retriever",
    "llama_index.core.schema",
    "llama_index.core.vector_stores.types",
    needed_by="kairox.integrations.llama_index",
    install="pip install 'kairox[llamaindex]'",
    distributions={"llama_index": "llama-index-core"},
)
LlamaIndexCore.load()

from llama_index.core.base.base_retriever import BaseRetriever  # noqa: E402 - after the check
from llama_index.core.schema import (  # noqa: E402
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    QueryType,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.core.vector_stores.types import (  # noqa: E402
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from kairox.api import Kairox  # noqa: E402
from kairox.api import open as open_workspace  # noqa: E402
from kairox.retrieval.filters import parse_filter  # noqa: E402

__all__ = ["KairoxLlamaRetriever", "kairox_filter"]

_PROVENANCE_KEYS = ["id", "uri", "source", "sources", "score"]
_NAMES = {"k", "similarity_top_k", "filters"}
# The options of the retrieve() call under way (one per thread and task).
_PER_CALL: ContextVar[Mapping[str, Any]] = ContextVar(
    "kairox_llama_per_call", default=MappingProxyType({})
)

#: LlamaIndex's operators with a Kairox operator of the same meaning.
OPERATORS: Mapping[FilterOperator, str] = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
    FilterOperator.IN: "$in",
    FilterOperator.NIN: "$nin",
    FilterOperator.CONTAINS: "$contains",
}
#: Operators on a list field that hold for any / all of the given values.
_LIST_OPERATORS: Mapping[FilterOperator, str] = {
    FilterOperator.ANY: "$or",
    FilterOperator.ALL: "$and",
}


def kairox_filter(filters: MetadataFilters) -> dict[str, Any]:
    """LlamaIndex ``MetadataFilters`` as a filter in Kairox's canonical JSON form.

    Every operator with a Kairox equivalent is translated (``==`` ``!=`` ``>`` ``>=`` ``<``
    ``<=`` ``in`` ``nin`` ``contains``; ``any``/``all`` as ``$contains`` joined by
    ``$or``/``$and``), conditions ``and``/``or``/``not`` (none of the filters holds) and
    nested ``MetadataFilters`` alike. ``text_match``, ``text_match_insensitive`` and
    ``is_empty`` have none: they are refused with a ``ValueError``, never dropped.
    """
    parts = [
        kairox_filter(item) if isinstance(item, MetadataFilters) else _condition(item)
        for item in filters.filters
    ]
    parts = [part for part in parts if part]
    if not parts:
        return {}
    condition = filters.condition or FilterCondition.AND
    if condition == FilterCondition.NOT:
        return {"$not": parts[0] if len(parts) == 1 else {"$or": parts}}
    if len(parts) == 1:
        return parts[0]
    return {"$or" if condition == FilterCondition.OR else "$and": parts}


def _condition(item: MetadataFilter) -> dict[str, Any]:
    if item.operator in OPERATORS:
        return {item.key: {OPERATORS[item.operator]: item.value}}
    if item.operator in _LIST_OPERATORS:
        values = item.value if isinstance(item.value, list) else [item.value]
        return {_LIST_OPERATORS[item.operator]: [{item.key: {"$contains": v}} for v in values]}
    known = ", ".join(op.value for op in [*OPERATORS, *_LIST_OPERATORS])
    raise ValueError(
        f"LlamaIndex filter operator {item.operator.value!r} on {item.key!r} has no Kairox "
        f"equivalent; use one of {known}, or a Kairox filter (docs/filters.md)"
    )


def _checked_filter(filters: Any) -> Any:
    """``filters`` as Kairox takes them: MetadataFilters translated, every form validated."""
    if isinstance(filters, MetadataFilters):
        filters = kairox_filter(filters)
    parse_filter(filters)  # refuse a bad filter now, naming the bad node
    return filters


class KairoxLlamaRetriever(BaseRetriever):
    """Fused hits from the workspace and the profile's knowledge bases, as scored nodes.

    :param path: the workspace folder (its ``kairox.toml``, else the defaults).
    :param profile: the Kairox profile (name or alias); the default profile when ``None``.
    :param similarity_top_k: how many nodes at most (LlamaIndex's name); ``k`` is the same
        option under Kairox's name. Default 4.
    :param filters: a metadata filter: LlamaIndex ``MetadataFilters`` (translated by
        :func:`kairox_filter`) or Kairox's language, a JSON object
        (``{"year": {"$gte": 2020}}``), its JSON text or the text form
        (``"year >= 2020 and not draft"``).
    :param by_file: one node per workspace file (its best chunk) instead of one per chunk hit.
    :param handle: an already open :class:`kairox.api.Kairox`, instead of ``path``.

    ``retrieve(query, similarity_top_k=..., filters=...)`` (and ``aretrieve``) override
    either for one query; so does setting :attr:`similarity_top_k`.
    """

    def __init__(
        self,
        path: str = ".",
        profile: str | None = None,
        *,
        k: int | None = None,
        similarity_top_k: int | None = None,
        filters: MetadataFilters | Mapping[str, Any] | str | None = None,
        by_file: bool = False,
        handle: Kairox | None = None,
        **options: Any,
    ) -> None:
        given = {"k": k, "similarity_top_k": similarity_top_k}
        chosen = search_options(("", {n: v for n, v in given.items() if v is not None}))
        super().__init__(**options)
        self.kairox = handle or open_workspace(path, profile)
        self.profile = profile
        self.similarity_top_k = chosen.get("k", 4)
        self.filters = _checked_filter(filters)
        self.by_file = by_file

    @property
    def similarity_top_k(self) -> int:
        """How many nodes a query returns at most (``k``)."""
        return self.k

    @similarity_top_k.setter
    def similarity_top_k(self, value: int) -> None:
        self.k = _top_k(value)

    def retrieve(self, str_or_query_bundle: QueryType, **per_query: Any) -> list[NodeWithScore]:
        """LlamaIndex's ``retrieve``; ``similarity_top_k`` (or ``k``) and ``filters`` apply
        to this query only."""
        token = _PER_CALL.set(self._per_query(per_query))
        try:
            return super().retrieve(str_or_query_bundle)
        finally:
            _PER_CALL.reset(token)

    async def aretrieve(
        self, str_or_query_bundle: QueryType, **per_query: Any
    ) -> list[NodeWithScore]:
        """:meth:`retrieve` for ``async`` callers."""
        token = _PER_CALL.set(self._per_query(per_query))
        try:
            return await super().aretrieve(str_or_query_bundle)
        finally:
            _PER_CALL.reset(token)

    def _per_query(self, given: dict[str, Any]) -> dict[str, Any]:
        chosen = search_options(("", given), accepted=_NAMES)
        if "k" in chosen:
            chosen["k"] = _top_k(chosen["k"])
        if "filters" in chosen:
            chosen["filters"] = _checked_filter(chosen["filters"])
        return chosen

    def _options(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "filters": self.filters,
            **_PER_CALL.get(),
            "profile": self.profile,
            "by_file": self.by_file,
        }

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = self.kairox.search(query_bundle.query_str, **self._options())
        return [_node(hit) for hit in result.hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = await self.kairox.asearch(query_bundle.query_str, **self._options())
        return [_node(hit) for hit in result.hits]


def _top_k(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"similarity_top_k (k) must be a whole number of at least 1, not {value!r}"
        )
    return value


def _node(hit: Any) -> NodeWithScore:
    node = TextNode(
        id_=hit.id,
        text=hit.text,
        metadata=flat_metadata(hit),
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=document_id(hit))},
        excluded_embed_metadata_keys=list(_PROVENANCE_KEYS),
        excluded_llm_metadata_keys=list(_PROVENANCE_KEYS),
    )
    return NodeWithScore(node=node, score=hit.score)
