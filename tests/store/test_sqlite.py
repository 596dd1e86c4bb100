"""The shared SQLite plumbing: component schema versions and their migrations."""

from __future__ import annotations

import sqlite3

import pytest

from kairox.store.sqlite import ensure_component_schema

V1 = ("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)",)
V3 = ("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, text TEXT, tag TEXT, seen INT)",)
STEPS = {
    2: ("ALTER TABLE notes ADD COLUMN tag TEXT NOT NULL DEFAULT 'old'",),
    3: ("ALTER TABLE notes ADD COLUMN seen INT NOT NULL DEFAULT 0",),
}


def version(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT version FROM kairox_schema WHERE component = 'notes'").fetchone()[0]


def test_each_step_from_the_stored_version_runs_once_in_order(tmp_path):
    conn = sqlite3.connect(tmp_path / "kairox.db", isolation_level=None)
    ensure_component_schema(conn, "notes", 1, V1)
    conn.execute("INSERT INTO notes(text) VALUES ('kept')")
    ensure_component_schema(conn, "notes", 3, V3, STEPS)
    assert conn.execute("SELECT text, tag, seen FROM notes").fetchall() == [("kept", "old", 0)]
    assert version(conn) == 3
    ensure_component_schema(conn, "notes", 3, V3, STEPS)  # nothing left to run
    # A fresh database is created at the new version directly, without the steps.
    fresh = sqlite3.connect(tmp_path / "fresh.db", isolation_level=None)
    ensure_component_schema(fresh, "notes", 3, V3, STEPS)
    assert version(fresh) == 3


def test_a_failed_step_leaves_the_tables_as_they_were(tmp_path):
    conn = sqlite3.connect(tmp_path / "kairox.db", isolation_level=None)
    ensure_component_schema(conn, "notes", 1, V1)
    conn.execute("INSERT INTO notes(text) VALUES ('kept')")
    broken = {**STEPS, 3: ("ALTER TABLE no_such_table ADD COLUMN x INT",)}
    with pytest.raises(sqlite3.OperationalError, match="no_such_table"):
        ensure_component_schema(conn, "notes", 3, V3, broken)
    columns = [row[1] for row in conn.execute("PRAGMA table_info(notes)")]
    assert columns == ["id", "text"] and version(conn) == 1
