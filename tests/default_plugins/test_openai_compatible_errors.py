"""What the openai-compatible backend reads from a failing server: ``Retry-After``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

from kairox.default_plugins.openai_compatible import parse_retry_after


def test_parse_retry_after():
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after": "0.5"}) == 0.5
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "-4"}) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    now = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert parse_retry_after({"retry-after": later}, now=now.timestamp()) == 30.0
    earlier = format_datetime(now - timedelta(seconds=30), usegmt=True)
    assert parse_retry_after({"retry-after": earlier}, now=now.timestamp()) == 0.0
