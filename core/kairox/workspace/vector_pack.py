"""Search vectors packed into files, so a new process loads them at once.

Gathering vectors from SQLite rows (tens of thousands of sentence vectors) costs a cold
search a few microseconds each. A pack holds the arrays a search needs (ids, each id's and
each sentence's row in one matrix of distinct vectors) as ``.npy`` files memory-mapped on
load.

A pack is the store of its vectors (:mod:`kairox.workspace.vector_store`: a workspace
index's, and a ``sqlite-fts`` knowledge base's), kept compact (:data:`FORMATS`: float16,
or int8 with one scale a row) with each row's text hash beside them; the database records
which pack (a random token) is current. An index written before that kept a float32 pack
as a copy of its rows (no hashes), read until its next run converts it. The folder and
files are owner-only (0700, 0600) whatever the umask, like the database beside them. A
reader that finds files it cannot read falls back on what the database holds.

An int8 pack partitioned by its approximate index (:mod:`kairox.retrieval.ann_ivf`) hands
its codes over to the partition (:func:`hand_over_vectors`): the partition keeps them
cluster by cluster (``ivf-codes.npy``) with each stored row's pack row (``ivf-order.npy``),
and the pack's own ``vectors.npy`` goes, so the codes are on disk once. The pack then reads
its rows through that order (:class:`ReorderedRows`); everything else stays in the pack's
own order (rows sorted by text hash).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from kairox.support.native_memory import read_released
from kairox.support.paths import private_file, private_folder
from kairox.workspace.reordered_rows import ReorderedRows

__all__ = [
    "FORMATS",
    "PackWriter",
    "VectorPack",
    "adopt_pack",
    "decode",
    "encode",
    "hand_over_vectors",
    "pack_key",
    "pack_size",
    "read_pack",
    "remove_packs",
    "write_pack",
]

_ARRAYS = ("ids", "chunk_rows", "owners", "sentence_rows")

#: How a pack may store its vectors, and the numpy type of each: ``float32`` as made,
#: ``float16`` (half the bytes; a cosine moves by about 1e-4), ``int8`` (a quarter, plus a
#: float32 scale a row: each row is rounded to 255 levels of its largest component).
FORMATS = {"float32": "<f4", "float16": "<f2", "int8": "i1"}
_INT8_LEVELS = 127.0
# Rows compared when a pack hands its codes over.
_CHECK_ROWS = 4_096


def encode(block: np.ndarray, form: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Unit float32 rows in the stored ``form``: (codes, each row's scale or ``None``)."""
    block = np.asarray(block, dtype=np.float32)
    if form != "int8":
        return np.ascontiguousarray(block, dtype=FORMATS[form]), None
    peak = np.abs(block).max(axis=1) if block.shape[1] else np.zeros(len(block), np.float32)
    scales = (peak / _INT8_LEVELS).astype(np.float32)
    safe = np.where(scales > 0, scales, 1.0)[:, None]
    codes = np.clip(np.rint(block / safe), -_INT8_LEVELS, _INT8_LEVELS).astype(np.int8)
    return codes, scales


def decode(codes: np.ndarray, scales: np.ndarray | None = None) -> np.ndarray:
    """Stored rows back as float32 (a float32 array is returned as it is, not copied)."""
    if scales is None:
        return np.asarray(codes, dtype=np.float32)
    # One pass, cast as it multiplies: no float32 copy of the codes beside the result.
    return np.multiply(codes, np.asarray(scales, dtype=np.float32)[:, None], dtype=np.float32)


@dataclass(frozen=True)
class VectorPack:
    """Everything a vector search over one workspace and one embedder needs.

    :param ids: chunk ids (``rag_chunks.id``), ascending.
    :param chunk_rows: for each chunk, its row in ``vectors``.
    :param owners: for each sentence, the position of its chunk in ``ids`` (ascending).
    :param sentence_rows: for each sentence, its row in ``vectors``.
    :param vectors: ``(distinct vectors, dim)`` unit rows, float32 or as stored
        (:data:`FORMATS`; :meth:`rows` gives float32); an int8 pack's handed over to its
        partition: :class:`ReorderedRows`.
    :param scales: each row's scale (``int8`` packs only).
    :param hashes: each row's text hash as 32 raw bytes (packs that are a store only).
    """

    ids: np.ndarray
    chunk_rows: np.ndarray
    owners: np.ndarray
    sentence_rows: np.ndarray
    vectors: np.ndarray | ReorderedRows
    scales: np.ndarray | None = None
    hashes: np.ndarray | None = None

    def rows(self, which: np.ndarray | slice = slice(None)) -> np.ndarray:
        """The vectors ``which`` as float32 rows (a float32 pack's mapped rows as they are
        for a slice; a fancy index copies)."""
        scales = None if self.scales is None else self.scales[which]
        return decode(self.vectors[which], scales)


