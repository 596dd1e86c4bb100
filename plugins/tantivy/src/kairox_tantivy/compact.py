"""When and how :meth:`kairox_tantivy.index.TantivyIndex.compact` rewrites an index.

The segment sizes come from ``meta.json`` (tantivy's own record of its segments: each
one's ``max_doc`` and deleted count), so deciding costs one small file read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kairox import Document
from kairox_tantivy.engine import TantivyIndexError

if TYPE_CHECKING:
    from kairox_tantivy.index import TantivyIndex

__all__ = ["MAX_DOCS", "SHARE", "rewrite", "segment_sizes", "worth_compacting"]

#: Rewrite when the segments other than the largest hold at least this share of the
#: live documents (so every rewrite follows at least that share of new writes).
SHARE = 0.10
#: Never rewrite more documents than this in one call (about a minute on 2 cores).
MAX_DOCS = 250_000


def segment_sizes(folder: Path) -> list[int]:
    """Live documents per segment, from ``meta.json`` (``[]`` if it cannot be read)."""
    try:
        meta = json.loads((folder / "meta.json").read_text())
        sizes = []
        for segment in meta.get("segments", []):
            deletes = segment.get("deletes") or {}
            sizes.append(int(segment["max_doc"]) - int(deletes.get("num_deleted_docs", 0)))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []
    return sizes


def worth_compacting(folder: Path) -> bool:
    sizes = segment_sizes(folder)
    total = sum(sizes)
    if len(sizes) < 2 or total == 0 or total > MAX_DOCS:
        return False
    return total - max(sizes) >= SHARE * total


def rewrite(index: TantivyIndex, writer: Any, after_commit: list[Callable[[], None]]) -> None:
    """Replace every document through ``writer`` with itself, read back from its row."""
    searcher = index._searcher()
    total = searcher.num_docs
    found = searcher.search(index._tantivy.Query.all_query(), limit=max(total, 1), count=False)
    keys = searcher.fast_field_values("key", [address for _score, address in found.hits])
    rows = index._store.documents(keys)
    if len(rows) != len(keys):  # pragma: no cover - a row lost outside kairox
        raise TantivyIndexError(
            f"{len(keys) - len(rows)} documents of {index.path} have no row in its "
            "documents.sqlite; delete the folder and ingest again"
        )
    # Rows a crash left behind (written, never committed) go with the rewrite.
    after_commit.append(lambda: index._store.keep_only(keys))
    writer.delete_all_documents()  # applies to what is committed; the adds below survive
    for key in keys:
        doc_id, title, body, metadata = rows[key]
        doc = Document(doc_id, body, title=title, metadata=json.loads(metadata))
        writer.add_document(index._document(doc, key, title, body))
