"""``minilm-cached``: the scale benchmark's embedding backend of precomputed MiniLM vectors.

A text of the source corpus (a passage as embedded, a sentence, a query) gets its cached
vector (:mod:`kairox.bench.scale_vectors`). A text of a perturbed round (one word replaced
by the round's number, the title given the number too: :mod:`kairox.bench.scale_corpus`)
is traced back to its source text: its words without the numbers share their first or
last :data:`_ANCHOR` words with it, and most of their words (the candidate sharing the
most is taken, at least :data:`_OVERLAP` of them). It then gets that text's vector plus
noise seeded by the text's own hash, of a norm that leaves a cosine of about
:data:`COSINE` with the original (what MiniLM gives a text with one word changed): the
same text always gets the same vector, so repeated sentences deduplicate as real ones
do. A text traced to nothing (a sentence that a replaced full stop merged with the next
one, say) gets noise alone, and is counted (:attr:`CachedEmbedder.unmatched`).

Registered only in the ``kb ingest`` child of ``kairox bench scale --embedder
minilm-cached`` (:mod:`kairox.bench.scale_child`), with the cache's path in
:data:`CACHE_ENV`; never a plugin of the installed CLI.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kairox import hookimpl
from kairox.bench.scale_vectors import load_cache
from kairox.plugin_host.registry import EmbeddingBackendSpec

__all__ = ["CACHE_ENV", "COSINE", "MADE", "NAME", "STATS_FILE", "CachedEmbedder"]

NAME = "minilm-cached"
#: Where the child finds the cache of source vectors.
CACHE_ENV = "KAIROX_BENCH_VECTOR_CACHE"
#: The cosine of a perturbed text's vector with its source text's, about.
COSINE = 0.98
#: What the ``kb ingest`` child writes its backends' counts to, in its folder.
STATS_FILE = "cached-embedder.json"
# The backends this process made (the child reports their counts at its end).
MADE: list[CachedEmbedder] = []
_ANCHOR = 3
_OVERLAP = 0.5


def _words(text: str) -> list[str]:
    return [word for word in text.split() if not word.isdigit()]


def _anchors(words: list[str]) -> tuple[int, int]:
    return hash(("head", *words[:_ANCHOR])), hash(("tail", *words[-_ANCHOR:]))


class CachedEmbedder:
    """Precomputed vectors of a source corpus's texts, and of their perturbed copies."""

    def __init__(self, cache: Path) -> None:
        self._texts, self._vectors = load_cache(cache)
        self.dim = int(self._vectors.shape[1])
        self.name = NAME
        self.embedded = 0
        self.unmatched = 0
        self._exact = {text: number for number, text in enumerate(self._texts)}
        self._anchored: dict[int, list[int]] = {}
        for number, text in enumerate(self._texts):
            for anchor in _anchors(_words(text)):
                self._anchored.setdefault(anchor, []).append(number)
        # Noise of this norm per unit vector leaves a cosine of COSINE, about.
        self._noise = float(np.sqrt(1 / COSINE**2 - 1))
        MADE.append(self)

    def source_of(self, text: str) -> int | None:
        """The cached text ``text`` is a perturbed copy of, if any."""
        found = self._exact.get(text)
        if found is not None:
            return found
        words = _words(text)
        distinct = set(words)
        best, best_share = None, _OVERLAP
        for anchor in _anchors(words):
            for number in self._anchored.get(anchor, ()):
                theirs = set(_words(self._texts[number]))
                share = len(distinct & theirs) / max(len(distinct), len(theirs), 1)
                if share > best_share:
                    best, best_share = number, share
        return best

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        self.embedded += len(texts)
        for row, text in enumerate(texts):
            found = self._exact.get(text)
            if found is not None:
                out[row] = self._vectors[found]
                continue
            found = self.source_of(text)
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
            noise = np.random.default_rng(seed).normal(size=self.dim).astype(np.float32)
            noise *= self._noise / np.linalg.norm(noise)
            if found is None:
                self.unmatched += 1
                out[row] = noise
            else:
                out[row] = self._vectors[found] + noise
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.divide(out, norms, out=out, where=norms > 0)


@hookimpl
def kairox_register_embedding_backends(register):
    register(
        EmbeddingBackendSpec(
            name=NAME,
            factory=lambda: CachedEmbedder(Path(os.environ[CACHE_ENV])),
            description="The scale benchmark's precomputed MiniLM vectors (bench only).",
        )
    )
