"""A ``sqlite-fts`` knowledge base whose recorded vector pack is gone (the file copied
without its ``.vectors`` folder, or an int8 pack's partition files deleted: they held
its only copy of the vectors): said once, and the next ingest embeds the documents
again and writes a complete pack, counting them as re-embedded, not added."""

from __future__ import annotations

import shutil

import pytest

from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.retrieval import Query
from kairox.retrieval.vectors import embed_unit
from kairox.runtime.ingest import ingest
from kairox.testing import run
from kairox.workspace.reordered_rows import ReorderedRows
from tests.default_plugins.vector_helpers import build, passages

pytest.importorskip("numkong")

COUNT = 400
QUERIES = ("sea waves", "physician clinic", "note 77", "glad ending 12")


@pytest.fixture
def embedder():
    return HashingEmbedder(dim=64)


def opened(tmp_path, embedder, path):
    """A partitioned int8 knowledge base (a new process's view of it)."""
    source = build(
        tmp_path, embedder, path=path, ann_threshold=50, vector_format="int8", sentence_weight=0.5
    )
    source._open(create=True)
    source._vectors._index.partition_from = 300
    return source


def ingested(source, tmp_path):
    records = tmp_path / "docs.jsonl"
    records.write_text(passages(COUNT))
    return ingest(source, [records], root=tmp_path)


def top_hits(source) -> list[list[tuple[str, float]]]:
    return [
        [(hit.id, hit.score) for hit in run(source.retrieve(Query(text, k=5)))] for text in QUERIES
    ]


def vector_hits(source, embedder) -> list[list[int]]:
    vectors = source._vectors
    return [[row for row, _ in vectors.search(embed_unit(embedder, [t])[0], 5)] for t in QUERIES]


def lose_and_rebuild(tmp_path, embedder, capsys, damage) -> None:
    first = opened(tmp_path, embedder, "kb.db")
    ingested(first, tmp_path)
    assert list((tmp_path / "kb.db.vectors").glob("*.ivf-codes.npy"))
    before_hits, before_vectors = top_hits(first), vector_hits(first, embedder)
    assert all(before_vectors)
    first._open().close()
    path = damage()
    capsys.readouterr()

    source = opened(tmp_path, embedder, path)
    stats = ingested(source, tmp_path)
    assert (stats.added, stats.updated, stats.unchanged, stats.reembedded) == (0, 0, 0, COUNT)
    warned = capsys.readouterr().err
    assert warned.count("warning: the vector pack") == 1 and ".vectors" in warned

    fresh = opened(tmp_path, embedder, path)  # a new process: the new pack, partitioned
    token, pack = fresh._vectors._search_pack()
    assert token is not None and isinstance(pack.vectors, ReorderedRows)
    assert not fresh._vectors.unfinished()  # no vectors left waiting as rows
    assert vector_hits(fresh, embedder) == before_vectors
    assert top_hits(fresh) == before_hits
    again = ingested(fresh, tmp_path)
    assert (again.added, again.reembedded, again.unchanged) == (0, 0, COUNT)
    assert "warning" not in capsys.readouterr().err


def test_a_file_copied_without_its_vectors_folder_gets_a_new_pack(tmp_path, embedder, capsys):
    def copy_file_only():
        shutil.copy(tmp_path / "kb.db", tmp_path / "copy.db")
        return "copy.db"

    lose_and_rebuild(tmp_path, embedder, capsys, copy_file_only)


def test_an_int8_pack_whose_partition_files_are_deleted_gets_a_new_pack(tmp_path, embedder, capsys):
    def delete_partition():
        for path in (tmp_path / "kb.db.vectors").glob("*.ivf-*"):
            path.unlink()
        return "kb.db"

    lose_and_rebuild(tmp_path, embedder, capsys, delete_partition)


def test_with_packs_switched_off_the_lost_pack_is_forgotten_and_rows_kept(
    tmp_path, embedder, capsys
):
    ingested(opened(tmp_path, embedder, "kb.db"), tmp_path)
    shutil.copy(tmp_path / "kb.db", tmp_path / "copy.db")
    rows = build(
        tmp_path, embedder, path="copy.db", vector_format="int8", sentence_weight=0.5,
        vector_pack=False,
    )  # fmt: skip
    stats = ingested(rows, tmp_path)
    assert (stats.added, stats.reembedded) == (0, COUNT)
    assert "warning: the vector pack" in capsys.readouterr().err
    assert not rows._vectors.unfinished()  # no record of a pack left to unpack
    assert not list((tmp_path / "copy.db.vectors").glob("*.npy"))
    assert vector_hits(rows, embedder)[0]
