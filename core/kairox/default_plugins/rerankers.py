"""Built-in rerankers: ``mmr`` (diverse top-k over embeddings) and ``llm`` (the profile's
model ranks the candidates), registered through ``kairox_register_rerankers``.

Both are search stages (:mod:`kairox.retrieval.stages`): they get the best
``rerank_depth`` fused hits and return them reordered; a failure keeps the fused order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from pydantic import Field

from kairox.config.schema import PluginSettings
from kairox.plugin_host.registry import RerankerSpec, StageContext, registers
from kairox.retrieval.model import FusedHit, Query
from kairox.support.models import ChatMessage, ModelBackend, complete

__all__ = ["LlmRerankSettings", "LlmReranker", "MmrReranker", "MmrSettings"]


class MmrSettings(PluginSettings):
    """``mmr``'s keys in ``[profiles.<name>]``."""

    # 1.0 ranks by relevance alone, 0.0 by novelty alone.
    mmr_lambda: float = Field(default=0.5, ge=0, le=1)


class MmrReranker:
    """Maximal marginal relevance: each next hit is the one most relevant (its fused score
    over the best one's) and least like the hits already chosen (cosine of the embedder's
    vectors), weighed by ``mmr_lambda``. Near-identical chunks stop crowding the top."""

    name = "mmr"

    def __init__(self, embedder: Any, mmr_lambda: float = 0.5) -> None:
        self.embedder = embedder
        self.mmr_lambda = mmr_lambda

    def rerank(self, query: Query, hits: Sequence[FusedHit]) -> list[FusedHit]:
        if len(hits) < 2:
            return list(hits)
        vectors = np.asarray(self.embedder.embed([hit.text for hit in hits]), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        unit = vectors / np.where(norms == 0, 1.0, norms)
        similarity = unit @ unit.T
        scores = np.array([hit.score for hit in hits], dtype=np.float64)
        # Relative to the best score, not min-max: the last candidate is less relevant,
        # not irrelevant (a floor only where fused scores go below zero).
        floor = min(0.0, float(scores.min()))
        top = float(scores.max()) - floor
        relevance = (scores - floor) / top if top > 0 else np.ones_like(scores)
        chosen: list[int] = [int(np.argmax(relevance))]
        left = [i for i in range(len(hits)) if i != chosen[0]]
        closest = similarity[chosen[0]].astype(np.float64).copy()
        while left:
            marginal = [
                self.mmr_lambda * relevance[i] - (1 - self.mmr_lambda) * closest[i] for i in left
            ]
            best = left.pop(int(np.argmax(marginal)))
            chosen.append(best)
            closest = np.maximum(closest, similarity[best])
        return [hits[i] for i in chosen]


class LlmRerankSettings(PluginSettings):
    """``llm``'s keys in ``[profiles.<name>]``."""

    # Each candidate is shown to the model cut to this many characters.
    rerank_passage_chars: int = Field(default=600, ge=50, le=20000)


_RANK_INSTRUCTIONS = (
    "You rank passages by how well they answer a search query. Reply with the numbers of "
    "the passages, most relevant first, separated by commas, and nothing else."
)


class LlmReranker:
    """Listwise reranking by the profile's model: one request shows the query and the
    numbered candidates; the reply's numbers, in order, are the new ranking. A reply that
    names no candidate is an error (the fused order stands); candidates it leaves out
    follow in fused order."""

    name = "llm"

    def __init__(
        self, backend: Callable[[], ModelBackend], model: str, passage_chars: int = 600
    ) -> None:
        self._backend = backend
        self.model = model
        self.passage_chars = passage_chars

    async def rerank(self, query: Query, hits: Sequence[FusedHit]) -> list[FusedHit]:
        listing = "\n\n".join(
            f"[{number}] {' '.join(hit.text.split())[: self.passage_chars]}"
            for number, hit in enumerate(hits, 1)
        )
        messages = [
            ChatMessage("system", _RANK_INSTRUCTIONS),
            ChatMessage("user", f"Query: {query.text}\n\nPassages:\n\n{listing}"),
        ]
        reply = await complete(self._backend(), messages, model=self.model, max_tokens=256)
        order = parse_ranking(reply, len(hits))
        if not order:
            raise ValueError(f"the model's reply names no passage number: {reply[:80]!r}")
        return [hits[number - 1] for number in order]


_NUMBER = re.compile(r"\d+")


def parse_ranking(reply: str, count: int) -> list[int]:
    """The passage numbers (1..count) a reply names, first mention first, each once."""
    seen: dict[int, None] = {}
    for match in _NUMBER.finditer(reply):
        number = int(match.group())
        if 1 <= number <= count:
            seen.setdefault(number, None)
    return list(seen)


def _mmr(ctx: StageContext) -> MmrReranker:
    settings = ctx.settings if isinstance(ctx.settings, MmrSettings) else MmrSettings()
    return MmrReranker(ctx.embedding_backend(ctx.embedding_name), settings.mmr_lambda)


def _llm(ctx: StageContext) -> LlmReranker:
    settings = ctx.settings if isinstance(ctx.settings, LlmRerankSettings) else LlmRerankSettings()
    return LlmReranker(ctx.model_backend, ctx.profile.model, settings.rerank_passage_chars)


kairox_register_rerankers = registers(
    RerankerSpec(
        name="mmr",
        factory=_mmr,
        description="maximal marginal relevance over the workspace embedder: a diverse top-k",
        config_model=MmrSettings,
    ),
    RerankerSpec(
        name="llm",
        factory=_llm,
        description="the profile's model ranks the candidates (listwise, one request)",
        config_model=LlmRerankSettings,
    ),
)
