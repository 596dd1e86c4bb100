"""JSONL records read through orjson accept, store and refuse exactly what json does."""

from __future__ import annotations

import json

import pytest

from kairox.runtime import ingest_records
from kairox.runtime.ingest_records import IngestError, read_records

BIG = 2**70 + 1  # not a power of two: no float equals it

# Lines orjson refuses or reads differently, and lines both read alike.
LINES = [
    b'{"id": "a", "text": "t", "metadata": {"n": %d}}' % BIG,
    b'{"id": %d, "text": "t"}' % BIG,
    b'{"id": "a", "text": "t", "metadata": {"n": -%d, "m": 18446744073709551615}}' % BIG,
    b'{"id": "a", "text": "t", "chunk": %d}' % BIG,
    b'{"id": "a", "text": "t", "metadata": {"f": 0.1, "g": 1e400}}',
    b'{"id": "a", "text": "t", "metadata": {"f": 12345678901234567890123.5, "g": -0.0}}',
    b'{"id": "a", "text": "t", "metadata": {"f": NaN}}',
    b'{"id": "a", "text": "t", "metadata": [Infinity]}',
    b'{"id": "a", "text": "t", "x": NaN}',
    b'{"id": "a", "text": "t", "id": "b", "metadata": {"k": 1, "j": 2, "k": 3}}',
    b'{"id": "a", "text": "\\ud800 lone"}',
    b'{"id": "a", "text": "t", "x": "\\udc00"}',
    b'{"id": "a", "text": "\\ud83d\\ude00 pair \\u0000"}',
    b'\xef\xbb\xbf{"id": "bom", "text": "t"}',
    b'{"id": "a", "text": "\xff"}',
    b'{"id": "a", "text": "\xed\xa0\x80"}',
    b"   ",
    b'{"id": "a", "text": "t",}',
    b'{"id": "a", "text": "t"} x',
    b'["id", "text"]',
    b'{"id": 7, "text": "t", "title": null, "uri": "u", "chunk": false}',
    b'{"id": "a", "text": "t", "metadata": ' + b"[" * 40 + b"]" * 40 + b"}",
    b'{"id": "a", "text": "t", "x": ' + b"[" * 1010 + b"]" * 1010 + b"}",
    b'{"id": "a", "text": 3}',
]


def _read(path):
    try:
        return [(item.document, item.chunk) for item in read_records(path)]
    except IngestError as exc:
        return str(exc)


@pytest.mark.parametrize("line", LINES, ids=range(len(LINES)))
def test_orjson_reads_as_json_does(line, tmp_path, monkeypatch):
    path = tmp_path / "in.jsonl"
    path.write_bytes(line + b"\n")
    fast = _read(path)
    # Every line left to json: today's reading.
    monkeypatch.setattr(ingest_records, "_ORJSON_MAX_BRACKETS", -1)
    assert fast == _read(path)


def test_big_integers_are_stored_as_integers(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(LINES[0] + b"\n" + LINES[1] + b"\n")
    first, second = (item.document for item in read_records(path))
    assert first.metadata == {"n": BIG} and type(first.metadata["n"]) is int
    assert second.id == str(BIG)
    assert json.dumps(first.metadata) == f'{{"n": {BIG}}}'


def test_refusals_name_the_line(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"id": "a", "text": "t"}\n' + LINES[6] + b"\n")
    with pytest.raises(IngestError, match=r"in\.jsonl:2: .*NaN is not valid JSON"):
        list(read_records(path))
    path.write_bytes(LINES[10] + b"\n")
    with pytest.raises(IngestError, match=r"in\.jsonl:1: 'text' holds a lone surrogate"):
        list(read_records(path))


def test_duplicate_keys_keep_the_last_value_in_the_first_place(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(LINES[9] + b"\n")
    (item,) = read_records(path)
    assert item.document.id == "b"
    assert list(item.document.metadata.items()) == [("k", 3), ("j", 2)]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            b'{"id": "a", "text": "t",}',
            "Expecting property name enclosed in double quotes at column 25",
        ),
        (b'{"id": "a", "text": "t\x07"}', "Invalid control character at column 23"),
    ],
)
def test_a_line_json_cannot_read_is_named_with_its_column(tmp_path, line, message):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"id": "b", "text": "t"}\n' + line + b"\n")
    with pytest.raises(IngestError) as refused:
        list(read_records(path))
    assert str(refused.value).endswith(f"in.jsonl:2: not valid JSON ({message})")
