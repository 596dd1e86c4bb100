"""A pack that is the store of its vectors, merged with the rows still waiting for it.

Shared by the two places that keep vectors this way: a ``sqlite-fts`` knowledge base
(:mod:`kairox.default_plugins.sqlite_vector_store`) and the workspace index
(:mod:`kairox.workspace.index_packs`). Each vector is stored once, compact
(:data:`~kairox.workspace.vector_pack.FORMATS`), in a pack whose rows are sorted by text
hash with the hashes beside them; vectors embedded since wait as float32 rows of an
embeddings table (``text_hash, embedder, dim, vector``) until :func:`merge_store` writes
the recorded pack and those rows into a new pack. The caller records the new pack and
lets the rows go in the same transaction, so a crash at any point leaves the recorded
pack and the waiting rows as they were. The functions take an apsw or a sqlite3
connection: both have ``execute`` and ``executemany``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kairox.retrieval.vectors import DecodedRows, SentenceVectors
from kairox.support.native_memory import release_mapped
from kairox.workspace.reordered_rows import ReorderedRows
from kairox.workspace.vector_pack import PackWriter, VectorPack, read_pack

__all__ = [
    "FILTERED_SHARE",
    "RECLAIM_SHARE",
    "PackArrays",
    "StoreTables",
    "StoredVectors",
    "digests",
    "find_rows",
    "hex_hashes",
    "in_pack",
    "merge_store",
    "pack_keys",
    "reclaim_space",
    "search_arrays",
    "unpack_rows",
]

#: A filtered search decodes only the rows of the passages it allows (and their
#: sentences') when they are at most this share of the pack's passages; above, it scores
#: from the whole pack decoded (once, and kept), as a small collection's searches do.
FILTERED_SHARE = 0.25

# Vectors merged at a time (1.5 MB of 384-wide float32 vectors).
_BLOCK = 1024


@dataclass(frozen=True)
class StoreTables:
    """Where one store's hashes and waiting rows are.

    :param referenced: a ``SELECT`` of every text hash that needs a vector, each once,
        ``ORDER BY 1``, taking ``params``.
    :param embeddings: the table of waiting rows.
    :param pack_rows: the temporary table :func:`merge_store` fills with each merged
        hash's row in the new pack (``text_hash``, ``row``); ``None``: none (the
        caller arranges from the new pack's hashes).
    """

    referenced: str
    embeddings: str
    pack_rows: str | None
    params: tuple[Any, ...] = ()


@dataclass(frozen=True)
class StoredVectors:
    """The recorded pack of one embedder: its token, format and whether its index arrays
    match the passages (or chunks) and sentences."""

    token: str
    form: str
    arranged: bool


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
    """(ids, their float32 vectors, the sentence vectors or ``None``) of a pack: the
    ids' vectors in memory (every query reads them all), sentences mapped when the pack
    is float32 and decoded into memory when it is compact."""
    matrix = pack.rows(pack.chunk_rows)
    sentences = None
    if sentence_weight and len(pack.owners):
        sentences = SentenceVectors(pack.rows(), pack.owners, unit=True, rows=pack.sentence_rows)
    return pack.ids, matrix, sentences


class PackArrays:
    """What searches read of one pack, decoded as each kind of search needs it.

    An exact search reads every vector: :meth:`exact` decodes them all to float32 once
    (:func:`search_arrays`) and keeps them. A search through the approximate index reads
    its candidates' vectors alone: :meth:`rows` gives the passages' and sentences'
    vectors as :class:`~kairox.retrieval.vectors.DecodedRows`, decoded from the pack's
    mapped codes row by row as they are asked for, so a process that only searches that
    way (or with filters allowing few passages, :data:`FILTERED_SHARE`) never holds the
    collection's float32 matrix.
    """

    def __init__(self, pack: VectorPack, sentence_weight: float) -> None:
        self.ids = pack.ids
        self._pack = pack
        self._sentence_weight = sentence_weight
        self._exact: tuple[np.ndarray, SentenceVectors | None] | None = None
        self._rows: tuple[DecodedRows, SentenceVectors | None] | None = None

    @property
    def decoded(self) -> bool:
        """Whether every vector was decoded (an exact search ran)."""
        return self._exact is not None

    @property
    def decoded_rows(self) -> int:
        """How many rows :meth:`rows` has decoded so far."""
        if self._rows is None:
            return 0
        passages, sentences = self._rows
        return passages.decoded + (
            sentences.matrix.decoded
            if sentences is not None and isinstance(sentences.matrix, DecodedRows)
            else 0
        )

    def exact(self) -> tuple[np.ndarray, SentenceVectors | None]:
        """The passages' float32 matrix and the sentence vectors (or ``None``), every
        vector decoded (on the first call)."""
        if self._exact is None:
            _, matrix, sentences = search_arrays(self._pack, self._sentence_weight)
            self._exact = (matrix, sentences)
        return self._exact

    def rows(self) -> tuple[DecodedRows, SentenceVectors | None]:
        """The passages' vectors (row ``i``: passage ``i``'s) and the sentence vectors
        (or ``None``), each row decoded when read."""
        if self._rows is None:
            pack = self._pack
            dim = pack.vectors.shape[1]
            # Rows that score cheaper than they copy (vectors waiting in memory) say so.
            score = getattr(pack.vectors, "scores", None)
            passages = DecodedRows(
                lambda rows: pack.rows(pack.chunk_rows[rows]),
                (len(pack.chunk_rows), dim),
                None if score is None else lambda rows, q: score(pack.chunk_rows[rows], q),
            )
            sentences = None
            if self._sentence_weight and len(pack.owners):
                every = DecodedRows(pack.rows, (len(pack.vectors), dim), score)
                sentences = SentenceVectors(every, pack.owners, unit=True, rows=pack.sentence_rows)
            self._rows = (passages, sentences)
        return self._rows


def digests(hex_hashes: list[str]) -> np.ndarray:
    """Hex text hashes as the pack's 32-byte digests."""
    return np.array([bytes.fromhex(h) for h in hex_hashes], dtype="S32")


