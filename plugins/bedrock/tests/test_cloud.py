"""Against the real service: runs only when a knowledge base and AWS credentials are in the
environment, and is skipped otherwise.

    KAIROX_BEDROCK_KB_ID=ABCDE12345 AWS_PROFILE=me AWS_REGION=us-east-1 pytest -m cloud

Credentials come from the standard chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or
AWS_PROFILE); the region from KAIROX_BEDROCK_REGION, AWS_REGION or AWS_DEFAULT_REGION;
KAIROX_BEDROCK_QUERY optionally sets the query text.
"""

from __future__ import annotations

import math
import os

import pytest
from kairox_bedrock import BedrockAuthError, BedrockConfig, BedrockNotFoundError, BedrockSource

from kairox.retrieval import Hit, Query
from kairox.testing import run

pytestmark = pytest.mark.cloud

KB_ID = os.environ.get("KAIROX_BEDROCK_KB_ID")
REGION = (
    os.environ.get("KAIROX_BEDROCK_REGION")
    or os.environ.get("AWS_REGION")
    or os.environ.get("AWS_DEFAULT_REGION")
)
HAS_CREDENTIALS = bool(
    (os.environ.get("AWS_ACCESS_KEY_ID") and os.environ.get("AWS_SECRET_ACCESS_KEY"))
    or os.environ.get("AWS_PROFILE")
)

requires_aws = pytest.mark.skipif(
    not (KB_ID and REGION and HAS_CREDENTIALS),
    reason="set KAIROX_BEDROCK_KB_ID, a region (KAIROX_BEDROCK_REGION or AWS_REGION) and "
    "AWS credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE) to run",
)


def source(kb_id: str | None = KB_ID) -> BedrockSource:
    config = BedrockConfig(kind="bedrock", knowledge_base_id=kb_id, region=REGION, timeout_ms=15000)
    return BedrockSource("cloud", config)


@requires_aws
def test_a_real_knowledge_base_answers():
    text = os.environ.get("KAIROX_BEDROCK_QUERY", "What is this knowledge base about?")
    hits = run(source().retrieve(Query(text, k=3)))
    assert hits, (
        "the knowledge base returned nothing; set KAIROX_BEDROCK_QUERY to a query it answers"
    )
    assert len(hits) <= 3
    for hit in hits:
        assert isinstance(hit, Hit) and hit.source == "cloud" and hit.text.strip()
        assert math.isfinite(hit.score)
        assert "location_type" in hit.metadata
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@requires_aws
def test_a_missing_knowledge_base_is_a_clear_error():
    with pytest.raises((BedrockNotFoundError, BedrockAuthError)) as caught:
        run(source("ZZZZZZZZZZ").retrieve(Query("anything", k=1)))
    assert "ZZZZZZZZZZ" in str(caught.value)
