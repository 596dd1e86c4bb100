"""An index in the layout before the ``key`` field is rebuilt once, on open, losing nothing."""

from __future__ import annotations

import json
import os
import textwrap

import pytest
from kairox_tantivy import TantivyIndex, TantivyLockedError
from kairox_tantivy.filters import RANGE_MARKER
from kairox_tantivy.store import STORE_FILE
from kairox_tantivy.upgrade import legacy_schema

from kairox.retrieval import Document

OLD = [
    Document(
        "a",
        "Saturn's rings are made of ice.",
        title="Saturn",
        uri="file:///a",
        metadata={"year": 2021, "tags": ["space"]},
    ),
    Document("b", "Herons wade in shallow water.", metadata={"year": 2019}),
    Document("c", "Nothing but a plain body"),
]


@pytest.fixture
def legacy(tmp_path):
    """``tmp_path / "index"`` written as kairox-tantivy wrote it before ``key`` (no range
    marker: it predates range terms too); returns the folder and the stored fingerprints."""
    import tantivy

    folder = tmp_path / "index"
    folder.mkdir()
    index = tantivy.Index(legacy_schema(tantivy), path=str(folder))
    writer = index.writer()
    fingerprints = {}
    for doc in OLD:
        out = tantivy.Document()
        out.add_text("id", doc.id)
        out.add_text("title", doc.title)
        out.add_text("body", doc.text)
        if doc.uri:
            out.add_text("uri", doc.uri)
        fingerprints[doc.id] = f"old-{doc.id}"  # as stored then: kept verbatim
        out.add_text("fingerprint", fingerprints[doc.id])
        out.add_text("filter", json.dumps("year") + "=" + json.dumps(doc.metadata.get("year")))
        out.add_bytes("metadata", json.dumps(dict(doc.metadata), sort_keys=True).encode())
        writer.add_document(out)
    writer.commit()
    writer.wait_merging_threads()
    return folder, fingerprints


def test_an_old_index_is_rebuilt_once_with_everything(legacy):
    folder, fingerprints = legacy
    with pytest.warns(UserWarning, match=r"upgrading the index at .*re-indexing its 3 documents"):
        index = TantivyIndex(folder)
    assert (folder / STORE_FILE).is_file() and index.count() == 3
    assert index.fingerprints() == fingerprints  # kb ingest still skips them
    hit = index.search("ring", 5)[0]
    assert (hit.id, hit.title, hit.body, hit.uri, hit.metadata) == (
        "a",
        "Saturn",
        OLD[0].text,
        "file:///a",
        {"tags": ["space"], "year": 2021},
    )
    # Every document was re-indexed with range terms, so ranges work now.
    assert (folder / RANGE_MARKER).is_file()
    assert [h.id for h in index.search("water ice", 5, {"year": {"$lt": 2020}})] == ["b"]
    assert sorted(p.name for p in folder.parent.iterdir()) == ["index"]  # no leftovers
    index.upsert([Document("d", "a new heron")])
    assert {h.id for h in index.search("heron", 5)} == {"b", "d"}


def test_opening_again_does_not_rebuild(legacy, recwarn):
    folder, _ = legacy
    with pytest.warns(UserWarning):
        TantivyIndex(folder)
    TantivyIndex(folder)
    assert not [w for w in recwarn if "upgrading" in str(w.message)]


def test_an_upgrade_killed_between_its_renames_is_finished_on_the_next_open(legacy):
    folder, fingerprints = legacy
    backup = folder.with_name("index.kairox-before-upgrade")
    os.rename(folder, backup)  # the old copy moved aside, the new one never moved in
    with pytest.warns(UserWarning, match="upgrading"):
        index = TantivyIndex(folder)
    assert index.fingerprints() == fingerprints and not backup.exists()


def test_a_leftover_half_built_copy_is_replaced(legacy):
    folder, fingerprints = legacy
    half = folder.with_name("index.kairox-upgrading")
    half.mkdir()
    (half / "junk").write_text("from an upgrade that was killed")
    with pytest.warns(UserWarning):
        assert TantivyIndex(folder).fingerprints() == fingerprints
    assert not half.exists()


def test_an_old_index_being_written_is_not_upgraded_under_the_writer(legacy):
    import tantivy

    folder, fingerprints = legacy
    holder = tantivy.Index.open(str(folder)).writer()
    try:
        with pytest.raises(TantivyLockedError, match="one-time upgrade"):
            TantivyIndex(folder)
    finally:
        holder.wait_merging_threads()
    with pytest.warns(UserWarning):
        assert TantivyIndex(folder).fingerprints() == fingerprints


def test_the_upgrade_in_another_process_prints_the_message(legacy):
    import subprocess
    import sys

    folder, _ = legacy
    code = textwrap.dedent(
        f"""
        from kairox_tantivy import TantivyIndex
        print(TantivyIndex({str(folder)!r}).count())
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "3"
    assert "upgrading the index at" in done.stderr and "nothing is lost" in done.stderr