def pack_key(workspace: str, embedder: str, dim: int) -> str:
    """The file-name stem shared by every pack of one workspace and embedder."""
    digest = hashlib.sha256(f"{workspace}\0{embedder}\0{dim}".encode()).hexdigest()
    return digest[:24]


def _paths(folder: Path, key: str, token: str) -> tuple[Path, Path]:
    return folder / f"{key}-{token}.vectors.npy", folder / f"{key}-{token}.index.npz"


def _extra_paths(folder: Path, key: str, token: str) -> tuple[Path, Path]:
    return folder / f"{key}-{token}.scales.npy", folder / f"{key}-{token}.hashes.npy"


def _reordered_paths(folder: Path, key: str, token: str) -> tuple[Path, Path]:
    """The partition's codes and order (:mod:`kairox.retrieval.ann_ivf` names them so)."""
    return folder / f"{key}-{token}.ivf-codes.npy", folder / f"{key}-{token}.ivf-order.npy"


class PackWriter:
    """One new pack, written aside and renamed into place only when both files are whole.

    The vectors are appended in blocks (``add``), so a pack of any size is written
    without holding its matrix in memory; ``finish`` writes the index arrays and returns
    the new token. Leaving the ``with`` block without ``finish`` (or with an exception)
    deletes everything written.

    :raises OSError: when the folder cannot be written.
    """

    def __init__(
        self,
        folder: Path,
        key: str,
        *,
        rows: int,
        dim: int,
        form: str = "float32",
        with_hashes: bool = False,
    ) -> None:
        if form not in FORMATS:
            raise ValueError(f"unknown vector format {form!r}; one of {', '.join(FORMATS)}")
        private_folder(folder)
        self.token = secrets.token_hex(8)
        self._paths = _paths(folder, key, self.token) + _extra_paths(folder, key, self.token)
        self._aside = tuple(path.with_name(path.name + ".tmp") for path in self._paths)
        self._rows, self._dim, self._written = rows, dim, 0
        self._form, self._with_hashes = form, with_hashes
        self._finished = False
        # Each file streamed as rows come (scales and hashes too: 4 and 32 bytes a row
        # add up over millions of sentences). The handles outlive this call: __exit__
        # closes them, whatever happens.
        headers = {0: (FORMATS[form], (rows, dim))}
        if form == "int8":
            headers[2] = ("<f4", (rows,))
        if with_hashes:
            headers[3] = ("|S32", (rows,))
        self._handles: dict[int, BinaryIO] = {}
        try:
            for at, (descr, shape) in headers.items():
                handle = open(private_file(self._aside[at]), "wb")  # noqa: SIM115
                self._handles[at] = handle
                header = {"descr": descr, "fortran_order": False, "shape": shape}
                np.lib.format.write_array_header_1_0(handle, header)
        except BaseException:
            self.__exit__()
            raise

    def add(self, block: np.ndarray, hashes: np.ndarray | None = None) -> None:
        """Append ``block`` (``(n, dim)`` unit float32 rows) to the vectors, stored in the
        pack's format (and, for a pack with hashes, ``hashes``: their 32-byte text hashes)."""
        codes, scales = encode(block, self._form)
        self.add_encoded(codes, scales, hashes)

    def add_encoded(
        self, codes: np.ndarray, scales: np.ndarray | None, hashes: np.ndarray | None = None
    ) -> None:
        """Append rows already in the pack's format (copied from another pack)."""
        codes = np.ascontiguousarray(codes, dtype=FORMATS[self._form])
        if codes.ndim != 2 or codes.shape[1] != self._dim:
            raise ValueError(f"vectors of shape {codes.shape}, expected (n, {self._dim})")
        if self._written + len(codes) > self._rows:
            raise ValueError(f"more than the {self._rows} vectors this pack was opened for")
        if (scales is None) != (self._form != "int8"):
            raise ValueError("int8 rows need their scales, and only they have scales")
        if (hashes is None) == self._with_hashes or (
            hashes is not None and len(hashes) != len(codes)
        ):
            raise ValueError("a pack with hashes needs one per row, and only it takes them")
        self._handles[0].write(codes.data)
        if scales is not None:
            self._handles[2].write(np.ascontiguousarray(scales, dtype="<f4").data)
        if hashes is not None:
            self._handles[3].write(np.ascontiguousarray(hashes, dtype="S32").data)
        self._written += len(codes)

    def written_hashes(self) -> np.ndarray:
        """The hashes of every row, once all are added (mapped from the file being
        written, for the index arrays :meth:`finish` takes)."""
        if not self._with_hashes or self._written != self._rows:
            raise ValueError(f"{self._written} of {self._rows} rows added, with hashes only")
        self._handles[3].flush()
        return np.load(self._aside[3], mmap_mode="r", allow_pickle=False)

    def finish(self, pack: VectorPack) -> str:
        """Write the index arrays of ``pack`` (its ``vectors`` are the ones added) and
        move both files into place; returns the token."""
        if self._written != self._rows:
            raise ValueError(f"{self._written} vectors added, {self._rows} expected")
        for handle in self._handles.values():
            handle.close()
        with open(private_file(self._aside[1]), "wb") as handle:
            np.savez(handle, **{name: _narrow(getattr(pack, name)) for name in _ARRAYS})
        # The vectors file last: a reader finds it only with everything it needs beside it.
        for at in (*sorted(set(self._handles) - {0}, reverse=True), 1, 0):
            os.replace(self._aside[at], self._paths[at])
        self._finished = True
        return self.token

    def __enter__(self) -> PackWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        # Also the clean-up of an __init__ that failed after opening a file.
        for handle in self._handles.values():
            handle.close()
        if not self._finished:
            for path in (*self._aside, *self._paths):
                with contextlib.suppress(OSError):
                    path.unlink()


