"""``kb_texts``: one row a passage holding its and its sentences' digests, and the
conversion of the layout before (a hex row a passage and a sentence)."""

from __future__ import annotations

import hashlib

import apsw
import pytest

from kairox.default_plugins.sqlite_vector_keys import upgrade
from kairox.default_plugins.sqlite_vectors import passage_text
from kairox.retrieval import Document, Query
from kairox.runtime.ingest import ingest
from kairox.testing import run
from tests.default_plugins.vector_helpers import (
    ConceptEmbedder,
    as_main_layout,
    build,
    waiting_rows,
)

SHARED = "The traffic was heavy and slow all morning."
DOCS = [
    Document(
        "d1",
        "The physician examined the patient's lungs with care. He listened to her breathing "
        "for a long while before he spoke.",
        title="Clinic",
    ),
    Document("d2", "Waves crashed on the shore of the sea all night long.", title="Coast"),
    Document("d3", f"She drove her car to work along the coast road. {SHARED}", title="Commute"),
]
QUERY = Query("automobile physician sea", k=3)


def _tables(path) -> set[str]:
    db = apsw.Connection(str(path))
    try:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_schema WHERE type='table'")}
    finally:
        db.close()


def _records(tmp_path, docs=DOCS):
    records = tmp_path / "docs.jsonl"
    records.write_text(
        "\n".join(f'{{"id": "{d.id}", "title": "{d.title}", "text": "{d.text}"}}' for d in docs)
    )
    return records


def test_a_passage_is_one_row_of_raw_digests_and_nothing_indexes_them(tmp_path):
    source = build(tmp_path, ConceptEmbedder())
    source.upsert(DOCS)
    db = source._open()._db
    rows = dict(
        (doc_id, (passage, sentences))
        for doc_id, passage, sentences in db.execute("SELECT * FROM kb_texts")
    )
    passage, sentences = rows["d3"]  # two sentences
    assert passage == hashlib.sha256(passage_text(DOCS[2]).encode()).digest()
    assert sentences == b"".join(
        hashlib.sha256(s.encode()).digest()
        for s in ("She drove her car to work along the coast road.", SHARED)
    )
    assert rows["d2"][1] == b""  # one sentence: the passage's vector serves
    indexes = db.execute(
        "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'kb_texts'"
    ).fetchone()[0]
    assert indexes == 0


def test_a_knowledge_base_written_before_is_converted_when_opened_embedding_nothing(tmp_path):
    embedder = ConceptEmbedder()
    source = build(tmp_path, embedder)
    records = _records(tmp_path)
    ingest(source, [records], root=tmp_path)
    token, _ = source._vectors._search_pack()
    expected = run(source.retrieve(QUERY))
    del source
    as_main_layout(tmp_path / "kb.db")
    assert {"kb_passages", "kb_sentences"} <= _tables(tmp_path / "kb.db")
    reader_embedder = ConceptEmbedder()
    reader = build(tmp_path, reader_embedder)
    assert run(reader.retrieve(QUERY)) == expected
    assert reader._vectors._search_pack()[0] == token  # the pack still matches as it is
    tables = _tables(tmp_path / "kb.db")
    assert "kb_texts" in tables and not {"kb_passages", "kb_sentences"} & tables
    db = reader._open()._db
    assert db.execute("PRAGMA freelist_count").fetchone()[0] == 0  # their pages given back
    reader_embedder.embedded.clear()  # the query's
    again = ingest(reader, [records], root=tmp_path)
    assert again.unchanged == 3 and reader_embedder.embedded == []
    assert run(reader.retrieve(QUERY)) == expected


def test_vectors_waiting_in_a_knowledge_base_written_before_are_packed_after(tmp_path):
    """An ingest of the code before cut short: rows of each sentence, vectors waiting."""
    source = build(tmp_path, ConceptEmbedder())
    source.upsert(DOCS)
    expected = run(source.retrieve(QUERY))
    del source
    as_main_layout(tmp_path / "kb.db")
    embedder = ConceptEmbedder()
    reader = build(tmp_path, embedder)
    assert run(reader.retrieve(QUERY)) == expected and reader.unfinished()
    embedder.embedded.clear()  # the query's
    ingest(reader, [_records(tmp_path)], root=tmp_path)
    assert embedder.embedded == [] and waiting_rows(reader) == 0 and not reader.unfinished()
    assert [h.id for h in run(reader.retrieve(QUERY))] == [h.id for h in expected]


def test_a_conversion_cut_short_changes_nothing(tmp_path):
    source = build(tmp_path, ConceptEmbedder())
    source.upsert(DOCS)
    source.finish()
    expected = run(source.retrieve(QUERY))
    del source
    as_main_layout(tmp_path / "kb.db")
    db = apsw.Connection(str(tmp_path / "kb.db"))

    def cut(cursor, sql, bindings):
        if sql.startswith("DROP TABLE kb_passages"):
            raise KeyboardInterrupt  # the process stopped here
        return True

    db.exec_trace = cut
    with pytest.raises(KeyboardInterrupt):
        upgrade(db)
    db.exec_trace = None
    tables = _tables(tmp_path / "kb.db")
    assert {"kb_passages", "kb_sentences"} <= tables and "kb_texts" not in tables
    assert db.execute("SELECT count(*) FROM kb_sentences").fetchone()[0] == 4
    db.close()
    assert run(build(tmp_path, ConceptEmbedder()).retrieve(QUERY)) == expected


def test_a_deleted_passage_takes_the_waiting_vectors_only_it_used(tmp_path):
    source = build(tmp_path, ConceptEmbedder())
    source.upsert(
        [
            Document("a", f"She drove her car to work along the coast road. {SHARED}"),
            Document("b", f"The sea was calm and quiet along the coast. {SHARED}"),
        ]
    )
    assert waiting_rows(source) == 5  # two passages, three distinct sentences
    source.delete(["a"])
    assert waiting_rows(source) == 3  # b, its sentence and the shared one stay
    source.finish()
    assert run(source.retrieve(Query("ocean", k=3)))[0].id == "b"
