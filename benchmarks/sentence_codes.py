"""What cheaper sentence vectors would cost a knowledge base's search: an experiment.

Runs ``kairox bench retrieval ARGS...`` with the sentence vectors of every ``sqlite-fts``
knowledge base re-quantised in memory as they are loaded (passage vectors as stored):
``SENTENCE_CODES=bit1`` (the sign of each component times the row's mean magnitude: 48
bytes and a scale a 384-wide row), ``bit1-unit`` (the sign, unit length), ``bit4`` (15
levels of the row's largest component: 192 bytes and a scale), or ``as-stored``::

    SENTENCE_CODES=bit1 python benchmarks/sentence_codes.py bench retrieval \\
        --dataset ../shared/datasets/scifact --profile default --kb mini --split test --out run.json

Nothing is written to the knowledge base; only the search's copy changes.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from kairox.__main__ import main
from kairox.default_plugins import sqlite_vectors
from kairox.retrieval.vectors import SentenceVectors

_LOADED = sqlite_vectors.search_arrays


def requantised(rows: np.ndarray, codes: str) -> np.ndarray:
    """``rows`` (unit float32) as ``codes`` would give them back."""
    signs = np.where(rows >= 0, 1.0, -1.0).astype(np.float32)
    if codes == "bit1":
        return signs * np.abs(rows).mean(axis=1, keepdims=True)
    if codes == "bit1-unit":
        return signs / np.sqrt(rows.shape[1])
    if codes == "bit4":
        scale = np.abs(rows).max(axis=1, keepdims=True) / 7.0
        scale[scale == 0] = 1.0
        return (np.clip(np.rint(rows / scale), -7, 7) * scale).astype(np.float32)
    if codes == "as-stored":
        return rows
    raise SystemExit(f"SENTENCE_CODES={codes!r}: one of bit1, bit1-unit, bit4, as-stored")


def search_arrays(pack, sentence_weight):  # type: ignore[no-untyped-def]
    ids, matrix, sentences = _LOADED(pack, sentence_weight)
    if sentences is None:
        return ids, matrix, sentences
    rows = requantised(np.asarray(sentences.matrix, np.float32), os.environ["SENTENCE_CODES"])
    return ids, matrix, SentenceVectors(rows, sentences.owners, unit=True, rows=sentences.rows)


if __name__ == "__main__":
    sqlite_vectors.search_arrays = search_arrays
    sys.argv[0] = "kairox"
    sys.exit(main())
