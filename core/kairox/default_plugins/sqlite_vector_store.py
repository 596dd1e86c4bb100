"""Where a ``sqlite-fts`` knowledge base keeps its vectors: one pack, the store itself.

Each vector is stored once, compact (:data:`~kairox.workspace.vector_pack.FORMATS`:
``float16`` by default, ``int8`` on request), in a pack of files next to the knowledge
base, its rows sorted by text hash with the hashes beside them; the database records
which pack is current (``kb_vector_store``) and whether the pack's index arrays still
match its passages and sentences (``arranged``). Vectors embedded since the last pack
wait as float32 rows of ``kb_embeddings`` (the layout every knowledge base had before,
where the pack was a copy): :func:`write_store` merges the current pack and those rows
into a new pack, written aside and renamed, and only then, in one transaction, records
it and deletes the rows it took. A crash at any point leaves the recorded pack and the
waiting rows as they were.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import apsw
import numpy as np

from kairox.default_plugins.sqlite_vector_keys import REFERENCED, prepare_split
from kairox.workspace.vector_pack import VectorPack
from kairox.workspace.vector_store import StoredVectors, StoreTables, merge_store, unpack_rows
from kairox.workspace.vector_store import reclaim_space as reclaim_free_pages

__all__ = [
    "STORE_SCHEMA",
    "StoredVectors",
    "current_store",
    "reclaim_space",
    "record_store",
    "unarrange",
    "unpack_store",
    "write_store",
]

STORE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS kb_vector_store (embedder TEXT NOT NULL, dim INTEGER NOT NULL,"
    " token TEXT NOT NULL, form TEXT NOT NULL, arranged INTEGER NOT NULL,"
    " PRIMARY KEY (embedder, dim))",
)

# Every text hash a passage or a sentence refers to, once, in the pack's order; the
# waiting rows (the pack's index arrays are arranged from its hashes, not a table).
_TABLES = StoreTables(
    referenced=f"{REFERENCED} ORDER BY 1", embeddings="kb_embeddings", pack_rows=None
)


def current_store(db: apsw.Connection, kind: tuple[str, int]) -> StoredVectors | None:
    row = db.execute(
        "SELECT token, form, arranged FROM kb_vector_store WHERE embedder = ? AND dim = ?", kind
    ).fetchone()
    return None if row is None else StoredVectors(row[0], row[1], bool(row[2]))


def write_store(
    db: apsw.Connection,
    folder: Path,
    key: str,
    kind: tuple[str, int],
    form: str,
    arrange: Callable[[np.ndarray], VectorPack],
) -> str:
    """Merge the recorded pack and the waiting rows into a new pack of ``form``; returns
    its token. Call inside one transaction that also records the token
    (:func:`record_store`), so the count, rows and vectors are one snapshot.

    ``arrange(hashes)`` gives the pack's index arrays from its sorted 32-byte hashes.

    :raises OSError: when the folder cannot be written (nothing is left behind).
    """
    stored = current_store(db, kind)
    recorded = None if stored is None else stored.token
    prepare_split(db)
    return merge_store(db, _TABLES, (folder, key), kind, form, recorded, arrange)


def record_store(db: apsw.Connection, kind: tuple[str, int], token: str, form: str) -> None:
    """Make ``token`` the store and let go of the rows it took (and of the old layout's
    record of a copy); inside the transaction :func:`write_store` ran in."""
    db.execute(
        "INSERT OR REPLACE INTO kb_vector_store VALUES (?, ?, ?, ?, 1)", (*kind, token, form)
    )
    db.execute("DELETE FROM kb_embeddings WHERE embedder = ? AND dim = ?", kind)
    db.execute("DELETE FROM kb_vector_packs WHERE embedder = ? AND dim = ?", kind)


def unpack_store(db: apsw.Connection, folder: Path, key: str, kind: tuple[str, int]) -> bool:
    """Move the pack's vectors back into ``kb_embeddings`` (float32 rows) and forget the
    pack (``vector_pack = false``); inside one transaction. True when there was one.

    :raises OSError: when the recorded pack cannot be read (nothing is changed).
    """
    stored = current_store(db, kind)
    if stored is None:
        return False
    unpack_rows(db, _TABLES, (folder, key), kind, stored.token)
    db.execute("DELETE FROM kb_vector_store WHERE embedder = ? AND dim = ?", kind)
    return True


def reclaim_space(db: apsw.Connection) -> None:
    """Give the knowledge base's free pages back after a merge
    (:func:`kairox.workspace.vector_store.reclaim_space`)."""
    reclaim_free_pages(db, apsw.BusyError)


def unarrange(db: apsw.Connection) -> None:
    """The passages or sentences changed: the pack's index arrays no longer match (its
    vectors stay the store). Inside the transaction that changes them."""
    db.execute("UPDATE kb_vector_store SET arranged = 0")
