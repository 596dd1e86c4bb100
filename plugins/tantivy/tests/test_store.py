"""documents.sqlite beside the index: hits read their rows by key, rows follow every write,
and the rows kept in memory never outlive the version they belong to."""

from __future__ import annotations

import sqlite3

import pytest
from kairox_tantivy import TantivyIndex, TantivyIndexError
from kairox_tantivy.store import STORE_FILE

from kairox.retrieval import Document


def stored_rows(index: TantivyIndex) -> list[tuple[str, str]]:
    with sqlite3.connect(index.path / STORE_FILE) as db:
        return sorted(db.execute("SELECT id, body FROM documents"))


def test_tantivy_stores_nothing_and_hits_come_from_the_rows(filled, corpus_docs):
    searcher = filled._searcher()
    _score, address = searcher.search(filled._tantivy.Query.all_query(), limit=1).hits[0]
    assert searcher.doc(address).to_dict() == {}  # no stored fields left to decode
    by_id = {doc.id: doc for doc in corpus_docs}
    for hit in filled.search("saturn rings", 5):
        doc = by_id[hit.id]
        assert (hit.title, hit.body, hit.uri, hit.metadata) == (
            doc.title,
            doc.text,
            doc.uri,
            dict(doc.metadata),
        )
    assert len(stored_rows(filled)) == filled.count()


def test_a_replaced_document_is_never_served_from_memory(tmp_path):
    index = TantivyIndex(tmp_path / "index", create=True)
    index.upsert([Document("x", "the old heron text")])
    assert [h.body for h in index.search("heron", 5)] == ["the old heron text"]  # now kept
    other = TantivyIndex(tmp_path / "index")  # another writer: our memory is not told
    other.upsert([Document("x", "the new heron text")])
    assert [h.body for h in index.search("heron", 5)] == ["the new heron text"]
    assert stored_rows(index) == [("x", "the new heron text")]  # the old row was pruned
    other.delete(["x"])
    assert index.search("heron", 5) == [] and stored_rows(index) == []


def keys_of(index: TantivyIndex) -> list[int]:
    searcher = index._searcher()
    hits = searcher.search(index._tantivy.Query.all_query(), limit=10).hits
    return searcher.fast_field_values("key", [address for _score, address in hits])


def test_a_new_version_gets_a_new_key_and_the_old_row_goes(tmp_path):
    index = TantivyIndex(tmp_path / "index", create=True)
    index.upsert([Document("x", "first")])
    (old_key,) = keys_of(index)
    index.upsert([Document("x", "second")])
    (new_key,) = keys_of(index)
    assert new_key > old_key  # never reused: a stale key cannot name another document
    assert index._store._read([old_key]) == {}
    assert [h.body for h in index.search("second", 5)] == ["second"]


def test_a_failed_write_leaves_no_rows_behind(filled, monkeypatch):
    import kairox_tantivy.index as index_module

    before = stored_rows(filled)

    def broken(writer):
        def delete(field, value):
            raise ValueError("disk on fire")

        return delete

    monkeypatch.setattr(index_module, "_deleter", broken)
    with pytest.raises(ValueError, match="disk on fire"):
        filled.upsert([Document("astro-1", "half written"), Document("new", "never indexed")])
    assert stored_rows(filled) == before


def test_an_index_that_lost_its_rows_says_so(filled):
    (filled.path / STORE_FILE).unlink()
    with pytest.raises(TantivyIndexError, match=r"lost its documents\.sqlite"):
        TantivyIndex(filled.path)


def test_a_forked_child_opens_its_own_connections(filled):
    import os

    assert filled.search("saturn rings", 1)[0].id == "astro-1"  # the parent's connections
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code
        code = 1
        try:
            filled.upsert([Document("child", "written by the forked child about herons")])
            hits = filled.search("herons", 5)
            code = 0 if [h.id for h in hits] == ["child"] and hits[0].body.endswith("herons") else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert filled._store._pid == os.getpid()  # the parent's own connections are untouched
    assert [h.id for h in filled.search("herons", 5)] == ["child"]
