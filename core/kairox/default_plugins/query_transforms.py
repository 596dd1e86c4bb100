"""Built-in query transforms: ``multi-query`` (the model rephrases the query; every
rephrasing is searched and the rankings fused) and ``hyde`` (the model writes a
hypothetical answer; dense sources embed it, lexical ones keep the user's words).

Registered through ``kairox_register_query_transforms``; run as a search stage
(:mod:`kairox.retrieval.stages`), so a slow or broken model leaves the user's query as is.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydantic import Field

from kairox.config.schema import PluginSettings
from kairox.plugin_host.registry import QueryTransformSpec, StageContext, registers
from kairox.retrieval.model import Query
from kairox.retrieval.stages import TransformedQuery
from kairox.support.models import ChatMessage, ModelBackend, complete

__all__ = ["HydeTransform", "MultiQuerySettings", "MultiQueryTransform"]

# "1. ", "2) ", "- ", "* ", "• " at the start of a line the model numbered or bulleted.
_LIST_MARK = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s*")


class MultiQuerySettings(PluginSettings):
    """``multi-query``'s keys in ``[profiles.<name>]``."""

    multi_query_count: int = Field(default=3, ge=1, le=7)


class _ModelTransform:
    """A transform that asks the profile's ``model`` (``backend()`` builds its backend on
    first use) with an instruction and the user's query."""

    def __init__(self, backend: Callable[[], ModelBackend], model: str) -> None:
        self._backend = backend
        self.model = model

    async def _ask(self, instruction: str, query: Query, max_tokens: int) -> str:
        messages = [ChatMessage("system", instruction), ChatMessage("user", query.text)]
        return await complete(self._backend(), messages, model=self.model, max_tokens=max_tokens)


class MultiQueryTransform(_ModelTransform):
    """Asks the model for ``count`` rephrasings; searches the user's text and each of them."""

    name = "multi-query"

    def __init__(self, backend: Callable[[], ModelBackend], model: str, count: int = 3) -> None:
        super().__init__(backend, model)
        self.count = count

    async def transform(self, query: Query) -> TransformedQuery:
        instruction = (
            f"Write {self.count} different rephrasings of the user's search query, one "
            "per line, with no numbering and nothing else."
        )
        reply = await self._ask(instruction, query, max_tokens=256)
        lines = [_LIST_MARK.sub("", line).strip() for line in reply.splitlines()]
        rephrasings = [line for line in lines if line and line != query.text][: self.count]
        if not rephrasings:
            raise ValueError(f"the model wrote no rephrasing: {reply[:80]!r}")
        return TransformedQuery((query.text, *rephrasings), note=f"{len(rephrasings)} rephrasings")


class HydeTransform(_ModelTransform):
    """Hypothetical document embeddings: the model's short answer is what dense sources
    embed; every source still searches the user's text."""

    name = "hyde"

    _INSTRUCTION = (
        "Write a short passage (three to five sentences) that answers the user's "
        "question the way a document on the subject would. Write only the passage."
    )

    async def transform(self, query: Query) -> TransformedQuery:
        reply = (await self._ask(self._INSTRUCTION, query, max_tokens=300)).strip()
        if not reply:
            raise ValueError("the model wrote an empty passage")
        return TransformedQuery(
            (query.text,), embed_text=reply, note=f"passage of {len(reply.split())} words"
        )


def _multi_query(ctx: StageContext) -> MultiQueryTransform:
    settings: Any = ctx.settings
    count = settings.multi_query_count if isinstance(settings, MultiQuerySettings) else 3
    return MultiQueryTransform(ctx.model_backend, ctx.profile.model, count)


def _hyde(ctx: StageContext) -> HydeTransform:
    return HydeTransform(ctx.model_backend, ctx.profile.model)


kairox_register_query_transforms = registers(
    QueryTransformSpec(
        name="multi-query",
        factory=_multi_query,
        description="the model rephrases the query; each rephrasing is searched, fused",
        config_model=MultiQuerySettings,
    ),
    QueryTransformSpec(
        name="hyde",
        factory=_hyde,
        description="the model writes a hypothetical answer; dense sources embed it",
    ),
)
