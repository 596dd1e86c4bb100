"""The approximate index of a ``sqlite-fts`` knowledge base's vector pack, beside it.

From ``ann_threshold`` passages on (with numkong installed; without it, a hint once per
process), searches go through int8 codes of the pack's vectors, named as the pack's files
are so they go when the pack does:

- below :data:`~kairox.retrieval.ann_ivf.IVF_THRESHOLD` vectors, a linear scan
  (:mod:`kairox.retrieval.ann`) of an int8 pack's own codes (no copy), or of an int8
  copy of a float16 pack's, rebuilt after each ingest from the previous pack's codes
  (quantising only new vectors);
- from there on, an inverted-file partition (:mod:`kairox.retrieval.ann_ivf`) holding
  the codes cluster by cluster (gathering each probed cluster's rows from the pack was 5x
  slower than scanning them in place), rebuilt after each ingest assigning only new
  vectors to the previous pack's centroids. An int8 pack's partition then becomes the
  store of its codes (:func:`~kairox.workspace.vector_pack.hand_over_vectors`: the pack's
  own vectors file goes, its rows read through the partition's order), so they are on
  disk once; a float16 pack's partition holds an int8 copy.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kairox.retrieval.ann import (
    NUMKONG,
    AnnIndex,
    CandidateIndex,
    quantise,
    write_array,
    write_index,
)
from kairox.retrieval.ann_ivf import IVF_THRESHOLD, IvfIndex, build_ivf
from kairox.support.native_memory import read_released
from kairox.workspace.reordered_rows import ReorderedRows
from kairox.workspace.vector_pack import VectorPack, hand_over_vectors, read_pack
from kairox.workspace.vector_store import pack_keys

__all__ = ["Approximate", "PackIndex"]

# Knowledge bases told once per process that numkong would speed their searches up.
_HINTED: set[str] = set()


@dataclass(frozen=True)
class Approximate:
    """A pack's approximate index (one row per pack row), and each passage's row."""

    index: CandidateIndex
    chunk_rows: np.ndarray


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


@dataclass
class PackIndex:
    """The approximate indexes of the packs in ``folder`` under ``key``, of ``dim`` wide
    vectors, used from ``threshold`` passages on (``None``: never), partitioned from
    ``partition_from`` vectors on (``None``: never)."""

    folder: Path
    key: str
    dim: int
    threshold: int | None
    partition_from: int | None = IVF_THRESHOLD

    def paths(self, token: str) -> tuple[Path, Path]:
        stem = self.stem(token)
        return Path(f"{stem}.ann-codes.npy"), Path(f"{stem}.ann-keys.npy")

    def stem(self, token: str) -> Path:
        """The start of the index files' names: the pack's, so they go when the pack does
        (:func:`~kairox.workspace.vector_pack.remove_packs`)."""
        return self.folder / f"{self.key}-{token}"

    def partitioned(self, vectors: int) -> bool:
        """Whether a pack of ``vectors`` rows gets the partitioned index."""
        return self.partition_from is not None and vectors >= self.partition_from

    def wanted(self, passages: int) -> bool:
        """Whether a collection of ``passages`` is searched through the approximate index
        (from ``threshold`` on, with numkong installed; without it, a hint, once)."""
        if self.threshold is None or passages < self.threshold:
            return False
        if NUMKONG.available():
            return True
        if self.key not in _HINTED:
            _HINTED.add(self.key)
            print(
                f"hint: this knowledge base has {passages:,} passages (from "
                f"{self.threshold:,} on, searches by meaning go through an approximate "
                f"index); `pip install 'kairox[ann]'` to use it (searching exactly meanwhile)",
                file=sys.stderr,
            )
        return False

    def _others(self, token: str, kind: str) -> list[Path]:
        """The other packs' ``kind`` files, newest first."""
        others = [
            path
            for path in self.folder.glob(f"{self.key}-*.{kind}")
            if not path.name.startswith(f"{self.key}-{token}.")
        ]
        return sorted(others, key=_modified, reverse=True)

    def _previous(self, token: str) -> AnnIndex | None:
        """The newest other pack's index, whose codes a new one reuses (best effort)."""
        for keys_path in self._others(token, "ann-keys.npy"):
            codes_path = keys_path.with_name(keys_path.name.replace(".ann-keys.", ".ann-codes."))
            index = AnnIndex.open(codes_path, keys_path, self.dim)
            if index is not None:
                return index
        return None

    def _previous_partition(self, token: str) -> tuple[IvfIndex, np.ndarray] | None:
        """The newest other pack's partition and its rows' keys (best effort)."""
        for meta in self._others(token, "ivf-meta.json"):
            stem = Path(str(meta)[: -len(".ivf-meta.json")])
            index = IvfIndex.open(stem, self.dim)
            try:
                keys = np.load(f"{stem}.ann-keys.npy", mmap_mode="r", allow_pickle=False)
            except (OSError, ValueError, EOFError):
                continue
            if index is not None and keys.dtype == np.uint64 and len(keys) == len(index):
                return index, keys
        return None

    def write(self, token: str) -> None:
        """The approximate index of the pack ``token``'s vectors (one row per pack row,
        keyed by its text hash), from the previous pack's and the new vectors, written
        beside the pack a block at a time (the pack's pages and the previous index's are
        handed back after each: memory stays bounded at any size). An int8 pack below
        the partition's size needs none: its codes are scanned as they are. An int8
        pack's partition then holds its codes, the pack's own file gone."""
        # The vectors alone: the layout (millions of sentences) would be hundreds of MB.
        pack = read_pack(self.folder, self.key, token, self.dim, with_hashes=True, layout=False)
        if pack is None or not self.wanted(len(pack.ids)):
            return
        if isinstance(pack.vectors, ReorderedRows):  # its partition is written, and the store
            return
        mapped = (pack.vectors, pack.scales)
        if self.partitioned(len(pack.vectors)):
            keys = pack_keys(pack)
            index, _ = build_ivf(
                _released(pack.rows, mapped),
                len(keys),
                previous=self._previous_partition(token),
                keys=keys,
                mapped=mapped,
            )
            stem = self.stem(token)
            write_array(self.paths(token)[1], [keys], keys.shape, np.uint64)
            index.save(stem, _released(_codes_of(pack), mapped), mapped)
            if pack.scales is not None:
                del pack, mapped  # the maps of the file about to go
                hand_over_vectors(self.folder, self.key, token)
        elif pack.scales is None:
            write_index(
                *self.paths(token),
                pack_keys(pack),
                pack.rows,
                self.dim,
                previous=self._previous(token),
                mapped=mapped,
            )

    def stored(self, token: str, pack: VectorPack) -> Approximate | None:
        """The pack's approximate index, when it has one that matches it (else exact)."""
        if not self.wanted(len(pack.ids)):
            return None
        index: CandidateIndex | None
        if self.partitioned(len(pack.vectors)) or isinstance(pack.vectors, ReorderedRows):
            index = IvfIndex.open(self.stem(token), self.dim)
        elif pack.scales is not None:  # an int8 pack: its codes are the index's
            index = AnnIndex(None, pack.vectors)
        else:
            index = AnnIndex.open(*self.paths(token), self.dim)
        if index is None or len(index) != len(pack.vectors):
            return None
        return Approximate(index, pack.chunk_rows)


def _codes_of(pack: VectorPack) -> Callable[[np.ndarray], np.ndarray]:
    """The int8 codes of a pack's rows: an int8 pack's own (the index's quantisation:
    one scale a row, its largest component ±127), else quantised."""
    if pack.scales is not None:
        return lambda rows: np.asarray(pack.vectors[rows])
    return lambda rows: quantise(pack.rows(rows))


def _released(
    read: Callable[[np.ndarray], np.ndarray], mapped: tuple[np.ndarray | None, ...]
) -> Callable[[np.ndarray], np.ndarray]:
    """``read`` (rows of the mapped pack) a few rows at a time, the maps' pages handed back
    after each (:func:`~kairox.support.native_memory.read_released`): a block of
    scattered rows, such as one cluster's, would otherwise map most of the pack."""

    def rows_of(rows: np.ndarray) -> np.ndarray:
        return np.concatenate([read(rows[:0]), *read_released(read, rows, *mapped)])

    return rows_of
