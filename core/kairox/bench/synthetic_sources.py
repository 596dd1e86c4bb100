"""A small generated corpus and synthetic sources, for the composite benchmark and its tests.

The sources stand for the kinds of remote service the composite retriever has to live with:
one that waits (in the event loop or on a worker thread), one that hangs ignoring
cancellation, and one that fails at once.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from dataclasses import dataclass, field

from kairox.retrieval import Document, Hit, Query, ScoreKind

__all__ = ["FailingSource", "HangingSource", "SleepSource", "make_corpus", "make_queries"]

# -- a small corpus -----------------------------------------------------------------------

_SYLLABLES = (
    "ka", "ro", "ti", "men", "sal", "dor", "vi", "lun", "pe", "qua", "zen", "bra", "tos",
    "mi", "fel", "gar", "hu", "jo", "nix", "ol", "pra", "ser", "tam", "ul", "vor", "wi",
)  # fmt: skip


def _vocabulary(size: int, rng: random.Random) -> list[str]:
    words: dict[str, None] = {}
    while len(words) < size:
        words["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))] = None
    return list(words)


def make_corpus(documents: int = 1000, *, words: int = 80, seed: int = 7) -> list[Document]:
    """``documents`` generated documents over a Zipf-distributed vocabulary; deterministic."""
    rng = random.Random(seed)
    vocabulary = _vocabulary(4000, rng)
    weights = [1 / rank for rank in range(1, len(vocabulary) + 1)]
    corpus = []
    for number in range(documents):
        body = rng.choices(vocabulary, weights, k=words)
        title = rng.choices(vocabulary, weights, k=4)
        corpus.append(
            Document(
                f"doc-{number}",
                " ".join(body) + ".",
                title=" ".join(title).capitalize(),
                uri=f"bench://doc-{number}",
            )
        )
    return corpus


def make_queries(count: int, *, seed: int = 11) -> list[str]:
    """``count`` three-word queries over the corpus vocabulary (mid-frequency words)."""
    rng = random.Random(seed)
    vocabulary = _vocabulary(4000, random.Random(7))  # the corpus's own words
    middle = vocabulary[20:800]
    return [" ".join(rng.sample(middle, 3)) for _ in range(count)]


# -- synthetic sources ----------------------------------------------------------------------


def _canned_hits(name: str, count: int = 20) -> list[Hit]:
    return [
        Hit(
            f"{name}-{i}",
            f"passage {i} of {name}",
            float(count - i),
            name,
            f"synthetic://{name}/{i}",
        )
        for i in range(count)
    ]


@dataclass
class SleepSource:
    """Answers after ``delay_s``: awaiting ``asyncio.sleep`` or blocking a worker thread."""

    name: str
    delay_s: float
    blocking: bool = False
    score_kind: ScoreKind = ScoreKind.BM25
    hits: list[Hit] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.hits = self.hits or _canned_hits(self.name)

    async def retrieve(self, query: Query) -> list[Hit]:
        if self.blocking:
            await asyncio.to_thread(time.sleep, self.delay_s)
        else:
            await asyncio.sleep(self.delay_s)
        return self.hits[: query.k]


@dataclass
class HangingSource:
    """Blocks a worker thread for ``block_s`` (or until :meth:`release`), ignoring cancellation.

    The worst kind of slow source: a synchronous client stuck in a socket read. Cancelling
    the awaiting task cannot stop the thread.
    """

    name: str
    block_s: float = 5.0
    score_kind: ScoreKind = ScoreKind.BM25
    _released: threading.Event = field(default_factory=threading.Event, repr=False)

    def release(self) -> None:
        """Let every blocked thread go (the benchmark calls this when it is done)."""
        self._released.set()

    async def retrieve(self, query: Query) -> list[Hit]:
        await asyncio.to_thread(self._released.wait, self.block_s)
        return _canned_hits(self.name)[: query.k]


@dataclass
class FailingSource:
    """Fails at once, as a source with a bad key or a 5xx answer does."""

    name: str
    message: str = "simulated failure: HTTP 503 from the service"
    score_kind: ScoreKind = ScoreKind.BM25

    async def retrieve(self, query: Query) -> list[Hit]:
        raise RuntimeError(self.message)
