"""``[knowledge_bases.<id>]`` with ``kind = "weaviate"``: the keys, their checks, and defaults."""

from __future__ import annotations

import math
import re
import warnings
from typing import Literal
from urllib.parse import urlsplit

from pydantic import (
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from kairox import KnowledgeBaseConfig
from kairox.config.fields import matching
from kairox.support.secrets import ENV_NAME_RE, EnvVarName

__all__ = [
    "COLLECTION_NAME",
    "ENV_NAME",
    "PROPERTY_NAME",
    "FilterValue",
    "Mode",
    "WeaviateConfig",
]

Mode = Literal["bm25", "near_vector", "hybrid"]
FilterScalar = StrictStr | StrictBool | StrictInt | StrictFloat
FilterValue = FilterScalar | list[FilterScalar]

#: Weaviate's class-name rule (it upper-cases the first letter itself).
COLLECTION_NAME = re.compile(r"[A-Za-z][_0-9A-Za-z]*")
#: Weaviate's property-name rule.
PROPERTY_NAME = re.compile(r"[_A-Za-z][_0-9A-Za-z]{0,230}")
#: The old home of :data:`kairox.support.secrets.ENV_NAME_RE`.
ENV_NAME = ENV_NAME_RE

CollectionName = matching(
    COLLECTION_NAME,
    "{value!r} is not a Weaviate collection name (a letter, then letters, digits or _)",
)
PropertyName = matching(
    PROPERTY_NAME,
    "{value!r} is not a Weaviate property name (a letter or _, then letters, digits or _)",
)


class WeaviateConfig(KnowledgeBaseConfig):
    """``[knowledge_bases.<id>]`` with ``kind = "weaviate"``."""

    url: StrictStr = Field(
        description="Weaviate's REST endpoint, http(s)://host[:port] (port defaults to 80/443)."
    )
    grpc_port: StrictInt = Field(default=50051, ge=1, le=65535, description="The gRPC port.")
    grpc_host: StrictStr | None = Field(
        default=None, description="The gRPC host; defaults to the host of `url`."
    )
    api_key_env: EnvVarName | None = Field(
        default=None, description="The environment variable holding the Weaviate API key."
    )
    collection: CollectionName = Field(description="The collection (class) to search.")
    mode: Mode = Field(default="hybrid", description="bm25, near_vector or hybrid.")
    alpha: float = Field(
        default=0.5, ge=0, le=1, description="Hybrid only: 1 is pure vector, 0 pure BM25."
    )
    target_vector: PropertyName | None = Field(
        default=None, description="The named vector to search (and write) in the collection."
    )
    tenant: StrictStr | None = Field(
        default=None, description="The tenant of a multi-tenant collection."
    )
    text_property: PropertyName = Field(
        default="text", description="The property holding the passage text."
    )
    id_property: PropertyName | None = Field(
        default="doc_id",
        description="A property holding the document's own id (else hits use the uuid); "
        '"" turns it off.',
    )
    embedding_backend: StrictStr | None = Field(
        default=None,
        description="The embedding backend that made the collection's vectors "
        "(needed for near_vector and hybrid).",
    )
    filters: dict[StrictStr, FilterValue] = Field(
        default_factory=dict,
        description="Metadata filters applied to every query ({key = value} or "
        "{key = [any, of]}), AND-ed with the query's own.",
    )

    @field_validator("url")
    @classmethod
    def _url_is_http(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise ValueError(f"url must look like http(s)://host:port, got {value!r}")
        try:
            parts.port  # noqa: B018  (raises ValueError on a bad port)
        except ValueError:
            raise ValueError(f"url {value!r} has an invalid port") from None
        if parts.path not in {"", "/"} or parts.query or parts.fragment:
            raise ValueError(
                f"url must be Weaviate's base url without a path (e.g. http://localhost:8080), "
                f"got {value!r}"
            )
        return value.rstrip("/")

    @field_validator("id_property", mode="before")
    @classmethod
    def _empty_means_none(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("grpc_host")
    @classmethod
    def _host(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or "/" in value or value != value.strip()):
            raise ValueError(f"grpc_host must be a bare host name, got {value!r}")
        return value

    @field_validator("filters")
    @classmethod
    def _filters(cls, value: dict[str, FilterValue]) -> dict[str, FilterValue]:
        for key, given in value.items():
            if not PROPERTY_NAME.fullmatch(key):
                raise ValueError(f"filter key {key!r} is not a Weaviate property name")
            for item in given if isinstance(given, list) else [given]:
                if isinstance(item, float) and not math.isfinite(item):
                    raise ValueError(f"filter {key!r}: {item} is not a finite number")
                if isinstance(item, int) and not -(2**63) <= item < 2**63:
                    raise ValueError(f"filter {key!r}: {item} is outside 64-bit integers")
        if value:
            warnings.warn(
                f"weaviate `filters = {value!r}` is deprecated and goes in the next release: "
                "write `filter` (singular) in the Kairox filter language instead, e.g. "
                'filter = { lang = "en" } or filter = "lang = en" (docs/filters.md)',
                DeprecationWarning,
                stacklevel=2,
            )
        return value

    @model_validator(mode="after")
    def _mode_settings(self) -> WeaviateConfig:
        if self.mode != "bm25" and not self.embedding_backend:
            raise ValueError(
                f'mode = "{self.mode}" needs embedding_backend: the backend that embedded '
                'the collection\'s vectors, e.g. embedding_backend = "hashing"'
            )
        if "alpha" in self.model_fields_set and self.mode != "hybrid":
            raise ValueError(f'alpha only applies to mode = "hybrid" (mode is "{self.mode}")')
        if self.id_property is not None and self.id_property == self.text_property:
            raise ValueError("id_property and text_property must be different properties")
        return self

    # -- derived -----------------------------------------------------------------------------

    @property
    def http_secure(self) -> bool:
        return urlsplit(self.url).scheme == "https"

    @property
    def http_host(self) -> str:
        return urlsplit(self.url).hostname or ""

    @property
    def http_port(self) -> int:
        parts = urlsplit(self.url)
        return parts.port or (443 if parts.scheme == "https" else 80)

    @property
    def grpc_target_host(self) -> str:
        return self.grpc_host or self.http_host
