"""A pack's rows read in the pack's own order while they are stored in another: an int8
pack's codes kept cluster by cluster by its partition (:mod:`kairox.retrieval.ann_ivf`;
:func:`kairox.workspace.vector_pack.hand_over_vectors`)."""

from __future__ import annotations

import os

import numpy as np

from kairox.retrieval.ann import positions_in
from kairox.support.native_memory import release_mapped

__all__ = ["ReorderedRows"]

# Rows of a pack handed over read from the map a span at a time (24 MB of 384-wide int8
# rows) when at least one in _DENSE is asked, else one by one from the file.
_SPAN_ROWS = 65_536
_DENSE = 16


class ReorderedRows:
    """A pack's rows stored in another order: row ``r`` is ``stored[position[r]]``, where
    ``order[s]`` is the row stored at ``s`` (an int8 pack's codes kept cluster by cluster by
    its partition). Indexed as the pack's own array is (a slice or an array of rows gives
    a copy). The rows asked are scattered over the stored ones, and one scattered read of
    a map maps the whole cached folio around it (hundreds of MB for a few thousand rows):
    many rows are read a span of the map at a time, its pages handed back after each; a
    few from the map as they are (a search's candidates: as fast as the pack's own file
    was), or, :attr:`streamed`, from the file (a pass over every row a block at a time,
    such as the next ingest's merge, would otherwise map all of them)."""

    def __init__(self, stored: np.ndarray, order: np.ndarray) -> None:
        if stored.ndim != 2 or order.shape != (len(stored),):
            raise ValueError(f"{len(order)} row numbers for stored rows of shape {stored.shape}")
        self.stored = stored
        self.order = order
        self.shape: tuple[int, int] = stored.shape
        self.dtype = stored.dtype
        self.ndim = 2
        #: Read a few rows from the file rather than the map (see above).
        self.streamed = False
        self._position: np.ndarray | None = None

    @property
    def base(self) -> np.ndarray:
        """The stored rows: what :func:`~kairox.support.native_memory.release_mapped`
        hands back the pages of."""
        return self.stored

    def __len__(self) -> int:
        return self.shape[0]

    def position(self) -> np.ndarray:
        """Where each row is stored (made on first use, then kept)."""
        if self._position is None:
            self._position = positions_in(self.order)
        return self._position

    def __getitem__(self, which: np.ndarray | slice | int) -> np.ndarray:
        at = self.position()[which]
        if np.ndim(at) == 0:
            return self._sparse(np.array([at]))[0]
        ascending = np.argsort(at, kind="stable")
        positions = at[ascending]
        stored = self.stored
        if len(at) * _DENSE < len(self):
            rows = np.empty((len(at), self.shape[1]), dtype=self.dtype)
            rows[ascending] = self._sparse(positions)
            return rows
        # Many rows: a span of the map at a time, each row put where it was asked.
        rows = np.empty((len(at), self.shape[1]), dtype=self.dtype)
        for start in range(0, len(self), _SPAN_ROWS):
            low, high = np.searchsorted(positions, [start, start + _SPAN_ROWS])
            if high > low:
                span = np.asarray(stored[start : start + _SPAN_ROWS])
                rows[ascending[low:high]] = span[positions[low:high] - start]
                release_mapped(stored)
        return rows

    def _sparse(self, positions: np.ndarray) -> np.ndarray:
        """The stored rows at ``positions``: from the map, or :attr:`streamed` from the
        file, one by one."""
        stored = self.stored
        if not self.streamed or not isinstance(stored, np.memmap):
            return np.asarray(stored[positions])
        width = self.shape[1] * self.dtype.itemsize
        with open(stored.filename, "rb") as handle:
            fd, offset = handle.fileno(), stored.offset
            raw = b"".join(os.pread(fd, width, offset + int(p) * width) for p in positions)
        return np.frombuffer(raw, dtype=self.dtype).reshape(len(positions), self.shape[1])
