"""A LangChain retriever over a Kairox profile: ``KairoxRetriever``.

::

    from kairox.integrations.langchain import KairoxRetriever

    retriever = KairoxRetriever(path=".", profile="default", k=5)
    docs = retriever.invoke("how do failed uploads retry")

Each hit becomes a ``Document`` whose metadata carries the provenance
(:func:`kairox.integrations.hit_metadata`). It is configured as LangChain's own retrievers
are: ``k`` and ``filter`` (or ``filters``) directly or in ``search_kwargs={"k": 5,
"filter": ...}``; the filter in Kairox's one language, JSON or text form. Both may also be
given per call (``retriever.invoke(query, k=3, filter="year >= 2020")``); an option it does
not know is refused, never ignored. Needs ``pip install 'kairox[langchain]'``.
"""

from __future__ import annotations

from typing import Any

from kairox.integrations import hit_metadata
from kairox.support.lazy_imports import LazyImport

# The base class is needed to define the retriever, so the import happens here, with the hint.
LangchainCore = LazyImport(
    "langchain_core.retrievers",
    "langchain_core.documents",
    "langchain_core.callbacks",
    needed_by="kairox.integrations.langchain",
    install="pip install 'kairox[langchain]'",
    distributions={"langchain_core": "langchain-core"},
)
LangchainCore.load()

from langchain_core.callbacks import (  # noqa: E402 - after the check that gives the hint
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from pydantic import ConfigDict, Field, PrivateAttr, field_validator, model_validator  # noqa: E402

from kairox.api import Kairox  # noqa: E402
from kairox.api import open as open_workspace  # noqa: E402
from kairox.integrations import search_options  # noqa: E402
from kairox.retrieval.filters import parse_filter  # noqa: E402

__all__ = ["KairoxRetriever"]

_NAMES = {"k", "filter", "filters"}


class KairoxRetriever(BaseRetriever):
    """Fused hits from the workspace and the profile's knowledge bases, as Documents.

    :param path: the workspace folder (its ``kairox.toml``, else the defaults).
    :param profile: the Kairox profile (name or alias); the default profile when ``None``.
    :param k: how many documents at most.
    :param filters: a metadata filter in Kairox's language (docs/filters.md): a JSON object
        (``{"year": {"$gte": 2020}}``), its JSON text, or the text form
        (``"year >= 2020 and not draft"``). ``filter`` is the same option under LangChain's
        name.
    :param search_kwargs: ``{"k": ..., "filter": ...}``, as ``vectorstore.as_retriever``
        takes them; anything else in it is refused.
    :param by_file: one document per workspace file (its best chunk) instead of one per
        chunk hit.
    :param handle: an already open :class:`kairox.api.Kairox`, instead of ``path``.

    A deep copy (``copy.deepcopy``, LangChain's ``with_config``...) copies the configuration
    and shares the open workspace, as it would share a client.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    path: str = "."
    profile: str | None = None
    k: int = Field(default=4, ge=1)
    filters: dict[str, Any] | str | None = None
    by_file: bool = False
    handle: Kairox | None = Field(default=None, exclude=True)
    _kx: Kairox | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _langchain_spellings(cls, given: Any) -> Any:
        """``filter=`` and ``search_kwargs=`` as the ``k`` and ``filters`` fields."""
        if not isinstance(given, dict):
            return given
        fields = dict(given)
        nested = fields.pop("search_kwargs", None) or {}
        if not isinstance(nested, dict):
            raise ValueError(
                "search_kwargs must be a dict such as {'k': 4, 'filter': {'path': 'a.md'}}, "
                f"not {type(nested).__name__}"
            )
        own = {name: fields.pop(name) for name in _NAMES if name in fields}
        return {**fields, **search_options(("", own), ("search_kwargs", nested), accepted=_NAMES)}

    @field_validator("filters")
    @classmethod
    def _valid_filter(cls, value: dict[str, Any] | str | None) -> dict[str, Any] | str | None:
        parse_filter(value)  # a FilterError is a ValueError: pydantic names the field
        return value

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> KairoxRetriever:
        # The open workspace holds database connections, locks and threads: a resource the
        # copy shares, not a value it could copy.
        memo = {} if memo is None else memo
        for resource in (self.handle, self._kx):
            if resource is not None:
                memo[id(resource)] = resource
        return super().__deepcopy__(memo)

    def _workspace(self) -> Kairox:
        if self._kx is None:
            self._kx = self.handle or open_workspace(self.path, self.profile)
        return self._kx

    def _options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        chosen = {
            "k": self.k,
            "filters": self.filters,
            **search_options(("", kwargs), accepted=_NAMES),
        }
        return {**chosen, "profile": self.profile, "by_file": self.by_file}

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        result = self._workspace().search(query, **self._options(kwargs))
        return [_document(hit) for hit in result.hits]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        result = await self._workspace().asearch(query, **self._options(kwargs))
        return [_document(hit) for hit in result.hits]


def _document(hit: Any) -> Document:
    return Document(page_content=hit.text, id=hit.id, metadata=hit_metadata(hit))
