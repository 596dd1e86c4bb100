"""A LangChain retriever over a Kairox profile: ``KairoxRetriever``.

::

    from kairox.integrations.langchain import KairoxRetriever

    retriever = KairoxRetriever(path=".", profile="default", k=5)
    docs = retriever.invoke("how do failed uploads retry")

Each hit becomes a ``Document`` whose metadata carries the provenance
(:func:`kairox.integrations.hit_metadata`). ``k`` and ``filters`` may also be given per call
(``retriever.invoke(query, k=3)``). Needs ``pip install 'kairox[langchain]'``.
"""

from __future__ import annotations

from typing import Any

from kairox.integrations import hit_metadata
from kairox.lazy_imports import LazyImport

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
from pydantic import ConfigDict, Field, PrivateAttr  # noqa: E402

from kairox.api import Kairox  # noqa: E402
from kairox.api import open as open_workspace  # noqa: E402

__all__ = ["KairoxRetriever"]


class KairoxRetriever(BaseRetriever):
    """Fused hits from the workspace and the profile's knowledge bases, as Documents.

    :param path: the workspace folder (its ``kairox.toml``, else the defaults).
    :param profile: the Kairox profile (name or alias); the default profile when ``None``.
    :param k: how many documents at most.
    :param filters: equality filters on hit metadata (``{"path": "docs/intro.md"}``).
    :param by_file: one document per workspace file (its best chunk) instead of one per
        chunk hit.
    :param handle: an already open :class:`kairox.api.Kairox`, instead of ``path``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    path: str = "."
    profile: str | None = None
    k: int = Field(default=4, ge=1)
    filters: dict[str, Any] | None = None
    by_file: bool = False
    handle: Kairox | None = Field(default=None, exclude=True)
    _kx: Kairox | None = PrivateAttr(default=None)

    def _workspace(self) -> Kairox:
        if self._kx is None:
            self._kx = self.handle or open_workspace(self.path, self.profile)
        return self._kx

    def _options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        unknown = set(kwargs) - {"k", "filters"}
        if unknown:
            raise TypeError(
                f"unexpected arguments {sorted(unknown)}; this retriever takes k, filters"
            )
        return {
            "k": kwargs.get("k", self.k),
            "filters": kwargs.get("filters", self.filters),
            "profile": self.profile,
            "by_file": self.by_file,
        }

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
