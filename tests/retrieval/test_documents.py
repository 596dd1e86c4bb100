"""A document's fingerprint is the hash it has always been (stored fingerprints stay valid)."""

from __future__ import annotations

import hashlib
import json

import pytest

from kairox.retrieval import Document


def _reference(document: Document) -> str:
    """The fingerprint as it was first defined: every stored one was made this way."""
    payload = json.dumps(
        [document.title, document.text, document.uri, dict(document.metadata)],
        sort_keys=True,
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


class Text(str):
    """A str subclass: left to json."""


EVERY_CHARACTER = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)

DOCUMENTS = [
    Document("a", "plain text"),
    Document("a", "text", title="t", uri="file:///x"),
    Document("a", 'quotes " and \\ and \n\r\t\b\f \x00\x1f\x7f \u2028\u2029 é 😀 /'),
    Document("a", EVERY_CHARACTER, title=EVERY_CHARACTER[:5000], uri=EVERY_CHARACTER[-99:]),
    Document("a", "lone \ud800 surrogate"),
    Document("a", "text", title="lone \udfff"),
    Document("a", "text", metadata={"b": 1, "a": [1.5, None, True], "c": {"z": "é"}}),
    Document("a", "text", metadata={"big": 2**70 + 1, "nan": float("nan")}),
    Document("a", Text("a str subclass")),
    Document("a", "", title="", uri=""),
]


@pytest.mark.parametrize("document", DOCUMENTS, ids=range(len(DOCUMENTS)))
def test_fingerprint_is_unchanged(document):
    assert document.fingerprint == _reference(document)


def test_fingerprint_follows_every_indexed_field():
    base = Document("a", "text", title="t", uri="u")
    changed = [
        Document("a", "text!", title="t", uri="u"),
        Document("a", "text", title="t!", uri="u"),
        Document("a", "text", title="t", uri=None),
        Document("a", "text", title="t", uri="u", metadata={"k": 1}),
    ]
    assert len({base.fingerprint, *(d.fingerprint for d in changed)}) == 5
    assert Document("other id", "text", title="t", uri="u").fingerprint == base.fingerprint
