"""The workspace vector source's default fusion weight follows its embedder (hashing: small)."""

from __future__ import annotations

import json

import pytest

from kairox.default_plugins.hashing_embedder import HASHING_FUSION_WEIGHT


@pytest.fixture
def many_files(workspace):
    # One file says the query words; thirty share only a word or two with it.
    (workspace / "answer.md").write_text("Retry failed uploads with exponential backoff.\n")
    for i in range(30):
        (workspace / f"note{i:02}.md").write_text(f"Note {i}: uploads and other things {i}.\n")
    return workspace


def _search(invoke, *args):
    result = invoke("search", "retry failed uploads", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["hits"]


def test_hashing_vectors_count_little_but_still_fill_k_hits(invoke, many_files):
    assert invoke("index").exit_code == 0
    hits = _search(invoke, "-k", "20")
    assert len(hits) == 20  # vector hits are not dropped: k hits where k exist
    assert hits[0]["metadata"]["path"] == "answer.md"
    vector_only = [h for h in hits if {p["source"] for p in h["sources"]} == {"workspace"}]
    fts_found = [h for h in hits if "workspace-fts" in {p["source"] for p in h["sources"]}]
    # FTS's ranking leads; hits only the vectors found come after every FTS hit.
    if vector_only and fts_found:
        assert min(h["score"] for h in fts_found) >= max(h["score"] for h in vector_only)
    assert 0 < HASHING_FUSION_WEIGHT < 1


def test_vector_weight_setting_overrides_the_embedders_default(invoke, many_files):
    (many_files / "kairox.toml").write_text("[workspace]\nvectors = true\nvector_weight = 1.0\n")
    assert invoke("index").exit_code == 0
    hits = _search(invoke, "-k", "5")
    by_vectors = [h for h in hits if "workspace" in {p["source"] for p in h["sources"]}]
    assert by_vectors  # weighted 1:1 the vectors' hits score like FTS's
    (many_files / "kairox.toml").write_text("[workspace]\nvector_weight = -1\n")
    result = invoke("search", "retry")
    assert result.exit_code == 2 and "vector_weight" in result.output
