"""A workspace's search vectors packed into files, so a new process loads them at once.

The workspace index keeps every vector as a row of its SQLite database; gathering a
workspace's rows (tens of thousands of sentence vectors) costs a cold search a few
microseconds each. A pack holds the same arrays the index would assemble from those rows
(chunk ids, each chunk's and each sentence's row in one matrix of distinct vectors), as
``.npy`` files memory-mapped on load.

A pack is only ever a copy; its folder and files are owner-only (0700, 0600) whatever the
umask, like the database it copies. The database records which pack (a random token) matches its
current contents; every transaction that changes a workspace's chunks, sentences or
vectors drops that record first, and ``kairox index`` writes a new pack at the end of a
run. A reader that finds no record, or files it cannot read, loads from the database.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kairox.paths import private_file, private_folder

__all__ = [
    "PackWriter",
    "VectorPack",
    "pack_key",
    "pack_size",
    "read_pack",
    "remove_packs",
    "write_pack",
]

_ARRAYS = ("ids", "chunk_rows", "owners", "sentence_rows")


@dataclass(frozen=True)
class VectorPack:
    """Everything a vector search over one workspace and one embedder needs.

    :param ids: chunk ids (``rag_chunks.id``), ascending.
    :param chunk_rows: for each chunk, its row in ``vectors``.
    :param owners: for each sentence, the position of its chunk in ``ids`` (ascending).
    :param sentence_rows: for each sentence, its row in ``vectors``.
    :param vectors: ``(distinct vectors, dim)`` unit float32 rows.
    """

    ids: np.ndarray
    chunk_rows: np.ndarray
    owners: np.ndarray
    sentence_rows: np.ndarray
    vectors: np.ndarray


def pack_key(workspace: str, embedder: str, dim: int) -> str:
    """The file-name stem shared by every pack of one workspace and embedder."""
    digest = hashlib.sha256(f"{workspace}\0{embedder}\0{dim}".encode()).hexdigest()
    return digest[:24]


def _paths(folder: Path, key: str, token: str) -> tuple[Path, Path]:
    return folder / f"{key}-{token}.vectors.npy", folder / f"{key}-{token}.index.npz"


class PackWriter:
    """One new pack, written aside and renamed into place only when both files are whole.

    The vectors are appended in blocks (``add``), so a pack of any size is written
    without holding its matrix in memory; ``finish`` writes the index arrays and returns
    the new token. Leaving the ``with`` block without ``finish`` (or with an exception)
    deletes everything written.

    :raises OSError: when the folder cannot be written.
    """

    def __init__(self, folder: Path, key: str, *, rows: int, dim: int) -> None:
        private_folder(folder)
        self.token = secrets.token_hex(8)
        self._paths = _paths(folder, key, self.token)
        self._aside = tuple(path.with_name(path.name + ".tmp") for path in self._paths)
        self._rows, self._dim, self._written = rows, dim, 0
        self._finished = False
        # The handle outlives this call: __exit__ closes it, whatever happens.
        self._handle = open(private_file(self._aside[0]), "wb")  # noqa: SIM115
        header = {"descr": "<f4", "fortran_order": False, "shape": (rows, dim)}
        try:
            np.lib.format.write_array_header_1_0(self._handle, header)
        except BaseException:
            self.__exit__()
            raise

    def add(self, block: np.ndarray) -> None:
        """Append ``block`` (``(n, dim)`` unit rows) to the vectors."""
        block = np.ascontiguousarray(block, dtype="<f4")
        if block.ndim != 2 or block.shape[1] != self._dim:
            raise ValueError(f"vectors of shape {block.shape}, expected (n, {self._dim})")
        if self._written + len(block) > self._rows:
            raise ValueError(f"more than the {self._rows} vectors this pack was opened for")
        self._handle.write(block.data)
        self._written += len(block)

    def finish(self, pack: VectorPack) -> str:
        """Write the index arrays of ``pack`` (its ``vectors`` are the ones added) and
        move both files into place; returns the token."""
        if self._written != self._rows:
            raise ValueError(f"{self._written} vectors added, {self._rows} expected")
        self._handle.close()
        with open(private_file(self._aside[1]), "wb") as handle:
            np.savez(
                handle, **{name: np.asarray(getattr(pack, name), np.int64) for name in _ARRAYS}
            )
        os.replace(self._aside[0], self._paths[0])
        os.replace(self._aside[1], self._paths[1])
        self._finished = True
        return self.token

    def __enter__(self) -> PackWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        # Also the clean-up of an __init__ that failed after opening the file.
        self._handle.close()
        if not self._finished:
            for path in (*self._aside, *self._paths):
                with contextlib.suppress(OSError):
                    path.unlink()


def write_pack(folder: Path, key: str, pack: VectorPack) -> str:
    """Write ``pack`` (vectors in memory) under a new token and return the token.

    :raises OSError: when the folder cannot be written; nothing is left behind.
    """
    vectors = np.asarray(pack.vectors, dtype=np.float32)
    with PackWriter(folder, key, rows=len(vectors), dim=vectors.shape[1]) as writer:
        writer.add(vectors)
        return writer.finish(pack)


def read_pack(folder: Path, key: str, token: str, dim: int) -> VectorPack | None:
    """The pack ``token`` of ``key``, vectors memory-mapped; ``None`` when its files are
    missing, unreadable or inconsistent (the caller then loads from the database)."""
    vectors_path, index_path = _paths(folder, key, token)
    try:
        vectors = np.load(vectors_path, mmap_mode="r", allow_pickle=False)
        with np.load(index_path, allow_pickle=False) as stored:
            arrays = {name: np.asarray(stored[name], dtype=np.int64) for name in _ARRAYS}
    except (OSError, ValueError, KeyError, EOFError):
        return None
    pack = VectorPack(vectors=vectors, **arrays)
    return pack if _consistent(pack, dim) else None


def _consistent(pack: VectorPack, dim: int) -> bool:
    vectors = pack.vectors
    if vectors.dtype != np.float32 or vectors.ndim != 2 or vectors.shape[1] != dim:
        return False
    if any(getattr(pack, name).ndim != 1 for name in _ARRAYS):
        return False
    if len(pack.chunk_rows) != len(pack.ids) or len(pack.sentence_rows) != len(pack.owners):
        return False
    for rows, limit in (
        (pack.chunk_rows, len(vectors)),
        (pack.sentence_rows, len(vectors)),
        (pack.owners, len(pack.ids)),
    ):
        if len(rows) and (rows.min() < 0 or rows.max() >= limit):
            return False
    return True


def pack_size(folder: Path, key: str, token: str) -> int:
    """Bytes on disk of pack ``token`` (0 for files that are not there)."""
    total = 0
    for path in _paths(folder, key, token):
        with contextlib.suppress(OSError):
            total += path.stat().st_size
    return total


def remove_packs(folder: Path, key: str, *, keep: str | None = None) -> None:
    """Delete the packs of ``key`` other than ``keep`` (best effort: a file another
    process still has mapped may refuse to go on some systems; the next run retries)."""
    if not folder.is_dir():
        return
    for path in folder.glob(f"{key}-*"):
        if keep is not None and path.name.startswith(f"{key}-{keep}."):
            continue
        with contextlib.suppress(OSError):
            path.unlink()
