"""The template's tests: the Kairox conformance suite, plus discovery through `kairox plugins`.

They name the plugin only in the import below, so renaming the package (README, step 2)
leaves them working: the kind comes from ``plugin.KIND`` and the entry point and
distribution from the installed metadata.
"""

from __future__ import annotations

import json
import os
from importlib.metadata import entry_points
from pathlib import Path

import kairox_example as plugin
import pytest

from kairox import Query
from kairox.testing import (
    CORPUS,
    FILTER_CORPUS,
    FilterConformance,
    SourceConformance,
    build_source,
    check_listed_by_kairox_plugins,
    run,
)


def write_corpus(path: Path, corpus=CORPUS) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for doc in corpus:
            record = {
                "id": doc.id,
                "title": doc.title,
                "text": doc.text,
                "uri": doc.uri,
                "metadata": doc.metadata,
            }
            handle.write(json.dumps(record) + "\n")
    return path


def build(tmp_path: Path, filename: str) -> plugin.JsonlBm25Source:
    return build_source(plugin, plugin.KIND, "example", base_dir=tmp_path, path=filename)


class TestExampleJsonlFilters(FilterConformance):
    @pytest.fixture
    def filter_source(self, tmp_path):
        write_corpus(tmp_path / "corpus.jsonl", FILTER_CORPUS)
        return build(tmp_path, "corpus.jsonl")


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
    with pytest.raises(plugin.ExampleJsonlError, match=r"bad\.jsonl:2"):
        run(source.retrieve(Query("ok")))


def test_kairox_plugins_lists_the_installed_plugin():
    ours = [ep for ep in entry_points(group="kairox") if ep.value == plugin.__name__]
    assert ours, f"no entry point in group 'kairox' names {plugin.__name__}: pip install -e ."
    name, package = ours[0].name, ours[0].dist.name
    check_listed_by_kairox_plugins(name, package, "kairox_register_knowledge_base_kinds")
