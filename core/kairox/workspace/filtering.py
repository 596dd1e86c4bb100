"""Filters over workspace chunks: the metadata every chunk carries, compiled to SQL.

A chunk's filterable metadata is ``path`` (relative, ``/``-separated), ``ext`` (``.py``;
``""`` without one), ``language`` (from the extension, ``text`` when unknown), ``size``
(the file's bytes) and ``mtime`` (the file's modification time, ISO 8601 UTC). The SQL
builds that same object with ``json_object`` from the chunk and file rows, so the one
compiler of :mod:`kairox.retrieval.filters.sql` applies, values bound.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any

from kairox.retrieval.filters import FilterExpr
from kairox.retrieval.filters.sql import compile_sql, register_functions

__all__ = ["LANGUAGES", "chunk_metadata", "filter_sql", "language_of", "register"]

#: Extension -> language, for the ``language`` field.
LANGUAGES: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".ts": "typescript",
    ".tsx": "typescript",
    ".rs": "rust",
    ".go": "go",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".hpp": "cpp",
    ".rb": "ruby",
    ".sh": "shell",
    ".sql": "sql",
    ".md": "markdown",
    ".rst": "restructuredtext",
    ".txt": "text",
    ".toml": "toml",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".json": "json",
    ".html": "html",
    ".css": "css",
}

_METADATA_SQL = (
    "json_object('path', c.relpath, 'ext', kairox_ext(c.relpath), "
    "'language', kairox_language(c.relpath), 'size', f.size, "
    "'mtime', strftime('%Y-%m-%dT%H:%M:%SZ', f.mtime_ns / 1000000000, 'unixepoch'))"
)
#: Join this to a query over ``rag_chunks c`` before using :func:`filter_sql`.
FILES_JOIN = "JOIN rag_files f ON f.workspace = c.workspace AND f.relpath = c.relpath"


def _ext(relpath: str) -> str:
    return PurePosixPath(relpath).suffix


def language_of(relpath: str) -> str:
    """The ``language`` field for a path."""
    return LANGUAGES.get(_ext(relpath).lower(), "text")


def chunk_metadata(relpath: str, size: int, mtime_ns: int) -> dict[str, Any]:
    """The filterable metadata of a chunk of ``relpath``, as hits carry it."""
    mtime = datetime.fromtimestamp(mtime_ns // 1_000_000_000, UTC)
    return {
        "path": relpath,
        "ext": _ext(relpath),
        "language": language_of(relpath),
        "size": size,
        "mtime": mtime.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def register(db: sqlite3.Connection) -> None:
    """The SQL functions :func:`filter_sql` needs, on the index's connection."""
    register_functions(db)
    db.create_function("kairox_ext", 1, _ext, deterministic=True)
    db.create_function("kairox_language", 1, language_of, deterministic=True)


def filter_sql(expr: FilterExpr | None) -> tuple[str, list[Any]]:
    """``(" AND <condition>", params)`` over ``c`` joined with :data:`FILES_JOIN`
    (``("", [])`` for no filter)."""
    if expr is None:
        return "", []
    sql, params = compile_sql(expr, _METADATA_SQL)
    return f" AND {sql}", params