def hex_hashes(pack: VectorPack, rows: slice) -> list[str]:
    """The hex text hashes of a store's pack ``rows``."""
    assert pack.hashes is not None
    # Not bytes(h) of each item: numpy drops a digest's trailing zero bytes.
    raw = np.asarray(pack.hashes[rows]).view(np.uint8).reshape(-1, 32)
    return [row.tobytes().hex() for row in raw]


def in_pack(pack: VectorPack | None, hashes: list[str]) -> np.ndarray:
    """For each hex hash, its row in ``pack`` (whose hashes are sorted), or -1."""
    if pack is None or pack.hashes is None or not hashes:
        return np.full(len(hashes), -1, dtype=np.int64)
    return find_rows(pack.hashes, digests(hashes))


def find_rows(hashes: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """For each 32-byte digest of ``wanted``, its row in the sorted ``hashes`` (a store's
    pack's), or -1."""
    found = np.full(len(wanted), -1, dtype=np.int64)
    if not len(hashes) or not len(wanted):
        return found
    at = np.searchsorted(hashes, wanted)
    inside = at < len(hashes)
    hit = np.zeros(len(wanted), dtype=bool)
    hit[inside] = hashes[at[inside]] == wanted[inside]
    found[hit] = at[hit]
    return found


def _blocks(db: Any, tables: StoreTables, kind: tuple[str, int]) -> Iterator[list[tuple]]:
    """The referenced hashes in order, each with its waiting vector (or ``None``)."""
    rows = db.execute(
        f"SELECT r.text_hash, e.vector FROM ({tables.referenced}) r LEFT JOIN "
        f"{tables.embeddings} e ON e.text_hash = r.text_hash AND e.embedder = ? AND e.dim = ? "
        "ORDER BY r.text_hash",
        (*tables.params, *kind),
    )
    while block := list(itertools.islice(rows, _BLOCK)):
        yield block


def _count(db: Any, tables: StoreTables, kind: tuple[str, int], old: VectorPack | None) -> int:
    """How many referenced hashes have a vector, waiting or in ``old``."""
    rows = db.execute(
        f"SELECT r.text_hash, e.rowid IS NOT NULL FROM ({tables.referenced}) r LEFT JOIN "
        f"{tables.embeddings} e ON e.text_hash = r.text_hash AND e.embedder = ? AND e.dim = ?",
        (*tables.params, *kind),
    )
    count = 0
    while block := list(itertools.islice(rows, _BLOCK * 16)):
        waiting = np.fromiter((w for _, w in block), dtype=bool, count=len(block))
        packed = in_pack(old, [h for (h, w) in block if not w]) >= 0
        count += int(waiting.sum()) + int(packed.sum())
    return count


def merge_store(
    db: Any,
    tables: StoreTables,
    location: tuple[Path, str],
    kind: tuple[str, int],
    form: str,
    recorded: str | None,
    arrange: Callable[[np.ndarray], VectorPack],
) -> str:
    """Merge the pack ``recorded`` (a token, or ``None``) and the waiting rows into a
    new pack of ``form`` in ``location`` (folder, key); returns its token. Call inside
    one transaction that also records the token, so the count, rows and vectors are one
    snapshot.

    Each merged hash's row is put in ``tables.pack_rows`` (when it names one);
    ``arrange(hashes)`` then gives the pack's index arrays, from that table or from the
    new pack's sorted 32-byte ``hashes`` (mapped from its file).

    :raises OSError: when the recorded pack cannot be read or the folder cannot be
        written (nothing is left behind).
    """
    folder, key = location
    dim = kind[1]
    old = None
    if recorded is not None:
        old = read_pack(folder, key, recorded, dim, with_hashes=True)
        if old is None:
            raise OSError(f"the vector pack {recorded} in {folder} cannot be read")
        if isinstance(old.vectors, ReorderedRows):  # read in a pass over every row
            old.vectors.streamed = True
    count = _count(db, tables, kind, old)
    if tables.pack_rows is not None:
        db.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {tables.pack_rows} "
            "(text_hash TEXT PRIMARY KEY, row INTEGER NOT NULL)"
        )
        db.execute(f"DELETE FROM {tables.pack_rows}")
    written = 0
    with PackWriter(folder, key, rows=count, dim=dim, form=form, with_hashes=True) as writer:
        for number, block in enumerate(_blocks(db, tables, kind), start=1):
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
            if tables.pack_rows is not None:
                db.executemany(
                    f"INSERT INTO {tables.pack_rows} VALUES (?, ?)",
                    [(h, written + at) for at, h in enumerate(kept_hashes)],
                )
            written += len(kept)
            if old is not None and not number % 16:
                # The old pack's pages read so far leave the resident set (every 16
                # blocks: its hashes' binary searches read their top pages again after).
                release_mapped(old.vectors, old.scales, old.hashes)
        return writer.finish(arrange(writer.written_hashes()))


