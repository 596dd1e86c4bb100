"""kairox-bedrock: the ``bedrock`` knowledge-base kind (Amazon Bedrock Knowledge Bases).

``BedrockConfig`` validates a ``[knowledge_bases.<id>]`` table with ``kind = "bedrock"``,
``BedrockSource`` searches the knowledge base with the ``bedrock-agent-runtime``
``Retrieve`` API, and the hook at the bottom registers the kind.
``kairox_bedrock.testing`` holds ``BedrockTestServer``, a loopback server speaking the
Retrieve REST/JSON protocol, for tests without AWS.

Importing this module does not import boto3: Kairox imports every plugin at start-up
to list them, so boto3 loads on the first query (see :func:`load_boto3`).
"""

from __future__ import annotations

from kairox import BuildContext, KnowledgeBaseKind, registers
from kairox_bedrock.config import BedrockConfig
from kairox_bedrock.errors import (
    BedrockAuthError,
    BedrockConnectionError,
    BedrockError,
    BedrockNotFoundError,
    BedrockResponseError,
    BedrockTimeoutError,
    BedrockUnavailableError,
)
from kairox_bedrock.filters import OPERATORS, BedrockFilter, translate_filters
from kairox_bedrock.rerank import BedrockReranker, BedrockRerankSettings, kairox_register_rerankers
from kairox_bedrock.source import (
    INSTALL_HINT,
    LOCATION_FIELDS,
    BedrockSource,
    load_boto3,
    location_uri,
    result_to_hit,
)

__all__ = [
    "INSTALL_HINT",
    "LOCATION_FIELDS",
    "OPERATORS",
    "BedrockAuthError",
    "BedrockConfig",
    "BedrockConnectionError",
    "BedrockError",
    "BedrockFilter",
    "BedrockNotFoundError",
    "BedrockRerankSettings",
    "BedrockReranker",
    "BedrockResponseError",
    "BedrockSource",
    "BedrockTimeoutError",
    "BedrockUnavailableError",
    "build_source",
    "kairox_register_knowledge_base_kinds",
    "kairox_register_rerankers",
    "load_boto3",
    "location_uri",
    "result_to_hit",
    "translate_filters",
]


def build_source(kb_id: str, config: BedrockConfig, ctx: BuildContext) -> BedrockSource:
    """The kind's factory: a :class:`BedrockSource` named ``kb_id`` (no network yet)."""
    return BedrockSource(kb_id, config)


kairox_register_knowledge_base_kinds = registers(
    KnowledgeBaseKind(
        name="bedrock",
        config_model=BedrockConfig,
        factory=build_source,
        description="Amazon Bedrock Knowledge Bases (Retrieve API); cosine-like relevance.",
    )
)
