"""kairox-pinecone: the ``pinecone`` knowledge-base kind (a Pinecone index, REST data plane).

``PineconeConfig`` validates a ``[knowledge_bases.<id>]`` table with ``kind = "pinecone"``,
``PineconeSource`` serves it (``retrieve`` for search; ``upsert_vectors``/``delete_vectors``
for ``kairox kb sync``), and the hook at the bottom registers the kind.
:mod:`kairox_pinecone.testing` is a loopback stand-in for a Pinecone index, for tests.

Importing this module does not import the ``pinecone`` SDK: Kairox imports every plugin
at start-up to list them, so the SDK loads on first use (see :func:`load_pinecone`).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, StrictStr, field_validator

from kairox import BuildContext, EnvVarName, KnowledgeBaseConfig, KnowledgeBaseKind, registers
from kairox_pinecone.errors import (
    INSTALL_HINT,
    MIN_SDK_VERSION,
    PineconeAuthError,
    PineconeConfigurationError,
    PineconeServiceError,
    PineconeSourceError,
    PineconeTimeoutError,
    PineconeUnreachableError,
    load_pinecone,
)
from kairox_pinecone.filters import merge_filters, to_pinecone_filter
from kairox_pinecone.source import (
    DELETE_BATCH,
    ID_METADATA_KEY,
    MAX_TOP_K,
    UPSERT_BATCH,
    WRITE_POLICY,
    PineconeSource,
    remote_id,
)

__all__ = [
    "DELETE_BATCH",
    "FILTER_OPERATORS",
    "ID_METADATA_KEY",
    "INSTALL_HINT",
    "MAX_TOP_K",
    "MIN_SDK_VERSION",
    "UPSERT_BATCH",
    "WRITE_POLICY",
    "PineconeAuthError",
    "PineconeConfig",
    "PineconeConfigurationError",
    "PineconeServiceError",
    "PineconeSource",
    "PineconeSourceError",
    "PineconeTimeoutError",
    "PineconeUnreachableError",
    "build_source",
    "kairox_register_knowledge_base_kinds",
    "load_pinecone",
    "merge_filters",
    "remote_id",
    "to_pinecone_filter",
]

#: Every operator Pinecone's metadata-filter language has.
FILTER_OPERATORS = frozenset(
    {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "$and", "$or"}
)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def _check_operators(node: Any, where: str = "filter") -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if not isinstance(key, str) or not key:
                raise ValueError(f"{where}: {key!r} is not a field name or operator")
            if key.startswith("$") and key not in FILTER_OPERATORS:
                raise ValueError(
                    f"{where}: unknown Pinecone filter operator {key!r}; the operators are "
                    f"{', '.join(sorted(FILTER_OPERATORS))}"
                )
            _check_operators(value, f"{where}.{key}")
    elif isinstance(node, list):
        for position, item in enumerate(node):
            _check_operators(item, f"{where}[{position}]")


class PineconeConfig(KnowledgeBaseConfig):
    """``[knowledge_bases.<id>]`` with ``kind = "pinecone"``."""

    host: StrictStr = Field(
        description="The index host, e.g. https://NAME-PROJECT.svc.REGION.pinecone.io."
    )
    embedding_backend: StrictStr = Field(
        description="The Kairox embedding backend whose vectors fill the index (hashing, minilm)."
    )
    namespace: StrictStr | None = Field(
        default=None, description="The namespace to search; unset is the default namespace."
    )
    api_key_env: EnvVarName = Field(
        default="PINECONE_API_KEY", description="The environment variable holding the API key."
    )
    text_field: StrictStr = Field(
        default="text", description="The metadata field holding each passage's text."
    )
    filter: dict[str, Any] | None = Field(
        default=None, description="A static Pinecone metadata filter applied to every query."
    )

    @field_validator("host")
    @classmethod
    def _host_is_a_url(cls, value: str) -> str:
        host = value.strip().rstrip("/")
        if not host or any(ch.isspace() for ch in host):
            raise ValueError(
                "host must be the index host, e.g. https://NAME-PROJECT.svc.REGION.pinecone.io"
            )
        scheme = _SCHEME.match(host)
        if scheme and scheme.group(0).lower() not in ("http://", "https://"):
            raise ValueError(f"host must use https:// (or http:// for a local index), got {host!r}")
        return host

    @field_validator("embedding_backend", "text_field")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("filter")
    @classmethod
    def _filter_operators(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            _check_operators(value)
        return value or None


#: The table keys :class:`PineconeSource` takes as they are, by the same names.
_SOURCE_KEYS = frozenset(
    {"host", "embedding_backend", "namespace", "api_key_env", "text_field", "filter", "timeout_ms"}
)


def build_source(kb_id: str, config: PineconeConfig, ctx: BuildContext) -> PineconeSource:
    embedder = ctx.embedding_backend(config.embedding_backend)
    return PineconeSource(kb_id, embedder=embedder, **config.model_dump(include=_SOURCE_KEYS))


kairox_register_knowledge_base_kinds = registers(
    KnowledgeBaseKind(
        name="pinecone",
        config_model=PineconeConfig,
        factory=build_source,
        description="A Pinecone index (REST data plane) searched with a query embedding; cosine.",
    )
)