def unpack_rows(
    db: Any, tables: StoreTables, location: tuple[Path, str], kind: tuple[str, int], token: str
) -> None:
    """Copy the pack ``token``'s vectors into ``tables.embeddings`` as float32 rows
    (a row already waiting is newer and stays); inside the transaction that forgets it.

    :raises OSError: when the pack cannot be read (nothing is changed).
    """
    folder, key = location
    pack = read_pack(folder, key, token, kind[1], with_hashes=True)
    if pack is None:
        raise OSError(f"the vector pack {token} in {folder} cannot be read")
    if isinstance(pack.vectors, ReorderedRows):  # read in a pass over every row
        pack.vectors.streamed = True
    for start in range(0, len(pack.vectors), _BLOCK):
        hashes = hex_hashes(pack, slice(start, start + _BLOCK))
        vectors = pack.rows(slice(start, start + _BLOCK))
        db.executemany(
            f"INSERT OR IGNORE INTO {tables.embeddings} VALUES (?, ?, ?, ?)",
            [(h, *kind, vectors[n].tobytes()) for n, h in enumerate(hashes)],
        )


#: Free pages above this share of the file are given back after a merge.
RECLAIM_SHARE = 0.2


def reclaim_space(db: Any, busy: type[Exception] | tuple[type[Exception], ...]) -> None:
    """Give the file's free pages back (the rows a new pack took) when they are over
    :data:`RECLAIM_SHARE` of it, so the vectors' bytes count once on disk. A file made
    before incremental vacuum is rewritten once (``VACUUM``, switching it on); outside
    any transaction. Best effort: a file another connection keeps busy (``busy`` is the
    driver's error for it) keeps its pages until the next run."""
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
    except busy:
        return
