"""The peer BM25 libraries ``kairox bench retrieval`` runs next to Kairox's systems
(``rank_bm25``, ``bm25s``), behind the source interface, over one shared analysis."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from kairox.retrieval import Hit, Query, ScoreKind

#: Peer libraries: system name -> modules it needs (the first is the library itself).
PEERS: dict[str, tuple[str, ...]] = {"rank_bm25": ("rank_bm25",), "bm25s": ("bm25s",)}


# Lucene's English stop words (also bm25s's "en" list).
LUCENE_ENGLISH_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)


_PEER_TOKEN = re.compile(r"(?u)\b\w\w+\b")


def peer_analyzer() -> tuple[Callable[[str], list[str]], bool]:
    """The peers' shared analysis and whether it stems (PyStemmer installed)."""
    try:
        import Stemmer
    except ImportError:
        stemmer = None
    else:
        stemmer = Stemmer.Stemmer("english")

    def analyse(text: str) -> list[str]:
        words = [w for w in _PEER_TOKEN.findall(text.lower()) if w not in LUCENE_ENGLISH_STOPWORDS]
        return stemmer.stemWords(words) if stemmer is not None else words

    return analyse, stemmer is not None


class _PeerSource:
    """A peer library's index behind Kairox's ``Source`` interface."""

    score_kind = ScoreKind.BM25

    def __init__(self, name: str, ids: Sequence[str], texts: Sequence[str]) -> None:
        self.name = name
        self.ids = list(ids)
        self.texts = list(texts)
        self.analyse, self.stemmed = peer_analyzer()

    def _hits(self, rows: Sequence[int], scores: Sequence[float]) -> list[Hit]:
        return [
            Hit(self.ids[r], self.texts[r], float(s), self.name)
            for r, s in zip(rows, scores, strict=True)
            if s > 0  # no term matched: not a hit (FTS5 and Tantivy return only matches)
        ]

    def search(self, query: Query) -> list[Hit]:
        raise NotImplementedError

    async def retrieve(self, query: Query) -> list[Hit]:
        return self.search(query)  # called directly: no thread hop, unlike Kairox's sources


class RankBm25Source(_PeerSource):
    """``rank_bm25.BM25Okapi`` (k1 1.5, b 0.75), as LangChain's ``BM25Retriever`` uses it."""

    def __init__(self, name: str, ids: Sequence[str], texts: Sequence[str]) -> None:
        super().__init__(name, ids, texts)
        from rank_bm25 import BM25Okapi

        self.bm25 = BM25Okapi([self.analyse(text) for text in self.texts])

    def search(self, query: Query) -> list[Hit]:
        tokens = self.analyse(query.text)
        if not tokens or not self.ids:
            return []
        scores = np.asarray(self.bm25.get_scores(tokens))
        count = min(query.k, len(scores))
        best = np.argpartition(-scores, count - 1)[:count]
        best = best[np.lexsort((best, -scores[best]))]
        return self._hits(best.tolist(), scores[best].tolist())


class Bm25sSource(_PeerSource):
    """``bm25s.BM25`` (method ``lucene``, k1 1.5, b 0.75) over the same analysis."""

    def __init__(self, name: str, ids: Sequence[str], texts: Sequence[str]) -> None:
        super().__init__(name, ids, texts)
        import bm25s

        self.bm25 = bm25s.BM25()
        self.bm25.index([self.analyse(text) for text in self.texts], show_progress=False)
        self.vocabulary = self.bm25.vocab_dict

    def search(self, query: Query) -> list[Hit]:
        tokens = [t for t in self.analyse(query.text) if t in self.vocabulary]
        if not tokens or not self.ids:
            return []
        count = min(query.k, len(self.ids))
        rows, scores = self.bm25.retrieve([tokens], k=count, show_progress=False)
        return self._hits(rows[0].tolist(), scores[0].tolist())


PEER_CLASSES: dict[str, type[_PeerSource]] = {"rank_bm25": RankBm25Source, "bm25s": Bm25sSource}
