"""kairox-tantivy: the ``tantivy`` knowledge-base kind (Tantivy BM25 over title and body).

``TantivyConfig`` validates a ``[knowledge_bases.<id>]`` table with ``kind = "tantivy"``,
``TantivySource`` serves it (``retrieve`` for search; ``upsert``/``delete``/``fingerprints``
for ``kairox kb ingest``), and the hook at the bottom registers the kind.

Importing this module does not import ``tantivy``: Kairox imports every plugin at start-up
to list them, so the engine loads on first use (see :func:`kairox_tantivy.index.load_tantivy`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path

from pydantic import Field, model_validator

from kairox import (
    BuildContext,
    Document,
    Hit,
    KnowledgeBaseConfig,
    KnowledgeBaseKind,
    Query,
    ScoreKind,
    registers,
)
from kairox.retrieval import FAN_OUT
from kairox_tantivy.filters import SUPPORT
from kairox_tantivy.index import (
    IndexHit,
    TantivyIndex,
    TantivyIndexError,
    TantivyLockedError,
    filter_term,
    has_index,
    load_tantivy,
    metadata_from_json,
)

__all__ = [
    "IndexHit",
    "TantivyConfig",
    "TantivyIndex",
    "TantivyIndexError",
    "TantivyLockedError",
    "TantivySource",
    "build_source",
    "filter_term",
    "kairox_register_knowledge_base_kinds",
    "load_tantivy",
    "resolve_index_dir",
]


class TantivyConfig(KnowledgeBaseConfig):
    """``[knowledge_bases.<id>]`` with ``kind = "tantivy"``."""

    index_dir: str = Field(
        description="The index directory; relative paths resolve from the config file's folder."
    )
    # 0.5 was chosen on SciFact's train split: Tantivy scores each field on its own, so an
    # equal boost lets short titles dominate (benchmarks/README.md; test was never used).
    title_boost: float = Field(default=0.5, ge=0, description="Multiplier on title matches.")
    body_boost: float = Field(default=1.0, ge=0, description="Multiplier on body matches.")

    def own_paths(self) -> tuple[str, ...]:
        return (self.index_dir,)

    @model_validator(mode="after")
    def _some_field_searched(self) -> TantivyConfig:
        if self.title_boost == 0 and self.body_boost == 0:
            raise ValueError("title_boost and body_boost are both 0, so nothing would be searched")
        return self


class TantivySource:
    """A knowledge base served from a :class:`TantivyIndex` directory.

    Implements :class:`kairox.retrieval.Source` (``retrieve``) and
    :class:`kairox.retrieval.IngestableSource` (``upsert``, ``delete``, ``fingerprints``;
    the first write creates the index).
    """

    score_kind = ScoreKind.BM25
    filter_support = SUPPORT

    def __init__(
        self, name: str, path: Path, *, title_boost: float = 0.5, body_boost: float = 1.0
    ) -> None:
        self.name = name
        self.path = Path(path)
        self.title_boost = title_boost
        self.body_boost = body_boost
        self._index: TantivyIndex | None = None
        self._open_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"TantivySource({self.name!r}, {str(self.path)!r})"

    def _exists(self) -> bool:
        return has_index(self.path)

    def _open(self, *, create: bool = False) -> TantivyIndex:
        with self._open_lock:
            if self._index is None:
                if not create and not self._exists():
                    what = "does not exist" if not self.path.exists() else "holds no tantivy index"
                    raise TantivyIndexError(
                        f"knowledge base {self.name!r}: index_dir {self.path} {what}. "
                        f"Fill it with `kairox kb ingest {self.name} PATH...`, "
                        "or correct `index_dir`."
                    )
                self._index = TantivyIndex(self.path, create=create)
            return self._index

    # -- IngestableSource ----------------------------------------------------------------

    def upsert(self, documents: Sequence[Document]) -> None:
        self._open(create=True).upsert(documents)

    def delete(self, ids: Sequence[str]) -> None:
        if self._index is None and not self._exists():
            return
        self._open().delete(ids)

    def fingerprints(self) -> dict[str, str]:
        if self._index is None and not self._exists():
            return {}
        return self._open().fingerprints()

    def finish(self) -> None:
        """After an ingest run: one segment again if small ones piled up (``compact``)."""
        if self._index is not None or self._exists():
            self._open().compact()

    # -- Source ----------------------------------------------------------------------------

    def _search(self, query: Query) -> list[Hit]:
        SUPPORT.check(self.name, query.filter)
        found = self._open().search_stored(
            query.text,
            query.k,
            query.filter,
            title_boost=self.title_boost,
            body_boost=self.body_boost,
        )
        name = self.name
        return [
            Hit(doc_id, text, score, name, uri, _hit_metadata(metadata, title))
            for score, (doc_id, title, text, uri, metadata) in found
        ]

    async def retrieve(self, query: Query) -> list[Hit]:
        if FAN_OUT.get() <= 1:
            # Asked alone, nothing runs beside it, and a search is a millisecond or two of
            # CPU (the terms are capped): handing it to a worker thread and back costs two
            # thread wake-ups, which on a loaded machine took longer than the search.
            return self._search(query)
        return await asyncio.to_thread(self._search, query)


def _hit_metadata(raw: str, title: str) -> dict:
    """A hit's metadata: the document's (a new dict each time), plus its title if any."""
    if raw == "{}":
        return {"title": title} if title else {}
    metadata = metadata_from_json(raw)
    if title:
        metadata["title"] = title
    return metadata


def resolve_index_dir(config: TantivyConfig, ctx: BuildContext) -> Path:
    """``index_dir`` as an absolute path: ``~`` expanded, relative to ``ctx.base_dir``."""
    return ctx.resolve(config.index_dir)


def build_source(kb_id: str, config: TantivyConfig, ctx: BuildContext) -> TantivySource:
    return TantivySource(
        kb_id,
        resolve_index_dir(config, ctx),
        title_boost=config.title_boost,
        body_boost=config.body_boost,
    )


kairox_register_knowledge_base_kinds = registers(
    KnowledgeBaseKind(
        name="tantivy",
        config_model=TantivyConfig,
        factory=build_source,
        description="Tantivy (en_stem) over title and body; bm25.",
    )
)
