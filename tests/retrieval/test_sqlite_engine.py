"""SQLite connections for search indexes: parallel-reader configuration, open errors."""

from __future__ import annotations

import apsw
import pytest

from kairox.retrieval import sqlite_engine
from kairox.retrieval.sqlite_engine import connect, enable_wal, parallel_readers


def test_memory_statistics_are_off_so_readers_do_not_share_a_mutex(tmp_path):
    db = connect(tmp_path / "a.db", create=True)
    try:
        db.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
        db.executemany("INSERT INTO t(body) VALUES (?)", [(f"word{i} text",) for i in range(200)])
        assert db.execute("SELECT count(*) FROM t WHERE t MATCH 'text'").fetchone()[0] == 200
        assert parallel_readers() is True
        # With statistics on, SQLite counts every byte it holds (an open connection holds
        # some); off, the counter is never touched.
        assert apsw.status(apsw.SQLITE_STATUS_MEMORY_USED)[0] == 0
    finally:
        db.close()


def test_an_open_apsw_connection_leaves_sqlite_as_it_is(tmp_path):
    # Re-initialising SQLite under someone else's open connection is not allowed.
    other = apsw.Connection(str(tmp_path / "other.db"))
    try:
        assert sqlite_engine._switch_statistics_off() is False
        assert other.execute("SELECT 1").fetchone() == (1,)
    finally:
        other.close()


def test_a_missing_file_is_not_created_unless_asked(tmp_path):
    with pytest.raises(apsw.CantOpenError):
        connect(tmp_path / "missing.db")
    assert not (tmp_path / "missing.db").exists()
    connect(tmp_path / "made.db", create=True).close()
    assert (tmp_path / "made.db").exists()


def test_a_writer_elsewhere_is_waited_for_not_failed(tmp_path):
    path = tmp_path / "busy.db"
    writer = connect(path, create=True)
    writer.execute("CREATE TABLE t(x)")
    reader = connect(path)
    try:
        assert reader.execute("PRAGMA busy_timeout").fetchone() == (5000,)
    finally:
        reader.close()
        writer.close()


def test_new_files_opened_at_once_all_switch_to_wal(tmp_path, all_at_once):
    # The switch is answered "database is locked" at once while another connection is
    # creating tables in the same new file; enable_wal waits its turn instead.
    for attempt in range(40):
        path = tmp_path / f"new-{attempt}.db"

        def open_in_wal(path=path):
            connection = connect(path, create=True)
            enable_wal(connection)
            connection.execute("BEGIN IMMEDIATE; CREATE TABLE IF NOT EXISTS t(x); COMMIT")
            return connection

        connections = all_at_once(*[open_in_wal] * 4)
        try:
            modes = {c.execute("PRAGMA journal_mode").fetchone()[0] for c in connections}
            assert modes == {"wal"}
        finally:
            for connection in connections:
                connection.close()


def test_enable_wal_on_a_file_that_is_not_a_database_raises(tmp_path):
    (tmp_path / "junk.db").write_bytes(b"not sqlite" * 100)
    connection = connect(tmp_path / "junk.db")
    try:
        with pytest.raises(apsw.NotADBError):
            enable_wal(connection)
    finally:
        connection.close()
