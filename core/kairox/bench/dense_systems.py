"""The retrieval benchmark's dense systems: a corpus embedded once, cached, searched sentence-aware.

Each document is embedded whole and, unless a system searches whole documents only, each
of its sentences too, split as the workspace index splits its chunks. Vectors are cached
on disk keyed by the corpus hash, the backend and its width, so a second run of the
benchmark does not embed again.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kairox.retrieval.vectors import SentenceVectors, VectorSource
from kairox.support.paths import private_file, private_folder
from kairox.workspace.chunking import split_sentences

EMBED_BATCH = 128


@dataclass
class CorpusVectors:
    """Embeds texts with ``backend`` in batches, through a cache under ``cache_dir``."""

    backend: Any
    cache_dir: Path
    corpus_sha256: str
    report: Callable[[str, int, int], None]

    def embed(
        self, ids: list[str], texts: list[str], part: str = ""
    ) -> tuple[np.ndarray, float, bool]:
        """The vectors of ``texts`` (keyed by ``ids``), the seconds they took, and whether cached."""
        backend = self.backend
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", backend.name)
        suffix = f"-{part}" if part else ""
        cache = self.cache_dir / f"{self.corpus_sha256[:20]}-{safe}-{backend.dim}{suffix}.npz"
        if cache.is_file():
            stored = np.load(cache, allow_pickle=False)
            if list(stored["ids"]) == ids:
                return stored["matrix"], float(stored["seconds"]), True
        started = time.perf_counter()
        parts = []
        for start in range(0, len(texts), EMBED_BATCH):
            parts.append(np.asarray(backend.embed(texts[start : start + EMBED_BATCH]), np.float32))
            self.report(f"embedding {part or 'corpus'}", start + EMBED_BATCH, len(texts))
        matrix = np.vstack(parts) if parts else np.zeros((0, backend.dim), np.float32)
        seconds = time.perf_counter() - started
        # A cache of Kairox's (under $KAIROX_HOME/cache): owner-only, as its state is.
        private_folder(cache.parent)
        partial = private_file(cache.with_suffix(".partial.npz"))
        np.savez(partial, ids=np.asarray(ids), matrix=matrix, seconds=np.float64(seconds))
        partial.replace(cache)  # never leave a half-written cache behind
        return matrix, seconds, False


def dense_source(
    system: str, vectors: CorpusVectors, ids: list[str], texts: list[str], *, sentences: bool
) -> tuple[VectorSource, float, bool]:
    """``system`` as a vector source over ``texts``: (source, embedding seconds, all cached)."""
    matrix, seconds, cached = vectors.embed(ids, texts)
    if not sentences:
        return VectorSource(system, vectors.backend, ids, texts, matrix), seconds, cached
    # The sentences of the very text embedded whole, as the workspace index splits its
    # chunks: a title of its own line is a sentence too.
    owners: list[int] = []
    sentence_keys: list[str] = []
    sentence_texts: list[str] = []
    for row, text in enumerate(texts):
        for sentence in split_sentences(text):
            owners.append(row)
            sentence_keys.append(f"{ids[row]}:{sentence.start}")
            sentence_texts.append(sentence.text)
    sentence_matrix, sentence_seconds, sentences_cached = vectors.embed(
        sentence_keys, sentence_texts, part="sentences"
    )
    source = VectorSource(
        system,
        vectors.backend,
        ids,
        texts,
        matrix,
        sentences=SentenceVectors(sentence_matrix, np.asarray(owners, dtype=np.int64)),
    )
    return source, seconds + sentence_seconds, cached and sentences_cached
