"""Where each workspace chunk lies in its file (lines, symbol) and how the file was cut.

Two tables beside ``rag_chunks`` (schema version 4 of the workspace index):
``rag_chunk_lines`` gives each chunk its 1-based line range, symbol path and language, and
for a converted document (a PDF) the labels of where it lies (``page``, ``page_end``,
``heading``; its lines are 0 then: lines of extracted text are no place in the file);
``rag_file_chunking`` records which chunker cut each file (``lines``, or
``syntax:<language>:<version>``), so that a file indexed before line ranges existed, or before its
grammar was installed, is cut again on the next ``kairox index`` even if it did not change.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any

from kairox.workspace.grammars import language_of, load_parser

#: Bumped when syntax chunks change shape, so ``kairox index`` cuts code files again.
SYNTAX_CHUNKER_VERSION = 3

__all__ = [
    "LINE_SCHEMA",
    "chunker_for",
    "delete_file_lines",
    "insert_lines",
    "line_metadata",
]

LINE_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS rag_chunk_lines (
    chunk_id INTEGER PRIMARY KEY,
    line_start INTEGER NOT NULL,
    line_end INTEGER NOT NULL,
    symbol TEXT,
    language TEXT,
    labels TEXT NOT NULL DEFAULT ''
)""",
    """CREATE TABLE IF NOT EXISTS rag_file_chunking (
    workspace TEXT NOT NULL,
    relpath TEXT NOT NULL,
    chunker TEXT NOT NULL,
    PRIMARY KEY (workspace, relpath)
)""",
)


def chunker_for(relpath: str, syntax: bool) -> str:
    """The chunker a file gets now: ``syntax:<language>`` when its grammar loads."""
    language = language_of(relpath) if syntax else None
    if language and load_parser(language) is not None:
        return f"syntax:{language}:{SYNTAX_CHUNKER_VERSION}"
    return "lines"


def insert_lines(
    db: sqlite3.Connection,
    workspace: str,
    relpath: str,
    chunker: str,
    rows: Iterable[tuple[int | None, int, int, str | None, str | None, str]],
) -> None:
    """Record ``(chunk_id, line_start, line_end, symbol, language, labels)`` rows (labels:
    a JSON object or ``""``) and the chunker."""
    db.executemany("INSERT OR REPLACE INTO rag_chunk_lines VALUES (?, ?, ?, ?, ?, ?)", rows)
    db.execute(
        "INSERT OR REPLACE INTO rag_file_chunking VALUES (?, ?, ?)", (workspace, relpath, chunker)
    )


def delete_file_lines(db: sqlite3.Connection, workspace: str, relpath: str) -> None:
    """Forget a file's line rows (call before its ``rag_chunks`` rows are deleted)."""
    key = (workspace, relpath)
    db.execute(
        "DELETE FROM rag_chunk_lines WHERE chunk_id IN "
        "(SELECT id FROM rag_chunks WHERE workspace=? AND relpath=?)",
        key,
    )
    db.execute("DELETE FROM rag_file_chunking WHERE workspace=? AND relpath=?", key)


def line_metadata(db: sqlite3.Connection, chunk_ids: list[int]) -> Mapping[int, dict[str, Any]]:
    """Hit metadata (``line_start``, ``line_end``, ``symbol``/``language`` and labels such
    as ``page`` when known)."""
    if not chunk_ids:
        return {}
    marks = ",".join("?" * len(chunk_ids))
    found: dict[int, dict[str, Any]] = {}
    for chunk_id, first, last, symbol, language, labels in db.execute(
        f"SELECT chunk_id, line_start, line_end, symbol, language, labels FROM rag_chunk_lines "
        f"WHERE chunk_id IN ({marks})",
        chunk_ids,
    ):
        meta: dict[str, Any] = json.loads(labels) if labels else {}
        if first > 0:
            meta.update(line_start=first, line_end=last)
        if symbol:
            meta["symbol"] = symbol
        if language:
            meta["language"] = language
        found[chunk_id] = meta
    return found
