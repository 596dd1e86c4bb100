"""What a :class:`~kairox.Document` becomes in a kairox-tantivy index: its filter terms
(one raw term per scalar metadata value) and its ``documents.sqlite`` row; the checks a
document id must pass.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kairox import Document
from kairox_tantivy.store import Row

__all__ = [
    "MAX_TERM_BYTES",
    "check_id",
    "filter_term",
    "metadata_from_json",
    "metadata_terms",
    "row",
    "valid_utf8",
]

#: Tantivy silently skips raw tokens longer than this many UTF-8 bytes (``MAX_TOKEN_LEN``).
MAX_TERM_BYTES = 65_530

_SCALARS = (str, int, float, bool)
_SEQUENCES = (list, tuple, set, frozenset)


def valid_utf8(text: str) -> str:
    """``text`` with lone surrogates (which UTF-8 cannot carry) replaced by ``?``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def _filter_value(value: Any) -> Any:
    # bool and integral floats compare like their int (True == 1, 2021.0 == 2021), as
    # they do in Python and in the sqlite-fts source.
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def filter_term(key: str, value: str | int | float | bool) -> str:
    """The ``filter`` field term for metadata ``key == value``: ``"key"=json(value)``.

    Both halves are JSON (ASCII-escaped), so the term is unambiguous whatever the key or
    value contains, and the string ``"2021"`` differs from the number ``2021``.
    """
    return json.dumps(str(key)) + "=" + json.dumps(_filter_value(value))


def metadata_terms(metadata: Mapping[str, Any]) -> list[str]:
    """Filter terms for every scalar value (and every scalar element of a list value)."""
    terms: list[str] = []
    for key, value in metadata.items():
        values = list(value) if isinstance(value, _SEQUENCES) else [value]
        for item in values:
            if isinstance(item, _SCALARS):
                term = filter_term(key, item)
                if len(term) <= MAX_TERM_BYTES:
                    terms.append(term)
    return list(dict.fromkeys(terms))


def check_id(doc_id: Any) -> str:
    if not isinstance(doc_id, str):
        raise TypeError(f"document id must be a str, got {type(doc_id).__name__}")
    try:
        size = len(doc_id.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(f"document id {doc_id!r} is not valid UTF-8 (lone surrogate)") from None
    if size > MAX_TERM_BYTES:
        raise ValueError(
            f"document id {doc_id[:40]!r}... is {size} bytes; tantivy indexes at most "
            f"{MAX_TERM_BYTES} bytes per id"
        )
    return doc_id


def row(doc: Document, fingerprint: str) -> Row:
    """``doc`` as its ``documents.sqlite`` row (text made valid UTF-8)."""
    metadata = json.dumps(dict(doc.metadata), sort_keys=True, default=str)
    uri = None if doc.uri is None else valid_utf8(str(doc.uri))
    title, body = valid_utf8(doc.title or ""), valid_utf8(doc.text or "")
    return (doc.id, title, body, uri, fingerprint, metadata)


def metadata_from_json(raw: str) -> dict[str, Any]:
    """A row's metadata JSON as a new dict."""
    # Most documents carry none; skipping the parser for them is measurable per query.
    return {} if raw == "{}" else json.loads(raw)
