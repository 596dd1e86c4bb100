"""What the loopback Bedrock checks in a request the way the service does: the query and
its filter (with the service's own error messages), filter evaluation over a chunk's
metadata, pagination tokens and the SigV4 signature."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit

_ATTRIBUTE_OPERATORS = frozenset(
    {
        "equals",
        "notEquals",
        "in",
        "notIn",
        "greaterThan",
        "greaterThanOrEquals",
        "lessThan",
        "lessThanOrEquals",
        "startsWith",
        "stringContains",
        "listContains",
    }
)


_NUMBER_OPERATORS = frozenset(
    {"greaterThan", "greaterThanOrEquals", "lessThan", "lessThanOrEquals"}
)


_MAX_QUERY_CHARS = 20_000


class ServiceError(Exception):
    """A request the service would refuse: ``code`` and ``message`` as it sends them."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def json_object(body: bytes, what: str = "an object") -> dict[str, Any]:
    """The request body as a JSON object, else the service's ``SerializationException``
    (saying the body must be ``what``)."""
    try:
        payload = json.loads(body) if body else {}
    except ValueError:
        raise ServiceError(
            "SerializationException", "Could not parse the request body as JSON"
        ) from None
    if not isinstance(payload, dict):
        raise ServiceError("SerializationException", f"The request body must be {what}")
    return payload


def _require_text(payload: Mapping[str, Any]) -> str:
    query = payload.get("retrievalQuery")
    if query is None:
        raise ServiceError(
            "ValidationException",
            "1 validation error detected: Value null at 'retrievalQuery' failed to satisfy "
            "constraint: Member must not be null",
        )
    if not isinstance(query, dict):
        raise ServiceError("SerializationException", "retrievalQuery must be an object")
    text = query.get("text")
    if text is not None and not isinstance(text, str):
        raise ServiceError("SerializationException", "retrievalQuery.text must be a string")
    if text is None or not text.strip():
        raise ServiceError(
            "ValidationException",
            "1 validation error detected: Value at 'retrievalQuery.text' failed to satisfy "
            "constraint: Member must not be blank",
        )
    if len(text) > _MAX_QUERY_CHARS:
        raise ServiceError(
            "ValidationException",
            "1 validation error detected: Value at 'retrievalQuery.text' failed to satisfy "
            f"constraint: Member must have length less than or equal to {_MAX_QUERY_CHARS}",
        )
    return text


def _is_scalar(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, str | bool | int)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_filter(expression: Any, where: str) -> None:
    """Raise ``ValidationException`` for a filter the real service would refuse."""

    def invalid(message: str) -> ServiceError:
        return ServiceError("ValidationException", f"Invalid filter at '{where}': {message}")

    if not isinstance(expression, dict) or len(expression) != 1:
        raise invalid("a RetrievalFilter must have exactly one member set")
    ((operator, argument),) = expression.items()
    where = f"{where}.{operator}"
    if operator in ("andAll", "orAll"):
        if not isinstance(argument, list):
            raise invalid(f"{operator} must be a list of filters")
        if len(argument) < 2:
            raise invalid(
                f"Member must have length greater than or equal to 2 (got {len(argument)}); "
                f"a single condition must not be wrapped in {operator}"
            )
        for i, member in enumerate(argument):
            _check_filter(member, f"{where}[{i}]")
        return
    if operator not in _ATTRIBUTE_OPERATORS:
        raise invalid(f"unknown filter operator {operator!r}")
    if not isinstance(argument, dict) or "key" not in argument or "value" not in argument:
        raise invalid("a filter attribute needs both 'key' and 'value'")
    key, value = argument["key"], argument["value"]
    if not isinstance(key, str) or not 1 <= len(key) <= 100:
        raise invalid("'key' must be a string of 1 to 100 characters")
    if operator in ("in", "notIn"):
        if not isinstance(value, list):
            raise invalid(f"the value of '{operator}' must be a list, got {json.dumps(value)}")
        if not value or not all(_is_scalar(v) for v in value):
            raise invalid(f"the value of '{operator}' must be a non-empty list of plain values")
    elif operator in _NUMBER_OPERATORS:
        if not _is_number(value):
            raise invalid(f"the value of '{operator}' must be a number, got {json.dumps(value)}")
    elif operator in ("startsWith", "stringContains"):
        if not isinstance(value, str):
            raise invalid(f"the value of '{operator}' must be a string")
    elif not _is_scalar(value):
        raise invalid(f"the value of '{operator}' must be a string, number or boolean")