def _narrow(values: np.ndarray) -> np.ndarray:
    """Index values as int32 when they fit (half the bytes; read back as int64)."""
    values = np.asarray(values)
    if values.dtype == np.int32:
        return values
    if len(values) and (values.min() < -(2**31) or values.max() >= 2**31):
        return values.astype(np.int64, copy=False)
    return values.astype(np.int32)


def write_pack(folder: Path, key: str, pack: VectorPack) -> str:
    """Write ``pack`` (vectors in memory) under a new token and return the token.

    :raises OSError: when the folder cannot be written; nothing is left behind.
    """
    vectors = np.asarray(pack.vectors, dtype=np.float32)
    with PackWriter(folder, key, rows=len(vectors), dim=vectors.shape[1]) as writer:
        writer.add(vectors)
        return writer.finish(pack)


def read_pack(
    folder: Path,
    key: str,
    token: str,
    dim: int,
    *,
    with_hashes: bool = False,
    layout: bool = True,
) -> VectorPack | None:
    """The pack ``token`` of ``key``, vectors memory-mapped; ``None`` when its files are
    missing, unreadable or inconsistent (the caller then loads from the database).
    ``with_hashes``: the pack must have its rows' text hashes (a store's pack).
    ``layout=False``: of the index arrays only ``ids`` is read, the others left empty (a
    reader of the vectors alone: at millions of sentences they are hundreds of MB)."""
    index_path = _paths(folder, key, token)[1]
    scales_path, hashes_path = _extra_paths(folder, key, token)
    try:
        vectors = _vectors(folder, key, token)
        with np.load(index_path, allow_pickle=False) as stored:
            arrays = {
                name: np.asarray(stored[name], dtype=np.int64)
                if layout or name == "ids"
                else np.zeros(0, dtype=np.int64)
                for name in _ARRAYS
            }
        scales = None
        if vectors.dtype == np.int8:
            scales = np.load(scales_path, mmap_mode="r", allow_pickle=False)
        hashes = np.load(hashes_path, mmap_mode="r", allow_pickle=False) if with_hashes else None
    except (OSError, ValueError, KeyError, EOFError):
        return None
    pack = VectorPack(vectors=vectors, scales=scales, hashes=hashes, **arrays)
    return pack if _consistent(pack, dim, layout) else None


