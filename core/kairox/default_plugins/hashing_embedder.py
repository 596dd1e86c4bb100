"""The built-in ``hashing`` embedding backend: deterministic, offline, no model download.

Feature hashing of word unigrams and bigrams into a fixed-width vector, signed so that
collisions cancel out on average, then L2-normalised. It captures lexical overlap only,
which makes it a reproducible default and a fast stand-in for tests, not a semantic model.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Sequence

import numpy as np

from kairox import hookimpl
from kairox.plugin_host.registry import EmbeddingBackendSpec

_WORD = re.compile(r"\w+", re.UNICODE)
#: See HashingEmbedder; benchmarks/README.md ("A default that never hurts").
HASHING_FUSION_WEIGHT = 0.05


class HashingEmbedder:
    """Signed feature hashing of unigrams and bigrams; ``name`` encodes the width.

    ``fusion_weight``: how much the workspace's vector hits count in ``convex`` fusion
    against its FTS hits when this embedder makes them (``[workspace] vector_weight``
    overrides it). Hashing vectors only echo the words FTS already matches, so at 1:1 they
    pull junk to the top; tuned on the train halves of SciFact and of the code benchmark
    (``benchmarks/tune_default.py``, ``kairox bench code``), a small weight keeps FTS's
    ranking and still fills the list with vector hits.
    """

    fusion_weight = HASHING_FUSION_WEIGHT
    #: a query is embedded in microseconds, in-process: no thread hand-off for it
    local = True
    #: No sentence vectors unless ``sentence_weight`` is configured: on SciFact they took
    #: hybrid nDCG@10 from 0.5961 to 0.5941 (vector weight 1) and changed nothing at
    #: weight 0.05, for ten times the vectors (docs/vectors.md).
    sentence_weight = 0.0
    #: The workspace index stores no hashing vectors unless ``[workspace] vectors = true``:
    #: fused at ``fusion_weight`` they changed MRR@10 of the history benchmark by +0.001
    #: (dev) and +0.0005 (held-out), the code benchmark's by -0.001, SciFact's nDCG@10 by
    #: +0.0003, for 10-20x the disk of the words and 6-8x the indexing CPU (docs/vectors.md).
    workspace_vectors = False

    def __init__(self, dim: int = 384) -> None:
        if dim < 8:
            raise ValueError(f"HashingEmbedder dim must be at least 8, got {dim}")
        self.dim = dim
        self.name = f"hashing-{dim}"

    def _features(self, text: str) -> list[str]:
        words = _WORD.findall(text.casefold())
        return words + [f"{a} {b}" for a, b in itertools.pairwise(words)]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        rows: list[int] = []
        cols: list[int] = []
        signs: list[float] = []
        for row, text in enumerate(texts):
            for feature in self._features(text):
                # blake2b, not hash(): Python's str hash is salted per process.
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                rows.append(row)
                cols.append(value % self.dim)
                signs.append(1.0 if (value >> 63) & 1 else -1.0)
        if rows:
            np.add.at(out, (np.asarray(rows), np.asarray(cols)), np.asarray(signs, np.float32))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


@hookimpl
def kairox_register_embedding_backends(register):
    register(
        EmbeddingBackendSpec(
            name="hashing",
            factory=HashingEmbedder,
            description="Deterministic feature hashing (384 dims); offline, lexical only.",
        )
    )
