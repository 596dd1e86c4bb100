"""kairox.testing.build_source builds through the registered kind; CountingEmbedder counts."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from kairox.default_plugins import sqlite_fts
from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.testing import CountingEmbedder, build_source


def test_build_source_validates_through_the_kind_and_resolves_paths(tmp_path):
    source = build_source(sqlite_fts, "sqlite-fts", "notes", base_dir=tmp_path, path="kb.db")
    assert source.name == "notes"
    assert source.path == tmp_path / "kb.db"
    with pytest.raises(ValidationError, match="pathh"):
        build_source(sqlite_fts, "sqlite-fts", base_dir=tmp_path, path="kb.db", pathh="x")


def test_an_embedder_the_test_did_not_give_is_named():
    lookup = build_source.__globals__["_lookup"]({"hashing": HashingEmbedder()})
    assert lookup("hashing").name == "hashing-384"
    with pytest.raises(KeyError, match="no embedding backend 'minilm' in this test"):
        lookup("minilm")


def test_counting_embedder_records_batches_and_texts():
    wrapped = CountingEmbedder(dim=64)
    assert wrapped.name == "hashing-64" and wrapped.calls == []
    vectors = wrapped.embed(["a cat", "a dog"])
    wrapped.embed(["fish"])
    np.testing.assert_allclose(vectors, HashingEmbedder(64).embed(["a cat", "a dog"]))
    assert wrapped.calls == [["a cat", "a dog"], ["fish"]] and wrapped.texts_embedded == 3
    filled = CountingEmbedder(name="flat", fill=0.5, dim=4)
    assert filled.embed(["x"]).tolist() == [[0.5, 0.5, 0.5, 0.5]] and filled.name == "flat"
