"""kairox-example: a knowledge-base kind ``example-jsonl`` that ranks a JSONL file with BM25.

Copy this package to start your own retriever plugin (see README.md). The parts:
``ExampleJsonlConfig`` validates the ``[knowledge_bases.<id>]`` table, ``JsonlBm25Source``
implements the ``WorkspaceRetriever`` protocol, and the hook at the bottom registers both.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import threading
from collections import Counter
from dataclasses import dataclass
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
    hookimpl,
)

_TOKEN = re.compile(r"\w+", re.UNICODE)


def tokenize(text: str) -> list[str]:
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


class ExampleJsonlConfig(KnowledgeBaseConfig):
    """``kind = "example-jsonl"``: one JSON object per line with id, title, text, metadata."""

    path: str = Field(description="The JSONL file; relative paths resolve from the config file.")
    k1: float = Field(default=1.2, gt=0)
    b: float = Field(default=0.75, ge=0, le=1)


class JsonlBm25Source:
    """BM25 (Okapi) over the records of a JSONL file, reloaded when the file changes."""

    score_kind = ScoreKind.BM25

    def __init__(self, name: str, path: Path, *, k1: float = 1.2, b: float = 0.75) -> None:
        self.name = name
        self.path = path
        self.k1 = k1
        self.b = b
        self._lock = threading.Lock()
        self._loaded_mtime: int | None = None
        self._records: list[_Record] = []
        self._term_counts: list[Counter[str]] = []
        self._lengths: list[int] = []
        self._document_frequency: Counter[str] = Counter()

    def _load(self) -> None:
        try:
            mtime = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            raise ExampleJsonlError(
                f"knowledge base {self.name!r}: {self.path} does not exist; "
                "create it or correct `path`"
            ) from None
        if mtime == self._loaded_mtime:
            return
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
        counts = [Counter(tokenize(f"{r.title} {r.text}")) for r in records]
        self._records = records
        self._term_counts = counts
        self._lengths = [sum(c.values()) for c in counts]
        self._document_frequency = Counter(term for c in counts for term in c)
        self._loaded_mtime = mtime

    def _matches(self, record: _Record, filters: dict[str, Any]) -> bool:
        for key, wanted in filters.items():
            allowed = wanted if isinstance(wanted, list | tuple | set) else [wanted]
            if record.metadata.get(key) not in allowed:
                return False
        return True

    def _search(self, query: Query) -> list[Hit]:
        with self._lock:
            self._load()
            terms = set(tokenize(query.text))
            if not terms or not self._records:
                return []
            total = len(self._records)
            average = sum(self._lengths) / total or 1.0
            scored: list[tuple[float, int]] = []
            for index, counts in enumerate(self._term_counts):
                if not self._matches(self._records[index], dict(query.filters)):
                    continue
                score = 0.0
                norm = self.k1 * (1 - self.b + self.b * self._lengths[index] / average)
                for term in terms & counts.keys():
                    df = self._document_frequency[term]
                    idf = math.log(1 + (total - df + 0.5) / (df + 0.5))
                    tf = counts[term]
                    score += idf * tf * (self.k1 + 1) / (tf + norm)
                if score > 0:
                    scored.append((score, index))
            scored.sort(key=lambda pair: (-pair[0], pair[1]))
            return [
                Hit(
                    id=self._records[i].id,
                    text=self._records[i].text,
                    score=score,
                    source=self.name,
                    uri=self._records[i].uri,
                    metadata=self._records[i].metadata,
                )
                for score, i in scored[: query.k]
            ]

    async def retrieve(self, query: Query) -> list[Hit]:
        return await asyncio.to_thread(self._search, query)


def build_source(kb_id: str, config: ExampleJsonlConfig, ctx: BuildContext) -> JsonlBm25Source:
    path = Path(config.path).expanduser()
    if not path.is_absolute():
        path = ctx.base_dir / path
    return JsonlBm25Source(kb_id, path, k1=config.k1, b=config.b)


@hookimpl
def kairox_register_knowledge_base_kinds(register):
    register(
        KnowledgeBaseKind(
            name="example-jsonl",
            config_model=ExampleJsonlConfig,
            factory=build_source,
            description="BM25 over a JSONL file (the plugin template's example).",
        )
    )
