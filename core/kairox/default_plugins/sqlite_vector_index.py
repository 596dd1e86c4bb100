"""The approximate index of a ``sqlite-fts`` knowledge base's vector pack, beside it.

From ``ann_threshold`` passages on (with numkong installed; without it, a hint once per
process), the pack gets an int8 copy of its vectors (:mod:`kairox.retrieval.ann`), named
as the pack's files are so it goes when the pack does, and rebuilt after each ingest from
the previous pack's codes, quantising only new vectors.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kairox.retrieval.ann import NUMKONG, AnnIndex, write_index
from kairox.workspace.vector_pack import VectorPack, read_pack
from kairox.workspace.vector_store import pack_keys

__all__ = ["Approximate", "PackIndex"]

# Knowledge bases told once per process that numkong would speed their searches up.
_HINTED: set[str] = set()


@dataclass(frozen=True)
class Approximate:
    """A pack's approximate index (one row per pack row), and each passage's row."""

    index: AnnIndex
    chunk_rows: np.ndarray


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


@dataclass
class PackIndex:
    """The approximate indexes of the packs in ``folder`` under ``key``, of ``dim`` wide
    vectors, used from ``threshold`` passages on (``None``: never)."""

    folder: Path
    key: str
    dim: int
    threshold: int | None

    def paths(self, token: str) -> tuple[Path, Path]:
        # Named as the pack's files are, so they go when the pack does (remove_packs).
        stem = self.folder / f"{self.key}-{token}"
        return Path(f"{stem}.ann-codes.npy"), Path(f"{stem}.ann-keys.npy")

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

    def _previous(self, token: str) -> AnnIndex | None:
        """The newest other pack's index, whose codes a new one reuses (best effort)."""
        others = [
            path
            for path in self.folder.glob(f"{self.key}-*.ann-keys.npy")
            if not path.name.startswith(f"{self.key}-{token}.")
        ]
        for keys_path in sorted(others, key=_modified, reverse=True):
            codes_path = keys_path.with_name(keys_path.name.replace(".ann-keys.", ".ann-codes."))
            index = AnnIndex.open(codes_path, keys_path, self.dim)
            if index is not None:
                return index
        return None

    def write(self, token: str) -> None:
        """The approximate index of the pack ``token``'s vectors (one row per pack row,
        keyed by its text hash), from the previous pack's codes and the new vectors,
        written beside the pack a block at a time (the pack's pages and the previous
        codes' are handed back after each: memory stays bounded at any size)."""
        pack = read_pack(self.folder, self.key, token, self.dim, with_hashes=True)
        if pack is None or not self.wanted(len(pack.ids)):
            return
        write_index(
            *self.paths(token),
            pack_keys(pack),
            pack.rows,
            self.dim,
            previous=self._previous(token),
            mapped=(pack.vectors, pack.scales),
        )

    def stored(self, token: str, pack: VectorPack) -> Approximate | None:
        """The pack's approximate index, when it has one that matches it (else exact)."""
        if not self.wanted(len(pack.ids)):
            return None
        index = AnnIndex.open(*self.paths(token), self.dim)
        if index is None or len(index) != len(pack.vectors):
            return None
        return Approximate(index, pack.chunk_rows)
