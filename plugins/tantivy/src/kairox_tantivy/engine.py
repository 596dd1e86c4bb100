"""tantivy as every module of this plugin meets it: its lazy import, the errors of an
index, the schema and query analyzer of the layout :mod:`kairox_tantivy.index` describes,
and the writer's memory budget.

:mod:`kairox_tantivy.index` (the index), :mod:`kairox_tantivy.compact` and
:mod:`kairox_tantivy.upgrade` (which rewrite one) all import from here, so none of them
needs another's module to raise an index error or open a writer.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from kairox import BackendError, LazyImport

__all__ = [
    "INSTALL_HINT",
    "TANTIVY",
    "WRITER_HEAP_BYTES",
    "TantivyIndexError",
    "TantivyLockedError",
    "build_analyzer",
    "build_schema",
    "checked_is_file",
    "load_tantivy",
]

#: The writer's total indexing memory budget, split between its threads.
WRITER_HEAP_BYTES = 128_000_000

INSTALL_HINT = "pip install kairox-tantivy (or pip install tantivy)"


class TantivyIndexError(BackendError):
    """The index directory is missing, unreadable, or not a kairox-tantivy index."""


class TantivyLockedError(TantivyIndexError):
    """Another writer (another process, or another index object) holds the writer lock."""


TANTIVY = LazyImport("tantivy", needed_by="the tantivy knowledge-base kind", install=INSTALL_HINT)


def load_tantivy() -> ModuleType:
    """Import tantivy-py, or raise an ImportError that says what to install."""
    return TANTIVY.load()


def checked_is_file(path: Path) -> bool:
    """``path.is_file()``, but an unreadable folder is a clear error, not a traceback."""
    try:
        return path.is_file()
    except OSError as exc:
        raise TantivyIndexError(
            f"cannot read the index folder {path.parent}: {exc.strerror or exc}. Check its "
            "permissions, or correct `index_dir`."
        ) from exc


def build_schema(tantivy: ModuleType) -> Any:
    """The schema of the current layout (the fields :mod:`kairox_tantivy.index` lists)."""
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=False, tokenizer_name="raw", index_option="basic")
    builder.add_unsigned_field("key", stored=False, indexed=False, fast=True)
    builder.add_text_field("title", stored=False, tokenizer_name="en_stem")
    builder.add_text_field("body", stored=False, tokenizer_name="en_stem")
    builder.add_text_field("filter", stored=False, tokenizer_name="raw", index_option="basic")
    return builder.build()


def build_analyzer(tantivy: ModuleType) -> Any:
    """The query-side twin of tantivy's built-in ``en_stem`` tokenizer."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )
