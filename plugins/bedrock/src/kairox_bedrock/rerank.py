"""The ``bedrock`` reranker: Amazon Bedrock's ``Rerank`` API (``bedrock-agent-runtime``)
scores the fused candidates with a reranking model (Amazon Rerank, Cohere Rerank).

Configured in a profile next to ``rerank = "bedrock"``::

    bedrock_rerank_model_arn = "arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0"

The region is the ARN's unless ``bedrock_rerank_region`` says otherwise; credentials come
from the standard AWS chain (``bedrock_rerank_aws_profile`` picks a profile). boto3 is
imported on the first rerank.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any

from pydantic import Field, StrictStr, field_validator

from kairox import FusedHit, PluginSettings, Query, RerankerSpec, StageContext, registers
from kairox_bedrock.errors import BedrockError
from kairox_bedrock.source import load_boto3

__all__ = ["BedrockRerankSettings", "BedrockReranker"]

_MODEL_ARN = re.compile(r"arn:aws(-[^:]+)?:bedrock:(?P<region>[a-z0-9-]+)::foundation-model/.+")


class BedrockRerankSettings(PluginSettings):
    """The ``bedrock`` reranker's keys in ``[profiles.<name>]``."""

    bedrock_rerank_model_arn: StrictStr = Field(
        default="", description="The reranking model's ARN (foundation-model/...rerank...)."
    )
    bedrock_rerank_region: StrictStr | None = None
    bedrock_rerank_aws_profile: StrictStr | None = None
    bedrock_rerank_endpoint_url: StrictStr | None = None
    # Each passage is cut to this many characters (the service limits a source's size).
    bedrock_rerank_max_chars: int = Field(default=4000, ge=50, le=32_000)

    @field_validator("bedrock_rerank_model_arn")
    @classmethod
    def _arn_shape(cls, value: str) -> str:
        if value and not _MODEL_ARN.fullmatch(value):
            raise ValueError(
                f"{value!r} is not a Bedrock model ARN: use e.g. "
                '"arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0"'
            )
        return value


class BedrockReranker:
    """Reorders candidates by Bedrock's relevance scores, best first (one request)."""

    name = "bedrock"

    def __init__(self, settings: BedrockRerankSettings) -> None:
        if not settings.bedrock_rerank_model_arn:
            raise BedrockError(
                "the bedrock reranker needs a model: set bedrock_rerank_model_arn in the "
                'profile, e.g. "arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0"'
            )
        self.settings = settings
        match = _MODEL_ARN.fullmatch(settings.bedrock_rerank_model_arn)
        self.region = settings.bedrock_rerank_region or (match["region"] if match else None)
        self._client: Any = None
        self._lock = threading.Lock()

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                boto3 = load_boto3()
                from botocore.config import Config

                session = boto3.Session(
                    profile_name=self.settings.bedrock_rerank_aws_profile,
                    region_name=self.region,
                )
                self._client = session.client(
                    "bedrock-agent-runtime",
                    region_name=self.region,
                    endpoint_url=self.settings.bedrock_rerank_endpoint_url,
                    config=Config(
                        retries={"mode": "standard", "total_max_attempts": 2},
                        user_agent_extra="kairox-bedrock",
                    ),
                )
            return self._client

    def rerank(self, query: Query, hits: Sequence[FusedHit]) -> list[FusedHit]:
        from botocore.exceptions import BotoCoreError, ClientError

        limit = self.settings.bedrock_rerank_max_chars
        request = {
            "queries": [{"type": "TEXT", "textQuery": {"text": query.text}}],
            "sources": [
                {
                    "type": "INLINE",
                    "inlineDocumentSource": {
                        "type": "TEXT",
                        "textDocument": {"text": hit.text[:limit]},
                    },
                }
                for hit in hits
            ],
            "rerankingConfiguration": {
                "type": "BEDROCK_RERANKING_MODEL",
                "bedrockRerankingConfiguration": {
                    "numberOfResults": len(hits),
                    "modelConfiguration": {"modelArn": self.settings.bedrock_rerank_model_arn},
                },
            },
        }
        try:
            response = self._get_client().rerank(**request)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise BedrockError(
                f"Bedrock Rerank refused the request: {error.get('Code')}: {error.get('Message')}",
                code=error.get("Code"),
            ) from exc
        except BotoCoreError as exc:
            raise BedrockError(f"Bedrock Rerank failed: {exc}") from exc
        order: list[int] = []
        for result in response.get("results", []):
            index = result.get("index")
            if isinstance(index, int) and 0 <= index < len(hits) and index not in order:
                order.append(index)
        return [hits[i] for i in order]


def _build(ctx: StageContext) -> BedrockReranker:
    settings = ctx.settings if isinstance(ctx.settings, BedrockRerankSettings) else None
    return BedrockReranker(settings or BedrockRerankSettings())


kairox_register_rerankers = registers(
    RerankerSpec(
        name="bedrock",
        factory=_build,
        description="Amazon Bedrock's Rerank API (Amazon Rerank, Cohere Rerank models)",
        config_model=BedrockRerankSettings,
    )
)
