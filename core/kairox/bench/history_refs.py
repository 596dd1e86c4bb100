"""The two references the history benchmark runs beside every system.

* ``whole-file-bm25``: ``rank_bm25.BM25Okapi`` over every text file of the tree (the files
  the workspace index walks), whole, with code-aware tokens: identifiers split at
  ``camelCase`` and ``snake_case`` and lower-cased (:func:`code_tokens`).
* ``path-symbol``: query words matched against each file's path components and the names
  its definitions declare (``def``, ``class``, ``func``, ``fn``, ``struct``... found by one
  pattern for every language), each matching word weighted by its rarity among files.

Both rank files, so they are judged exactly as a system's hits reduced to files are.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from kairox.bench import BENCH_EXTRA, BenchError
from kairox.support.lazy_imports import LazyImport
from kairox.workspace.files import iter_workspace_files, read_text

__all__ = [
    "RANK_BM25",
    "REFERENCES",
    "PathSymbolRanker",
    "WholeFileBm25",
    "code_tokens",
    "tree_texts",
]

BM25, PATH_SYMBOL = "whole-file-bm25", "path-symbol"
REFERENCES = (BM25, PATH_SYMBOL)
#: What whole-file BM25 is computed with (``check()`` it before any work).
RANK_BM25 = LazyImport(
    "rank_bm25",
    needed_by="the whole-file BM25 reference",
    install=f"{BENCH_EXTRA} (or pip install rank-bm25)",
    distributions={"rank_bm25": "rank-bm25"},
)

_IDENTIFIER = re.compile(r"[A-Za-z0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_DEFINITION = re.compile(
    r"\b(?:def|class|func|fn|function|struct|interface|trait|enum|type|module|impl|macro_rules!)"
    r"\s+(?:\([^)]*\)\s*)?\*?([A-Za-z_$][\w$]*)"
)


def code_tokens(text: str) -> list[str]:
    """Words of ``text`` with identifiers split: ``parseHTTPHeader_v2`` -> ``parse``,
    ``http``, ``header``, ``v``, ``2``; all lower-cased."""
    return [part.lower() for word in _IDENTIFIER.findall(text) for part in _CAMEL.findall(word)]


def tree_texts(root: Path) -> dict[str, str]:
    """``relpath -> text`` of every text file the workspace walk takes under ``root``."""
    texts: dict[str, str] = {}
    for file in iter_workspace_files(root):
        try:
            text = read_text(file.path)
        except OSError:
            continue
        if text is not None:
            texts[file.relpath] = text
    return texts


class WholeFileBm25:
    """Whole files ranked by BM25 (k1 1.5, b 0.75) over :func:`code_tokens`."""

    def __init__(self, texts: dict[str, str]) -> None:
        try:
            rank_bm25 = RANK_BM25.load()
        except ImportError as exc:
            raise BenchError(str(exc)) from None
        self.paths = list(texts)
        self._bm25 = rank_bm25.BM25Okapi([code_tokens(texts[p]) for p in self.paths] or [[]])

    def __call__(self, query: str, k: int = 100) -> list[str]:
        words = code_tokens(query)
        if not words or not self.paths:
            return []
        scores = self._bm25.get_scores(words)
        order = sorted(range(len(self.paths)), key=lambda i: (-scores[i], self.paths[i]))
        return [self.paths[i] for i in order[:k] if scores[i] > 0]


class PathSymbolRanker:
    """Files ranked by the query words found in their path and their defined names.

    A word counts once for the path and once for the definitions, weighted by its inverse
    document frequency over those path-and-name words.
    """

    def __init__(self, texts: dict[str, str]) -> None:
        self.paths = list(texts)
        self._path_words = {p: set(code_tokens(_path_words(p))) for p in self.paths}
        self._symbol_words = {p: set(_symbols(texts[p])) for p in self.paths}
        frequency: Counter[str] = Counter()
        for path in self.paths:
            frequency.update(self._path_words[path] | self._symbol_words[path])
        total = max(len(self.paths), 1)
        self._idf = {w: math.log(1 + total / n) for w, n in frequency.items()}

    def __call__(self, query: str, k: int = 100) -> list[str]:
        words = set(code_tokens(query)) & set(self._idf)
        scored = []
        for path in self.paths:
            score = sum(self._idf[w] for w in words & self._path_words[path])
            score += sum(self._idf[w] for w in words & self._symbol_words[path])
            if score > 0:
                scored.append((-score, path))
        return [path for _, path in sorted(scored)[:k]]


def _path_words(path: str) -> str:
    pure = PurePosixPath(path)
    return " ".join([*pure.parts[:-1], pure.stem])


def _symbols(text: str) -> Iterable[str]:
    for name in _DEFINITION.findall(text):
        yield from code_tokens(name)