def _vectors(folder: Path, key: str, token: str) -> np.ndarray | ReorderedRows:
    """The pack's mapped vectors: its own file, else (handed over) its partition's codes
    read through their order.

    :raises OSError: when neither is there.
    :raises ValueError: when they are unreadable or do not match.
    """
    try:
        return np.load(_paths(folder, key, token)[0], mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        return _handed_over(folder, key, token)


def _handed_over(folder: Path, key: str, token: str) -> ReorderedRows:
    codes_path, order_path = _reordered_paths(folder, key, token)
    codes = np.load(codes_path, mmap_mode="r", allow_pickle=False)
    if codes.dtype != np.int8:
        raise ValueError(f"{codes_path.name} holds {codes.dtype}, not an int8 pack's codes")
    order = np.load(order_path, mmap_mode="r", allow_pickle=False)
    return ReorderedRows(codes, order)


def hand_over_vectors(folder: Path, key: str, token: str) -> bool:
    """Let the partition written beside int8 pack ``token`` (its codes, in its order) be
    the store of the pack's vectors: the pack's own file goes when the partition holds
    the same codes (checked on a sample of rows). Call once the partition's files are all
    in place: until the unlink the pack reads its own file, after it the partition's, so
    a crash at any point leaves a readable pack. Whether the file went."""
    vectors_path = _paths(folder, key, token)[0]
    try:
        own = np.load(vectors_path, mmap_mode="r", allow_pickle=False)
        reordered = _handed_over(folder, key, token)
    except (OSError, ValueError, EOFError):
        return False
    if own.dtype != np.int8 or own.shape != reordered.shape:
        return False
    if not _same_codes(own, reordered):
        return False
    try:
        vectors_path.unlink()
    except OSError:  # mapped by another process on some systems: the next pack retries
        return False
    return True


def _same_codes(own: np.ndarray, reordered: ReorderedRows) -> bool:
    """Whether the stored rows are the pack's, on :data:`_CHECK_ROWS` rows spread over
    them (the partition was written from this pack's rows a moment before: what could
    differ is where each went, which a sample shows)."""
    stored = np.unique(np.linspace(0, len(own) - 1, min(len(own), _CHECK_ROWS)).astype(np.int64))
    theirs = read_released(reordered.stored.__getitem__, stored, reordered.stored)
    mine = read_released(own.__getitem__, np.asarray(reordered.order[stored]), own)
    return all(np.array_equal(a, b) for a, b in zip(mine, theirs, strict=True))


def _consistent(pack: VectorPack, dim: int, layout: bool = True) -> bool:
    vectors = pack.vectors
    if vectors.dtype not in {np.dtype(t) for t in FORMATS.values()}:
        return False
    if vectors.ndim != 2 or vectors.shape[1] != dim:
        return False
    for extra, dtype in ((pack.scales, np.float32), (pack.hashes, np.dtype("S32"))):
        if extra is not None and (extra.dtype != dtype or extra.shape != (len(vectors),)):
            return False
    if any(getattr(pack, name).ndim != 1 for name in _ARRAYS):
        return False
    if not layout:
        return True
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
    for path in (*_paths(folder, key, token), *_extra_paths(folder, key, token)):
        with contextlib.suppress(OSError):
            total += path.stat().st_size
    return total


def adopt_pack(folder: Path, key: str, token: str) -> bool:
    """Name ``key`` the files of pack ``token`` (and the files beside it, such as its
    approximate index) found in ``folder`` under another key: a pack written when keys
    were made from something that has changed since (a knowledge base's absolute path).
    The token is random, so its files are this pack's whatever their key. Best effort,
    one rename a file: a run cut short leaves the rest for the next. Whether any file
    was renamed."""
    if not folder.is_dir():
        return False
    renamed = False
    for path in folder.glob(f"*-{token}.*"):
        other, rest = path.name.split("-", 1)
        if other != key and rest.startswith(f"{token}."):
            with contextlib.suppress(OSError):
                os.replace(path, folder / f"{key}-{rest}")
                renamed = True
    return renamed


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
