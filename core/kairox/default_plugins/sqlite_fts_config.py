"""The settings of a ``sqlite-fts`` knowledge base (``[knowledge_bases.<id>]``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, StrictStr

from kairox.config.schema import KnowledgeBaseConfig
from kairox.retrieval.ann import ANN_THRESHOLD

__all__ = ["DEFAULT_TITLE_WEIGHT", "SqliteFtsConfig"]

#: bm25 weight of a title match against a body match (tuned on SciFact train).
DEFAULT_TITLE_WEIGHT = 3.0


class SqliteFtsConfig(KnowledgeBaseConfig):
    """``[knowledge_bases.<id>]`` with ``kind = "sqlite-fts"``."""

    path: str = Field(description="The index file; relative paths resolve from the config file.")
    # 3 was chosen on SciFact's train split (benchmarks/README.md); test was never used.
    title_weight: float = Field(default=DEFAULT_TITLE_WEIGHT, ge=0)
    body_weight: float = Field(default=1.0, ge=0)
    # Set: also search by meaning with this registered backend (kairox.default_plugins.
    # sqlite_vectors), fused with the words in this one source as the workspace is.
    embedding_backend: StrictStr | None = None
    # Unset: the embedder's own (kairox.retrieval.vectors.default_sentence_weight; hashing
    # 0, i.e. no sentence vectors, others 0.5); 0 makes and searches no sentence vectors.
    sentence_weight: float | None = Field(default=None, ge=0, le=1)
    # How much meaning counts against words in the fused ranking. Unset: the embedder's own
    # `fusion_weight` (hashing 0.05, others 1), as in [workspace].
    vector_weight: float | None = Field(default=None, ge=0)
    vector_pack: StrictBool = True
    # How the pack stores each vector (kairox.workspace.vector_pack.FORMATS): float16
    # changed no SciFact nDCG@10 by more than 0.001 at half the bytes (docs/vectors.md).
    vector_format: Literal["float32", "float16", "int8"] = "float16"
    # After each ingest, copy the word postings to a memory-mapped pack that unfiltered
    # searches score instead of FTS5 (same ranking; kairox.default_plugins.sqlite_fts_pack).
    words_pack: StrictBool = True
    # From this many passages on (with `pip install 'kairox[ann]'`; without it, a one-time
    # hint), unfiltered searches by meaning estimate every score from an int8 copy of the
    # vectors and score the best candidates exactly (kairox.retrieval.ann); 0: always exact.
    ann_threshold: int = Field(default=ANN_THRESHOLD, ge=0)

    def own_paths(self) -> tuple[str, ...]:
        # The database, its vector pack and its word pack (folders beside it).
        return (self.path, f"{self.path}.vectors", f"{self.path}.words")
