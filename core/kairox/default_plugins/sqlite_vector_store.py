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

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import apsw
import numpy as np

from kairox.retrieval.vectors import SentenceVectors
from kairox.support.native_memory import release_mapped
from kairox.workspace.vector_pack import PackWriter, VectorPack, read_pack

__all__ = [
    "STORE_SCHEMA",
    "StoredVectors",
    "current_store",
    "digests",
    "in_pack",
    "pack_keys",
    "reclaim_space",
    "record_store",
    "search_arrays",
    "unarrange",
    "unpack_store",
    "write_store",
]

STORE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS kb_vector_store (embedder TEXT NOT NULL, dim INTEGER NOT NULL,"
    " token TEXT NOT NULL, form TEXT NOT NULL, arranged INTEGER NOT NULL,"
    " PRIMARY KEY (embedder, dim))",
)

# Vectors merged at a time (1.5 MB of 384-wide float32 vectors).
_BLOCK = 1024

# Every text hash a passage or a sentence refers to, once, in the pack's order.
_REFERENCED = (
    "SELECT text_hash FROM kb_passages UNION SELECT text_hash FROM kb_sentences ORDER BY 1"
)


@dataclass(frozen=True)
class StoredVectors:
    """The recorded pack of one embedder: its token, format and whether its index arrays
    match the passages and sentences."""

    token: str
    form: str
    arranged: bool


def current_store(db: apsw.Connection, kind: tuple[str, int]) -> StoredVectors | None:
    row = db.execute(
        "SELECT token, form, arranged FROM kb_vector_store WHERE embedder = ? AND dim = ?", kind
    ).fetchone()
    return None if row is None else StoredVectors(row[0], row[1], bool(row[2]))


def pack_keys(pack: VectorPack) -> np.ndarray:
    """The approximate index's key of each row of a store's pack (as
    :func:`kairox.retrieval.ann.keys_of` makes them from the hex hashes: the digest's
    first 64 bits), read a block at a time (the mapped hashes' pages handed back)."""
    assert pack.hashes is not None
    keys = np.empty(len(pack.hashes), dtype=np.uint64)
    for start in range(0, len(keys), _BLOCK * 16):
        block = np.asarray(pack.hashes[start : start + _BLOCK * 16])
        first = np.ascontiguousarray(block.view(np.uint8).reshape(-1, 32)[:, :8])
        keys[start : start + len(block)] = first.view(">u8").reshape(-1)
        release_mapped(pack.hashes)
    return keys


def search_arrays(
    pack: VectorPack, sentence_weight: float
) -> tuple[np.ndarray, np.ndarray, SentenceVectors | None]:
    """(passage ids, their float32 vectors, the sentence vectors or ``None``) of a pack:
    passages in memory (every query reads them all), sentences mapped when the pack is
    float32 and decoded into memory when it is compact."""
    matrix = pack.rows(pack.chunk_rows)
    sentences = None
    if sentence_weight and len(pack.owners):
        sentences = SentenceVectors(pack.rows(), pack.owners, unit=True, rows=pack.sentence_rows)
    return pack.ids, matrix, sentences


def digests(hex_hashes: list[str]) -> np.ndarray:
    """Hex text hashes as the pack's 32-byte digests."""
    return np.array([bytes.fromhex(h) for h in hex_hashes], dtype="S32")


def in_pack(pack: VectorPack | None, hex_hashes: list[str]) -> np.ndarray:
    """For each hash, its row in ``pack`` (whose hashes are sorted), or -1."""
    found = np.full(len(hex_hashes), -1, dtype=np.int64)
    if pack is None or pack.hashes is None or not len(pack.hashes) or not hex_hashes:
        return found
    wanted = digests(hex_hashes)
    at = np.searchsorted(pack.hashes, wanted)
    inside = at < len(pack.hashes)
    hit = np.zeros(len(wanted), dtype=bool)
    hit[inside] = pack.hashes[at[inside]] == wanted[inside]
    found[hit] = at[hit]
    return found


def _blocks(db: apsw.Connection, kind: tuple[str, int]) -> Iterator[list[tuple[str, bytes]]]:
    """The referenced hashes in order, each with its waiting vector (or ``None``)."""
    rows = db.execute(
        f"SELECT r.text_hash, e.vector FROM ({_REFERENCED}) r LEFT JOIN kb_embeddings e "
        "ON e.text_hash = r.text_hash AND e.embedder = ? AND e.dim = ? ORDER BY r.text_hash",
        kind,
    )
    while block := list(itertools.islice(rows, _BLOCK)):
        yield block


def _count(db: apsw.Connection, kind: tuple[str, int], old: VectorPack | None) -> int:
    """How many referenced hashes have a vector, waiting or in ``old``."""
    rows = db.execute(
        f"SELECT r.text_hash, e.rowid IS NOT NULL FROM ({_REFERENCED}) r LEFT JOIN "
        "kb_embeddings e ON e.text_hash = r.text_hash AND e.embedder = ? AND e.dim = ?",
        kind,
    )
    count = 0
    while block := list(itertools.islice(rows, _BLOCK * 16)):
        waiting = np.fromiter((w for _, w in block), dtype=bool, count=len(block))
        packed = in_pack(old, [h for (h, w) in block if not w]) >= 0
        count += int(waiting.sum()) + int(packed.sum())
    return count


