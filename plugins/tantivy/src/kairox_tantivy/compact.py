"""When :meth:`kairox_tantivy.index.TantivyIndex.compact` rewrites an index (the index
itself does it, from its documents' rows).

The segment sizes come from ``meta.json`` (tantivy's own record of its segments: each
one's ``max_doc`` and deleted count), so deciding costs one small file read.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["MAX_DOCS", "SHARE", "segment_sizes", "worth_compacting"]

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
