"""kairox-example: a knowledge-base kind ``example-jsonl`` that ranks a JSONL file with BM25.

Copy this package to start your own retriever plugin (see README.md). The parts:
``ExampleJsonlConfig`` validates the ``[knowledge_bases.<id>]`` table, ``JsonlBm25Source``
implements the source protocol, and the hook at the bottom registers both.

The ranking is Okapi BM25 over an inverted index built once per version of the file: a
query touches only the postings of its own terms (never every record), and the top ``k``
come from a heap rather than a full sort. That is the shape to keep when you swap in your
own engine: build once, look up per query, never loop over the whole corpus per query.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import math
import re
import threading
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from kairox import (
    BackendError,
    BuildContext,
    Hit,
    KnowledgeBaseConfig,
    KnowledgeBaseKind,
    Query,
    ScoreKind,
    registers,
)
from kairox.retrieval.filters import ALL_OPERATORS, FilterExpr, matches

#: The ``kind = "..."`` users write in ``[knowledge_bases.<id>]``. Rename it for your plugin.
KIND = "example-jsonl"

_TOKEN = re.compile(r"\w+", re.UNICODE)


def tokenize(text: str) -> list[str]:
    """Lower-cased (case-folded) runs of letters, digits and ``_``: punctuation, quotes and
    operators a user types are separators, never syntax."""
    return _TOKEN.findall(text.casefold())


class ExampleJsonlError(BackendError):
    """The JSONL file is missing or malformed."""


@dataclass(frozen=True)
class _Record:
    id: str
    title: str
    text: str
    uri: str | None
    metadata: dict[str, Any]


@dataclass
class _Index:
    """BM25's statistics for one version of the file, computed once when it is loaded."""

    records: list[_Record]
    #: term -> [(record number, term frequency)], one entry per record holding the term
    postings: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    #: term -> inverse document frequency (Lucene's: never negative)
    idf: dict[str, float] = field(default_factory=dict)
    #: record number -> BM25's length normalisation, k1 * (1 - b + b * length / average)
    norms: list[float] = field(default_factory=list)

    @classmethod
    def build(cls, records: list[_Record], *, k1: float, b: float) -> _Index:
        index = cls(records)
        postings: defaultdict[str, list[tuple[int, int]]] = defaultdict(list)
        lengths: list[int] = []
        for number, record in enumerate(records):
            counts = Counter(tokenize(f"{record.title} {record.text}"))
            lengths.append(sum(counts.values()))
            for term, tf in counts.items():
                postings[term].append((number, tf))
        total = len(records)
        average = (sum(lengths) / total if total else 0.0) or 1.0
        index.postings = dict(postings)
        index.idf = {
            term: math.log(1 + (total - len(hits) + 0.5) / (len(hits) + 0.5))
            for term, hits in postings.items()
        }
        index.norms = [k1 * (1 - b + b * length / average) for length in lengths]
        return index

    def top(
        self, terms: set[str], k: int, k1: float, allowed: Sequence[bool] | None
    ) -> list[tuple[float, int]]:
        """The ``k`` best (score, record number) pairs, best first, ties by file order."""
        scores: defaultdict[int, float] = defaultdict(float)
        for term in terms:
            idf = self.idf.get(term)
            if idf is None:
                continue  # a term no record holds adds nothing
            for number, tf in self.postings[term]:
                if allowed is None or allowed[number]:
                    scores[number] += idf * tf * (k1 + 1) / (tf + self.norms[number])
        best = heapq.nlargest(k, scores.items(), key=lambda item: (item[1], -item[0]))
        return [(score, number) for number, score in best if score > 0]


class ExampleJsonlConfig(KnowledgeBaseConfig):
    """The ``[knowledge_bases.<id>]`` table of kind :data:`KIND`: ``path`` names a JSONL file
    with one object per line (id, title, text, uri, metadata)."""

    path: str = Field(description="The JSONL file; relative paths resolve from the config file.")
    k1: float = Field(default=1.2, gt=0, description="BM25 term-frequency saturation.")
    b: float = Field(default=0.75, ge=0, le=1, description="BM25 length normalisation.")

    def own_paths(self) -> tuple[str, ...]:
        # The JSONL file is this knowledge base's data: never indexed as a workspace file.
        return (self.path,)


class JsonlBm25Source:
    """BM25 (Okapi) over the records of a JSONL file, reloaded when the file changes."""

    score_kind = ScoreKind.BM25
    #: every operator of the filter language (kairox.retrieval.filters)
    filter_support = ALL_OPERATORS

    def __init__(self, name: str, path: Path, *, k1: float = 1.2, b: float = 0.75) -> None:
        self.name = name
        self.path = path
        self.k1 = k1
        self.b = b
        # Queries arrive together, each in a worker thread: one of them (re)loads the
        # file while the others wait for it, instead of each parsing it again.
        self._lock = threading.Lock()
        self._loaded_mtime: int | None = None
        self._index = _Index([])

    def _load(self) -> _Index:
        try:
            mtime = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            raise ExampleJsonlError(
                f"knowledge base {self.name!r}: {self.path} does not exist; "
                "create it or correct `path`"
            ) from None
        if mtime == self._loaded_mtime:
            return self._index
        records: list[_Record] = []
        with self.path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    raw = json.loads(line)
                    records.append(
                        _Record(
                            id=str(raw["id"]),
                            title=str(raw.get("title", "")),
                            text=str(raw["text"]),
                            uri=raw.get("uri"),
                            metadata=dict(raw.get("metadata") or {}),
                        )
                    )
                except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                    raise ExampleJsonlError(
                        f"{self.path}:{number}: expected a JSON object with 'id' and 'text' "
                        f"({type(exc).__name__}: {exc})"
                    ) from exc
        self._index = _Index.build(records, k1=self.k1, b=self.b)
        self._loaded_mtime = mtime
        return self._index

    @staticmethod
    def _allowed(records: list[_Record], expr: FilterExpr | None) -> list[bool] | None:
        """Which records pass the filter, before ranking, so k matches give k hits.

        An in-memory engine evaluates the filter itself with the reference evaluator; an
        engine with its own filter language compiles ``query.filter`` into it instead.
        """
        if expr is None:
            return None
        return [matches(expr, record.metadata) for record in records]

    def _search(self, query: Query) -> list[Hit]:
        with self._lock:
            index = self._load()
        terms = set(tokenize(query.text))
        if not terms or not index.records:
            return []
        allowed = self._allowed(index.records, query.filter)
        return [
            Hit(
                id=index.records[number].id,
                text=index.records[number].text,
                score=score,
                source=self.name,
                uri=index.records[number].uri,
                metadata=index.records[number].metadata,
            )
            for score, number in index.top(terms, query.k, self.k1, allowed)
        ]

    async def retrieve(self, query: Query) -> list[Hit]:
        return await asyncio.to_thread(self._search, query)


def build_source(kb_id: str, config: ExampleJsonlConfig, ctx: BuildContext) -> JsonlBm25Source:
    return JsonlBm25Source(kb_id, ctx.resolve(config.path), k1=config.k1, b=config.b)


kairox_register_knowledge_base_kinds = registers(
    KnowledgeBaseKind(
        name=KIND,
        config_model=ExampleJsonlConfig,
        factory=build_source,
        description="BM25 over a JSONL file (the plugin template's example).",
    )
)
