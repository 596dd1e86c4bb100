"""The loopback server's ``Rerank`` operation (``POST /rerank``), as Bedrock answers it.

The request is checked the way the service checks it (one text query, 1-1000 inline text
sources, a Bedrock reranking model ARN, ``numberOfResults`` in range) and the sources are
scored by the words they share with the query, a stand-in for the model that is
deterministic: ``{"results": [{"index", "relevanceScore"}]}``, best first.
"""

from __future__ import annotations

import math
import re
from typing import Any

from kairox_bedrock.testing.checks import ServiceError, json_object

__all__ = ["RERANK_PATH", "RerankRequestError", "answer_rerank", "rerank_model_arn"]

RERANK_PATH = "/rerank"
_MAX_SOURCES = 1000
_MODEL_ARN = re.compile(
    r"arn:aws(-[^:]+)?:bedrock:[a-z0-9-]+::foundation-model/"
    r"(amazon\.rerank-v1:0|cohere\.rerank-v3-5:0)"
)
_WORD = re.compile(r"\w+")


def rerank_model_arn(region: str, model: str = "amazon.rerank-v1:0") -> str:
    """The ARN of a Bedrock reranking model in ``region``."""
    return f"arn:aws:bedrock:{region}::foundation-model/{model}"


#: The error :func:`answer_rerank` raises for a request the service would refuse.
RerankRequestError = ServiceError


def _invalid(message: str) -> RerankRequestError:
    return RerankRequestError("ValidationException", f"1 validation error detected: {message}")


def _query_text(payload: dict[str, Any]) -> str:
    queries = payload.get("queries")
    if not isinstance(queries, list) or len(queries) != 1:
        raise _invalid("Value at 'queries' failed to satisfy constraint: exactly one query")
    query = queries[0]
    text = (query.get("textQuery") or {}).get("text") if isinstance(query, dict) else None
    if not isinstance(query, dict) or query.get("type") != "TEXT" or not isinstance(text, str):
        raise _invalid("Value at 'queries.1' failed to satisfy constraint: a TEXT query")
    return text


def _source_texts(payload: dict[str, Any]) -> list[str]:
    sources = payload.get("sources")
    if not isinstance(sources, list) or not 1 <= len(sources) <= _MAX_SOURCES:
        raise _invalid(
            f"Value at 'sources' failed to satisfy constraint: between 1 and {_MAX_SOURCES} items"
        )
    texts = []
    for number, source in enumerate(sources, 1):
        inline = source.get("inlineDocumentSource") if isinstance(source, dict) else None
        document = inline.get("textDocument") if isinstance(inline, dict) else None
        text = document.get("text") if isinstance(document, dict) else None
        if (
            source.get("type") != "INLINE"
            or inline.get("type") != "TEXT"
            or not isinstance(text, str)
        ):
            raise _invalid(
                f"Value at 'sources.{number}' failed to satisfy constraint: an INLINE TEXT source"
            )
        texts.append(text)
    return texts


def _count(payload: dict[str, Any], sources: int) -> int:
    config = payload.get("rerankingConfiguration")
    if not isinstance(config, dict) or config.get("type") != "BEDROCK_RERANKING_MODEL":
        raise _invalid("Value at 'rerankingConfiguration.type' failed to satisfy constraint")
    bedrock = config.get("bedrockRerankingConfiguration") or {}
    arn = (bedrock.get("modelConfiguration") or {}).get("modelArn")
    if not isinstance(arn, str) or not _MODEL_ARN.fullmatch(arn):
        raise RerankRequestError(
            "AccessDeniedException", f"The model {arn!r} is not a reranking model you can use"
        )
    count = bedrock.get("numberOfResults", sources)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= _MAX_SOURCES:
        raise _invalid(
            f"Value '{count}' at 'rerankingConfiguration.bedrockRerankingConfiguration."
            "numberOfResults' failed to satisfy constraint"
        )
    return count


def answer_rerank(body: bytes) -> dict[str, Any]:
    """The response to one ``Rerank`` request body; :class:`RerankRequestError` if refused."""
    payload = json_object(body)
    terms = set(_WORD.findall(_query_text(payload).casefold()))
    texts = _source_texts(payload)
    count = _count(payload, len(texts))
    scored = []
    for index, text in enumerate(texts):
        words = set(_WORD.findall(text.casefold()))
        shared = len(terms & words)
        score = shared / math.sqrt(len(terms) * len(words)) if shared else 0.0
        scored.append((score, index))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return {"results": [{"index": i, "relevanceScore": s} for s, i in scored[:count]]}