def _same(actual: Any, wanted: Any) -> bool:
    """Typed equality: booleans equal only booleans, numbers compare numerically."""
    if isinstance(actual, bool) or isinstance(wanted, bool):
        return isinstance(actual, bool) and isinstance(wanted, bool) and actual == wanted
    if _is_number(actual) and _is_number(wanted):
        return actual == wanted
    return type(actual) is type(wanted) and actual == wanted


def evaluate_filter(expression: Mapping[str, Any], metadata: Mapping[str, Any]) -> bool:
    """Whether ``metadata`` meets a (valid) Bedrock ``RetrievalFilter``.

    ``equals``/``in`` compare typed values (the string ``"2021"`` is not the number
    ``2021``, ``true`` is not ``1``); ``notEquals``/``notIn`` also match a missing key;
    ranges need numbers; ``listContains`` looks inside a list attribute; ``startsWith``
    and ``stringContains`` work on strings (and on any element of a list of strings).
    """
    ((operator, argument),) = expression.items()
    if operator == "andAll":
        return all(evaluate_filter(member, metadata) for member in argument)
    if operator == "orAll":
        return any(evaluate_filter(member, metadata) for member in argument)
    key, wanted = argument["key"], argument["value"]
    present = key in metadata
    actual = metadata.get(key)
    if operator == "equals":
        return present and _same(actual, wanted)
    if operator == "notEquals":
        return not (present and _same(actual, wanted))
    if operator == "in":
        return present and any(_same(actual, v) for v in wanted)
    if operator == "notIn":
        return not (present and any(_same(actual, v) for v in wanted))
    if operator in _NUMBER_OPERATORS:
        if not _is_number(actual):
            return False
        return {
            "greaterThan": actual > wanted,
            "greaterThanOrEquals": actual >= wanted,
            "lessThan": actual < wanted,
            "lessThanOrEquals": actual <= wanted,
        }[operator]
    strings = [actual] if isinstance(actual, str) else actual if isinstance(actual, list) else []
    strings = [s for s in strings if isinstance(s, str)]
    if operator == "startsWith":
        return any(s.startswith(wanted) for s in strings)
    if operator == "stringContains":
        return any(wanted in s for s in strings)
    if operator == "listContains":
        return isinstance(actual, list) and any(_same(a, wanted) for a in actual)
    raise ValueError(f"unknown filter operator {operator!r}")  # _check_filter ran first


def _make_token(offset: int, fingerprint: str) -> str:
    raw = json.dumps({"o": offset, "f": fingerprint}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _read_token(token: Any, fingerprint: str) -> int:
    if token is None:
        return 0
    invalid = ServiceError("ValidationException", "The provided nextToken is not valid")
    if not isinstance(token, str) or not token:
        raise invalid
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, binascii.Error):
        raise invalid from None
    if not isinstance(data, dict) or data.get("f") != fingerprint:
        raise ServiceError(
            "ValidationException",
            "The provided nextToken belongs to another query; send the same query and "
            "configuration with it",
        )
    offset = data.get("o")
    if not isinstance(offset, int) or offset < 0:
        raise invalid
    return offset


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode(), hashlib.sha256).digest()


def _signature_ok(
    secret_key: str,
    method: str,
    target: str,
    headers: Mapping[str, str],
    body: bytes,
    scope: re.Match[str],
) -> bool:
    """Recompute the SigV4 signature the way the service does and compare."""
    parts = urlsplit(target)
    pairs = sorted(pair.partition("=")[::2] for pair in parts.query.split("&") if pair)
    signed = scope["signed"].split(";")
    canonical = "\n".join(
        [
            method,
            quote(parts.path or "/", safe="/~"),
            "&".join(f"{k}={v}" for k, v in pairs),
            "".join(f"{name}:{' '.join(headers.get(name, '').split())}\n" for name in signed),
            scope["signed"],
            headers.get("x-amz-content-sha256") or hashlib.sha256(body).hexdigest(),
        ]
    )
    credential_scope = f"{scope['date']}/{scope['region']}/{scope['service']}/aws4_request"
    to_sign = "\n".join(
        [
            "AWS4-HMAC-SHA256",
            headers.get("x-amz-date", ""),
            credential_scope,
            hashlib.sha256(canonical.encode()).hexdigest(),
        ]
    )
    key = _hmac(("AWS4" + secret_key).encode(), scope["date"])
    for part in (scope["region"], scope["service"], "aws4_request"):
        key = _hmac(key, part)
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, scope["signature"])
