"""Rebuild an index written before the ``key`` field into the current layout, once.

The old layout stored every field in Tantivy, so it holds everything needed: each stored
document is read back and written into a fresh index (``<folder>.kairox-upgrading``) with
its original fingerprint, so ``kairox kb ingest`` still skips it. The old index's writer
lock is held throughout, so no write can land in the old copy and be lost. Then two
renames swap the folders (the old one goes to ``<folder>.kairox-before-upgrade`` and is
deleted); :func:`recover`, run on every open, finishes or undoes a swap a crash
interrupted.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from kairox import Document
from kairox_tantivy.engine import WRITER_HEAP_BYTES, TantivyLockedError

__all__ = ["BATCH", "is_legacy", "legacy_schema", "recover", "upgrade"]

#: Documents per commit while rebuilding.
BATCH = 1000


class Rebuilt(Protocol):
    """What the upgrade needs of the fresh index it fills (a
    :class:`~kairox_tantivy.index.TantivyIndex`)."""

    def _write(self, entries: list[tuple[Document, str]]) -> int: ...
    def compact(self) -> bool: ...
    def count(self) -> int: ...
    def close(self) -> None: ...


def legacy_schema(tantivy: ModuleType) -> Any:
    """The schema of kairox-tantivy indexes written before the ``key`` field."""
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("title", stored=True, tokenizer_name="en_stem")
    builder.add_text_field("body", stored=True, tokenizer_name="en_stem")
    builder.add_text_field("uri", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("fingerprint", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("filter", stored=False, tokenizer_name="raw", index_option="basic")
    builder.add_bytes_field("metadata", stored=True, indexed=False)
    return builder.build()


def is_legacy(index: Any, tantivy: ModuleType) -> bool:
    return bool(index.schema == legacy_schema(tantivy))


def _folders(path: Path) -> tuple[Path, Path]:
    return (
        path.with_name(path.name + ".kairox-upgrading"),
        path.with_name(path.name + ".kairox-before-upgrade"),
    )


def recover(path: Path) -> None:
    """Finish or undo a folder swap that a crash interrupted (cheap when there was none)."""
    _fresh, backup = _folders(path)
    if not backup.is_dir():
        return
    if (path / "meta.json").is_file():
        shutil.rmtree(backup, ignore_errors=True)  # swapped; only the old copy was left
    elif not path.exists():
        os.rename(backup, path)  # killed between the renames: the old index comes back


def _first(fields: dict[str, list[Any]], name: str) -> Any:
    values = fields.get(name)
    return values[0] if values else None


def _legacy_entries(searcher: Any, tantivy: ModuleType) -> Iterator[tuple[Document, str]]:
    """Every stored document of an old-layout index, with its stored fingerprint."""
    total = searcher.num_docs
    if total == 0:
        return
    for _score, address in searcher.search(tantivy.Query.all_query(), limit=total).hits:
        fields = searcher.doc(address).to_dict()
        raw = _first(fields, "metadata")
        metadata = json.loads(bytes(raw)) if raw else {}
        doc = Document(
            _first(fields, "id"),
            _first(fields, "body") or "",
            title=_first(fields, "title") or "",
            uri=_first(fields, "uri"),
            metadata=metadata,
        )
        yield doc, _first(fields, "fingerprint") or ""


def upgrade(
    path: Path,
    index: Any,
    tantivy: ModuleType,
    *,
    rebuild: Callable[..., Rebuilt],
) -> None:
    """Rebuild the old-layout ``index`` at ``path`` in place (see the module docstring).

    ``rebuild`` makes the fresh index (:class:`~kairox_tantivy.index.TantivyIndex`, which
    calls this while it opens an old one).
    """
    try:
        lock = index.writer(heap_size=WRITER_HEAP_BYTES)
    except ValueError as exc:
        if "LockBusy" in str(exc):
            raise TantivyLockedError(
                f"the index at {path} needs a one-time upgrade but is being written by "
                "another process (tantivy writer lock held); try again once it finishes"
            ) from exc
        raise
    fresh, backup = _folders(path)
    try:
        shutil.rmtree(fresh, ignore_errors=True)  # an earlier attempt that did not finish
        searcher = index.searcher()
        total = searcher.num_docs
        warnings.warn(
            f"kairox-tantivy: upgrading the index at {path} to the keyed layout (hit text "
            f"in documents.sqlite, faster searches): re-indexing its {total} documents "
            "once, nothing is lost",
            UserWarning,
            stacklevel=4,
        )
        rebuilt = rebuild(fresh, create=True)
        batch: list[tuple[Document, str]] = []
        for entry in _legacy_entries(searcher, tantivy):
            batch.append(entry)
            if len(batch) >= BATCH:
                rebuilt._write(batch)
                batch = []
        rebuilt._write(batch)
        rebuilt.compact()  # batches leave a segment each; one searches faster
        if rebuilt.count() != total:  # pragma: no cover - tantivy lost documents
            raise RuntimeError(f"rebuilt {rebuilt.count()} of {total} documents")
        rebuilt.close()
        del rebuilt
        os.rename(path, backup)
        os.rename(fresh, path)
    finally:
        with contextlib.suppress(Exception):
            lock.rollback()
        lock.wait_merging_threads()  # releases the lock (its file now in the backup)
        del lock
    shutil.rmtree(backup, ignore_errors=True)
