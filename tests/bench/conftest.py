"""Fixtures for the benchmark tests: a tiny BEIR-layout dataset made by the test."""

from __future__ import annotations

import json

import pytest

from kairox.testing import CORPUS, EXPECTED


@pytest.fixture
def dataset(tmp_path):
    root = tmp_path / "tiny-beir"
    (root / "qrels").mkdir(parents=True)
    with (root / "corpus.jsonl").open("w") as handle:
        for doc in CORPUS:
            handle.write(json.dumps({"_id": doc.id, "title": doc.title, "text": doc.text}) + "\n")
    with (root / "queries.jsonl").open("w") as handle:
        for number, (text, _) in enumerate(EXPECTED):
            handle.write(json.dumps({"_id": f"q{number}", "text": text}) + "\n")
        handle.write(json.dumps({"_id": "unjudged", "text": "nothing"}) + "\n")
    rows = ["query-id\tcorpus-id\tscore"] + [
        f"q{number}\t{expected}\t1" for number, (_, expected) in enumerate(EXPECTED)
    ]
    (root / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n")
    return root
