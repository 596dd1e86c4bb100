"""Kairox inside the agent frameworks people already use.

* :mod:`kairox.integrations.langchain`: ``KairoxRetriever``, a LangChain ``BaseRetriever``
  (``pip install 'kairox[langchain]'``);
* :mod:`kairox.integrations.llama_index`: ``KairoxLlamaRetriever``, a LlamaIndex
  ``BaseRetriever`` (``pip install 'kairox[llamaindex]'``).

Both search one Kairox profile through :func:`kairox.open` and keep each hit's provenance
(:func:`hit_metadata`) in the framework's metadata. Importing this package imports neither
framework; importing a submodule without its framework raises an ``ImportError`` that
names the extra to install (:class:`kairox.support.lazy_imports.LazyImport`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kairox.retrieval import FusedHit

__all__ = ["document_id", "flat_metadata", "hit_metadata", "search_options"]

#: Each framework's names for Kairox's search options, as Kairox names them.
OPTION_NAMES: Mapping[str, str] = {
    "k": "k",
    "similarity_top_k": "k",  # LlamaIndex
    "filters": "filters",
    "filter": "filters",  # LangChain's search_kwargs, vector stores
}


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


def flat_metadata(hit: FusedHit) -> dict[str, str | int | float | bool]:
    """:func:`hit_metadata` with scalar values only, for vector stores that need flat
    metadata (LlamaIndex's ``flat_metadata``, Chroma...): a list or an object (``sources``,
    a knowledge base's tags) becomes its JSON text, which keeps every detail; a missing
    value (``None``) is left out."""
    flat: dict[str, str | int | float | bool] = {}
    for key, value in hit_metadata(hit).items():
        if value is None:
            continue
        if isinstance(value, str | int | float | bool):
            flat[key] = value
        else:
            flat[key] = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return flat


def document_id(hit: FusedHit) -> str:
    """The document a hit (perhaps one chunk of it) belongs to: its ``document_id``
    metadata (knowledge-base chunks), else its file's ``path`` (workspace chunks), else its
    uri, else its own id."""
    metadata = hit.metadata
    return str(metadata.get("document_id") or metadata.get("path") or hit.uri or hit.id)


def search_options(
    *given: tuple[str, Mapping[str, Any]], accepted: set[str] | None = None
) -> dict[str, Any]:
    """The ``k`` and ``filters`` a framework caller gave, under any of their names.

    ``given`` is ``(where, options)`` pairs: where each set came from (``""`` for keyword
    arguments, ``"search_kwargs"``...) and the options. ``accepted`` limits the names
    (default: every name in :data:`OPTION_NAMES`).

    :raises TypeError: for a name this retriever does not take (never ignored).
    :raises ValueError: for one option given twice with different values.
    """
    names = set(OPTION_NAMES) if accepted is None else accepted
    chosen: dict[str, Any] = {}
    said: dict[str, str] = {}
    for where, options in given:
        for name, value in options.items():
            shown = f"{where}[{name!r}]" if where else name
            if name not in names:
                takes = ", ".join(sorted(names))
                raise TypeError(f"unexpected option {shown}; this retriever takes {takes}")
            option = OPTION_NAMES[name]
            if option in chosen and chosen[option] != value:
                raise ValueError(
                    f"{said[option]} and {shown} disagree ({chosen[option]!r}, {value!r}); "
                    "give it once"
                )
            chosen[option], said[option] = value, shown
    return chosen
