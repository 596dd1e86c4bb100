"""Kairox inside the agent frameworks people already use.

* :mod:`kairox.integrations.langchain`: ``KairoxRetriever``, a LangChain ``BaseRetriever``
  (``pip install 'kairox[langchain]'``);
* :mod:`kairox.integrations.llama_index`: ``KairoxLlamaRetriever``, a LlamaIndex
  ``BaseRetriever`` (``pip install 'kairox[llamaindex]'``).

Both search one Kairox profile through :func:`kairox.open` and keep each hit's provenance
(:func:`hit_metadata`) in the framework's metadata. Importing this package imports neither
framework; importing a submodule without its framework raises an ``ImportError`` that
names the extra to install (:class:`kairox.lazy_imports.LazyImport`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kairox.retrieval import FusedHit

__all__ = ["hit_metadata"]


def hit_metadata(hit: FusedHit) -> dict[str, Any]:
    """A hit's metadata for a framework document: the source's own keys plus provenance.

    ``uri``, ``source`` (whose copy survived fusion), ``sources`` (every source that found
    the passage, with its rank and own score) and ``score`` (the fused score) win over a
    source key of the same name.
    """
    return {
        **dict(hit.metadata),
        "id": hit.id,
        "uri": hit.uri,
        "source": hit.source,
        "sources": [{"source": p.source, "rank": p.rank, "score": p.score} for p in hit.sources],
        "score": hit.score,
    }
