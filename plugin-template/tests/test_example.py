"""The template's tests: the Kairox conformance suite, plus discovery through `kairox plugins`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import kairox_example
import pytest

from kairox.registry import BuildContext
from kairox.retrieval import Query
from kairox.testing import (
    CORPUS,
    SourceConformance,
    check_kind_registration,
    check_listed_by_kairox_plugins,
    run,
)


def write_corpus(path: Path) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for doc in CORPUS:
            record = {
                "id": doc.id,
                "title": doc.title,
                "text": doc.text,
                "uri": doc.uri,
                "metadata": doc.metadata,
            }
            handle.write(json.dumps(record) + "\n")
    return path


def build(tmp_path: Path, filename: str) -> kairox_example.JsonlBm25Source:
    kind = check_kind_registration(kairox_example, "example-jsonl")
    config = kind.config_model(kind="example-jsonl", path=filename)
    ctx = BuildContext(
        workspace_root=tmp_path, state_dir=tmp_path, base_dir=tmp_path, embedding_backend=None
    )
    return kind.factory("example", config, ctx)


class TestExampleJsonlConformance(SourceConformance):
    @pytest.fixture
    def conformance_source(self, tmp_path):
        write_corpus(tmp_path / "corpus.jsonl")
        return build(tmp_path, "corpus.jsonl")

    @pytest.fixture
    def broken_source(self, tmp_path):
        return build(tmp_path, "missing.jsonl")


def test_reloads_when_the_file_changes(tmp_path):
    source = build(tmp_path, "docs.jsonl")
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"id": "a", "text": "alpha particle"}) + "\n")
    assert [h.id for h in run(source.retrieve(Query("alpha")))] == ["a"]
    path.write_text(json.dumps({"id": "b", "text": "beta alpha"}) + "\n")
    os.utime(path, ns=(1, 1))  # force a different mtime even on coarse clocks
    assert [h.id for h in run(source.retrieve(Query("alpha")))] == ["b"]


def test_malformed_line_names_file_and_line(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"id": "a", "text": "ok"}\n{"id": "b"}\n')
    source = build(tmp_path, "bad.jsonl")
    with pytest.raises(kairox_example.ExampleJsonlError, match=r"bad\.jsonl:2"):
        run(source.retrieve(Query("ok")))


def test_kairox_plugins_lists_the_installed_template():
    check_listed_by_kairox_plugins(
        "example", "kairox-example", "kairox_register_knowledge_base_kinds"
    )
