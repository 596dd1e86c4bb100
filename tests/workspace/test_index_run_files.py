"""``RunFiles``: the stored rows of walked files and the indexed files a run has not seen."""

from __future__ import annotations

import pytest

from kairox.workspace.index_run_files import RunFiles, StoredFile
from kairox.workspace.index_schema import open_database

WORKSPACE = "/work/space"


@pytest.fixture
def db(database):
    made = open_database(database)
    with made:
        made.executemany(
            "INSERT INTO rag_files VALUES (?, ?, ?, ?, ?)",
            [(WORKSPACE, f"f{n}.txt", f"hash{n}", n, 1000 + n) for n in range(5)]
            + [("/other", "f0.txt", "elsewhere", 9, 9)],
        )
        made.execute("INSERT INTO rag_file_chunking VALUES (?, 'f1.txt', 'lines')", (WORKSPACE,))
    yield made
    made.close()


def test_stored_rows_are_looked_up_for_the_paths_asked_only(db):
    with RunFiles(db, WORKSPACE) as run:
        found = run.stored(["f0.txt", "f1.txt", "new.txt"])
    assert found == {
        "f0.txt": StoredFile("hash0", 0, 1000, None),
        "f1.txt": StoredFile("hash1", 1, 1001, "lines"),
    }


def test_unseen_files_come_a_page_at_a_time_and_survive_deletion_between_pages(db):
    with RunFiles(db, WORKSPACE) as run:
        run.see(["f1.txt", "f3.txt", "f3.txt"])
        pages = []
        for page in run.unseen(2):
            pages.append(page)
            with db:
                db.executemany(
                    "DELETE FROM rag_files WHERE workspace = ? AND relpath = ?",
                    [(WORKSPACE, relpath) for relpath in page],
                )
    assert pages == [["f0.txt", "f2.txt"], ["f4.txt"]]
    assert db.execute("SELECT count(*) FROM rag_files").fetchone()[0] == 3


def test_a_new_run_starts_with_nothing_seen(db):
    with RunFiles(db, WORKSPACE) as run:
        run.see(["f0.txt"])
    with RunFiles(db, WORKSPACE) as run:
        assert list(run.unseen(10)) == [[f"f{n}.txt" for n in range(5)]]