def write_store(
    db: apsw.Connection,
    folder: Path,
    key: str,
    kind: tuple[str, int],
    form: str,
    arrange: Callable[[], VectorPack],
) -> tuple[str, VectorPack | None]:
    """Merge the recorded pack and the waiting rows into a new pack of ``form``; returns
    its token and the pack it replaces. Call inside one transaction that also records
    the token (:func:`record_store`), so the count, rows and vectors are one snapshot.

    Each merged hash's row is put in the temp table ``kb_pack_rows``; ``arrange()`` then
    gives the pack's index arrays from it.

    :raises OSError: when the folder cannot be written (nothing is left behind).
    """
    dim = kind[1]
    stored = current_store(db, kind)
    old = None
    if stored is not None:
        old = read_pack(folder, key, stored.token, dim, with_hashes=True)
        if old is None:
            raise OSError(f"the vector pack {stored.token} in {folder} cannot be read")
    count = _count(db, kind, old)
    db.execute(
        "CREATE TEMP TABLE IF NOT EXISTS kb_pack_rows "
        "(text_hash TEXT PRIMARY KEY, row INTEGER NOT NULL)"
    )
    db.execute("DELETE FROM kb_pack_rows")
    written = 0
    with PackWriter(folder, key, rows=count, dim=dim, form=form, with_hashes=True) as writer:
        for number, block in enumerate(_blocks(db, kind), start=1):
            hashes = [h for h, _ in block]
            rows = in_pack(old, hashes)
            have = np.array([v is not None for _, v in block], dtype=bool) | (rows >= 0)
            if not have.any():
                continue
            vectors = np.empty((int(have.sum()), dim), dtype=np.float32)
            kept = [n for n in range(len(block)) if have[n]]
            for at, n in enumerate(kept):
                vector = block[n][1]
                if vector is not None:  # a waiting row is newer than the pack's
                    vectors[at] = np.frombuffer(vector, dtype=np.float32)
            from_pack = [at for at, n in enumerate(kept) if block[n][1] is None]
            if from_pack:
                assert old is not None  # a row without a waiting vector is in the pack
                vectors[from_pack] = old.rows(rows[[kept[at] for at in from_pack]])
            kept_hashes = [hashes[n] for n in kept]
            writer.add(vectors, digests(kept_hashes))
            db.executemany(
                "INSERT INTO kb_pack_rows VALUES (?, ?)",
                [(h, written + at) for at, h in enumerate(kept_hashes)],
            )
            written += len(kept)
            if old is not None and not number % 16:
                # The old pack's pages read so far leave the resident set (every 16
                # blocks: its hashes' binary searches read their top pages again after).
                release_mapped(old.vectors, old.scales, old.hashes)
        return writer.finish(arrange()), old


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
    pack = read_pack(folder, key, stored.token, kind[1], with_hashes=True)
    if pack is None:
        raise OSError(f"the vector pack {stored.token} in {folder} cannot be read")
    for start in range(0, len(pack.vectors), _BLOCK):
        assert pack.hashes is not None
        # Not bytes(h) of each item: numpy drops a digest's trailing zero bytes.
        raw = np.asarray(pack.hashes[start : start + _BLOCK]).view(np.uint8).reshape(-1, 32)
        hashes = [row.tobytes().hex() for row in raw]
        vectors = pack.rows(slice(start, start + _BLOCK))
        db.executemany(
            "INSERT OR IGNORE INTO kb_embeddings VALUES (?, ?, ?, ?)",
            [(h, *kind, vectors[n].tobytes()) for n, h in enumerate(hashes)],
        )
    db.execute("DELETE FROM kb_vector_store WHERE embedder = ? AND dim = ?", kind)
    return True


#: Free pages above this share of the file are given back after an ingest's end.
RECLAIM_SHARE = 0.2


def reclaim_space(db: apsw.Connection) -> None:
    """Give the file's free pages back (the rows a new pack took) when they are over
    :data:`RECLAIM_SHARE` of it, so the vectors' bytes count once on disk. A file made
    before incremental vacuum is rewritten once (``VACUUM``, switching it on); outside
    any transaction. Best effort: a busy file keeps its pages until the next run."""
    free = db.execute("PRAGMA freelist_count").fetchone()[0]
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    if not pages or free < RECLAIM_SHARE * pages:
        return
    try:
        if db.execute("PRAGMA auto_vacuum").fetchone()[0] == 2:
            db.execute("PRAGMA incremental_vacuum").fetchall()
        else:
            db.execute("PRAGMA auto_vacuum = INCREMENTAL")
            db.execute("VACUUM")
        # The pages moved went through the log: empty it, or it keeps their size.
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except apsw.BusyError:
        return


def unarrange(db: apsw.Connection) -> None:
    """The passages or sentences changed: the pack's index arrays no longer match (its
    vectors stay the store). Inside the transaction that changes them."""
    db.execute("UPDATE kb_vector_store SET arranged = 0")
