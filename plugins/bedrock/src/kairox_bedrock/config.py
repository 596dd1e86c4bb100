"""``BedrockConfig``: a ``[knowledge_bases.<id>]`` table with ``kind = "bedrock"``."""

from __future__ import annotations

import re
import warnings
from typing import Any, Literal

from pydantic import Field, StrictInt, StrictStr, field_validator, model_validator

from kairox import KnowledgeBaseConfig, QueryError
from kairox.config.fields import matching
from kairox.retrieval.filters import FilterError, parse_filter
from kairox_bedrock.filters import translate_filters, upgrade_old_filter

__all__ = ["BedrockConfig"]

# The service model's KnowledgeBaseIdentifier pattern: a 10-character id, or its ARN.
_KB_ID = re.compile(r"[0-9a-zA-Z]{10}")
_KB_ARN = re.compile(
    r"arn:aws(-[^:]+)?:bedrock:(?P<region>[a-z0-9-]{1,20}):[0-9]{12}:knowledge-base/[0-9a-zA-Z]{10}"
)
_REGION = re.compile(r"[a-z]{2}(-[a-z0-9]+)+-[0-9]+")
AwsRegion = matching(
    _REGION,
    '{value!r} is not an AWS region name: use e.g. region = "us-east-1" '
    "(the region the knowledge base was created in)",
)


class BedrockConfig(KnowledgeBaseConfig):
    """``[knowledge_bases.<id>]`` with ``kind = "bedrock"``.

    Credentials come from the standard AWS chain (environment variables, ``aws_profile``
    or the default profile, SSO, an instance or task role), never from this table.
    """

    knowledge_base_id: StrictStr = Field(
        description="The knowledge base's 10-character id (or its ARN)."
    )
    region: AwsRegion = Field(description="The AWS region the knowledge base lives in.")
    aws_profile: StrictStr | None = Field(
        default=None, description="A profile of ~/.aws/config to take credentials from."
    )
    endpoint_url: StrictStr | None = Field(
        default=None, description="Another endpoint (a VPC endpoint, a test server)."
    )
    number_of_results: StrictInt = Field(
        default=10, ge=1, le=100, description="numberOfResults asked per request."
    )
    search_type: Literal["HYBRID", "SEMANTIC"] | None = Field(
        default=None, description="overrideSearchType; absent lets Bedrock choose."
    )
    filter: dict[str, Any] | None = Field(
        default=None, description="A static metadata filter (Kairox form) on every query."
    )

    @field_validator("knowledge_base_id")
    @classmethod
    def _kb_id_shape(cls, value: str) -> str:
        if not (_KB_ID.fullmatch(value) or _KB_ARN.fullmatch(value)):
            raise ValueError(
                f"{value!r} is not a knowledge base id: use the 10-character id shown in the "
                'Bedrock console (letters and digits, e.g. knowledge_base_id = "ABCDE12345") '
                "or the knowledge base's ARN"
            )
        return value

    @field_validator("aws_profile")
    @classmethod
    def _profile_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError(
                "aws_profile is empty: name a profile of ~/.aws/config, or leave the key out"
            )
        return value

    @field_validator("endpoint_url")
    @classmethod
    def _endpoint_is_http(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"https?://[^/\s]+", value):
            raise ValueError(
                f"{value!r} is not an http(s) URL: use e.g. "
                'endpoint_url = "https://vpce-123.bedrock-agent-runtime.us-east-1.vpce.amazonaws.com"'
                ", or leave the key out to use the region's public endpoint"
            )
        return value

    @field_validator("filter", mode="before")
    @classmethod
    def _filter_translates(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value  # None, or a type error the field itself reports
        try:
            parse_filter(value)
            return value
        except FilterError:
            pass
        # The operator names of older releases (gte, not_in): one more release, with a
        # warning, then only the Kairox language.
        try:
            translate_filters(value)
            upgraded = upgrade_old_filter(value)
            parse_filter(upgraded)
        except QueryError as exc:
            raise ValueError(str(exc)) from None
        warnings.warn(
            f"bedrock `filter` {value!r} uses the old operator names; write "
            f"{upgraded!r} (the Kairox filter language, docs/filters.md)",
            DeprecationWarning,
            stacklevel=2,
        )
        return upgraded

    @model_validator(mode="after")
    def _arn_region_matches(self) -> BedrockConfig:
        arn = _KB_ARN.fullmatch(self.knowledge_base_id)
        if arn and arn.group("region") != self.region:
            raise ValueError(
                f"knowledge_base_id is an ARN in region {arn.group('region')!r} but region is "
                f"{self.region!r}: make them the same"
            )
        return self
