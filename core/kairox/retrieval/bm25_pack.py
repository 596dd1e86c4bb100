"""An FTS5 table's postings packed into memory-mapped arrays, for BM25 without FTS5's cost.

FTS5 answers an OR query by visiting every row any term holds and running ``bm25()`` on
each (decoding its position lists, reading its size): on SciFact-built passages that is
85 % of a search, 4-40 ms at 10k-100k passages. A pack holds, per term, the rows holding
it and each one's *impact*, the term's part of ``bm25(table, title_weight, body_weight)``
but its IDF (``f (k1 + 1) / (f + k1 (1 - b + b |D| / avgdl))``, f the weighted count in
the two columns), as bm25s stores its scores: a query's scores are one scaled add per
term over its postings (same tokenizer, same formula as FTS5: IDF ``log((N - n + 0.5) /
(n + 0.5))`` floored at 1e-6, k1 1.2, b 0.75, each query phrase counted).

A pack is only ever a copy, written aside (``.npy`` files named by a random token, in
``<index>.words/``) by :func:`write_pack`; the database records which token matches its
contents, and the caller drops that record in every transaction that changes the table,
so a stale or half-written pack is never read. :func:`read_pack` returns ``None`` for
files that are missing or inconsistent; the caller then asks FTS5.

The build takes the postings FTS5 already holds, a range of terms at a time and in
their final order (:mod:`kairox.retrieval.fts5_postings`: no text is tokenized again),
spilling each range to scratch files while it sums each row's tokens; the impacts, which
need every row's length, are then written a block of postings at a time. Memory holds
one range or one block (not the corpus's postings) and an int64 per row.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import shutil
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np

from kairox.retrieval.fts5_postings import Postings
from kairox.support.paths import private_file, private_folder

__all__ = ["Bm25Pack", "Weights", "read_pack", "remove_packs", "write_pack"]

#: FTS5's bm25() constants (sqlite/ext/fts5/fts5_aux.c).
K1 = 1.2
B = 0.75
_MIN_IDF = 1e-6

#: Postings turned into impacts at a time.
_BLOCK_POSTINGS = 250_000

#: name -> dtype of the arrays a pack stores (``terms`` is a text file beside them).
_ARRAYS = {
    "spans": "<i8",  # (terms, 2): term t's postings are [spans[t, 0], spans[t, 1])
    "docs": "<i4",  # each posting's row position (in ``rowids``)
    "impacts": "<f4",  # each posting's bm25 part but the IDF (N is the pack's)
    "rowids": "<i8",  # ascending, so a position's order is its rowid's order
}
#: The scratch arrays of the build, per posting (int32 each).
_SPILLED = ("docs", "title_tf", "body_tf")


@dataclass(frozen=True)
class Weights:
    """The column weights a pack's impacts were computed with (``bm25(t, title, body)``)."""

    title: float
    body: float


@dataclass(frozen=True)
class Bm25Pack:
    """The postings of one FTS5 table over (title, body), memory-mapped."""

    terms: dict[str, int]
    spans: np.ndarray
    docs: np.ndarray
    impacts: np.ndarray
    rowids: np.ndarray
    _buffers: threading.local = field(default_factory=threading.local, repr=False, compare=False)

    @property
    def rows(self) -> int:
        return len(self.rowids)

    def frequency(self, term: str) -> int:
        """The rows holding ``term`` (a token as the tokenizer gives it), FTS5's nHit."""
        position = self.terms.get(term)
        if position is None:
            return 0
        start, end = self.spans[position]
        return int(end - start)

    def top(self, phrases: Sequence[str], k: int) -> list[tuple[int, float]]:
        """``(rowid, score)`` of the ``k`` best rows holding any of ``phrases`` (one
        token each, repeats counted as FTS5 counts repeated phrases), by score then rowid;
        ``score`` is ``-bm25()`` with the pack's weights (float32 impacts: equal to FTS5's
        to about 1e-7 of the score)."""
        rows = self.rows
        if not rows or k <= 0:
            return []
        scores = self._scores()
        try:
            found, found_scores = self._matched(scores, phrases, k)
        finally:
            scores.fill(0)  # clean for the thread's next search, whatever happened
        if len(found) > k:
            # Everything tied with the k-th score competes on rowid, as FTS5's ORDER BY.
            kth = np.partition(found_scores, len(found) - k)[len(found) - k]
            keep = found_scores >= kth
            found, found_scores = found[keep], found_scores[keep]
        order = np.lexsort((found, -found_scores))[:k]
        return [(int(self.rowids[found[i]]), float(found_scores[i])) for i in order]

    def _matched(
        self, scores: np.ndarray, phrases: Sequence[str], k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Add every phrase's parts into ``scores``; the positions and scores of the
        rows that may be among the best ``k``."""
        rows = self.rows
        # A floor under the k-th best score: the k-th best part of one term holding at
        # least k rows (the rarest such), since a row's score is at least each part.
        # Only rows at or above it are gathered, not every row matched.
        floor, floor_idf = None, -1.0
        for phrase in phrases:
            position = self.terms.get(phrase)
            if position is None:
                continue
            start, end = (int(bound) for bound in self.spans[position])
            hits = end - start
            idf = math.log((rows - hits + 0.5) / (hits + 0.5))
            idf = idf if idf > 0 else _MIN_IDF
            parts = np.float32(idf) * self.impacts[start:end]
            scores[self.docs[start:end]] += parts
            if hits >= k and idf > floor_idf:
                floor, floor_idf = parts, idf
        # Positive weights make every impact positive: a matched row has a score.
        if floor is None:
            found = np.flatnonzero(scores > 0)
        else:
            found = np.flatnonzero(scores >= np.partition(floor, len(floor) - k)[len(floor) - k])
        return found, scores[found]

    def _scores(self) -> np.ndarray:
        """This thread's zeroed score per row: allocating (and so page-faulting) a new
        one per search costs more than the scoring on a large pack."""
        scores = getattr(self._buffers, "scores", None)
        if scores is None:
            scores = self._buffers.scores = np.zeros(self.rows, dtype=np.float32)
        return scores


def _paths(folder: Path, token: str) -> dict[str, Path]:
    paths = {name: folder / f"{token}.{name}.npy" for name in _ARRAYS}
    paths["terms"] = folder / f"{token}.terms.txt"
    return paths


def read_pack(folder: Path, token: str) -> Bm25Pack | None:
    """The pack ``token``, memory-mapped; ``None`` when its files are missing, unreadable
    or inconsistent (the caller then searches FTS5)."""
    paths = _paths(folder, token)
    try:
        # Plain views of the maps: a memmap's slicing runs Python code, per term.
        arrays = {
            name: np.asarray(np.load(paths[name], mmap_mode="r", allow_pickle=False))
            for name in _ARRAYS
        }
        text = paths["terms"].read_text(encoding="utf-8")
    except (OSError, ValueError, EOFError, UnicodeDecodeError):
        return None
    terms = text.split("\n") if text else []
    if any(arrays[name].dtype != np.dtype(dtype) for name, dtype in _ARRAYS.items()):
        return None
    spans, docs = arrays["spans"], arrays["docs"]
    consistent = (
        spans.shape == (len(terms), 2)
        and len(docs) == len(arrays["impacts"])
        and (not len(spans) or (int(spans.min()) >= 0 and int(spans.max()) <= len(docs)))
    )
    if not consistent:
        return None
    return Bm25Pack(terms={term: n for n, term in enumerate(terms)}, **arrays)


def remove_packs(folder: Path, *, keep: str | None = None) -> None:
    """Delete the packs in ``folder`` other than ``keep`` (best effort: the next run
    retries a file that would not go)."""
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        if keep is not None and path.name.startswith(f"{keep}."):
            continue
        with contextlib.suppress(OSError):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()


class _Spill:
    """The postings read so far, in their final order (term, then rowid), in scratch
    files: each one's row position and its counts in the two columns; and each row's
    tokens, which the impacts need before any can be written."""

    def __init__(self, folder: Path, rowids: np.ndarray) -> None:
        self.folder = folder
        self.rowids = rowids
        # rowid - first -> position, when the rowids are dense enough for a table
        # (searchsorted took a sixth of the build at 100k passages).
        self.first = int(rowids[0]) if len(rowids) else 0
        span = int(rowids[-1]) - self.first + 1 if len(rowids) else 0
        self.table: np.ndarray | None = None
        if span <= 4 * len(rowids) + 1024:
            self.table = np.full(span, -1, dtype=np.int64)
            self.table[rowids - self.first] = np.arange(len(rowids))
        self.lengths = np.zeros(len(rowids), dtype=np.int64)
        self.spans: list[np.ndarray] = []
        self.last_term: str | None = None
        self.written = 0
        # Postings' tokens not yet added into ``lengths``: added once they outnumber the
        # rows, so the additions cost O(postings), not O(rows) per range.
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._pending_count = 0

    def count_tokens(self) -> None:
        """Add the pending postings' tokens into :attr:`lengths`."""
        if self._pending:
            positions = np.concatenate([positions for positions, _ in self._pending])
            tokens = np.concatenate([tokens for _, tokens in self._pending])
            self.lengths += np.bincount(
                positions, weights=tokens, minlength=len(self.rowids)
            ).astype(np.int64)
        self._pending, self._pending_count = [], 0

    def file(self, name: str) -> Path:
        return self.folder / f"spill.{name}"

    def add(self, postings: Postings, terms_out: TextIO) -> None:
        """Append one range of terms' postings."""
        positions = self._positions(postings.rowids)
        self._pending.append((positions, postings.title_tf + postings.body_tf))
        self._pending_count += len(positions)
        if self._pending_count >= len(self.rowids):
            self.count_tokens()
        for name, array in (
            ("docs", positions),
            ("title_tf", postings.title_tf),
            ("body_tf", postings.body_tf),
        ):
            with open(self.file(name), "ab") as handle:
                handle.write(np.ascontiguousarray(array, dtype="<i4").data)
        ends = self.written + np.cumsum(postings.counts)
        spans = np.stack([ends - postings.counts, ends], axis=1)
        terms = postings.terms
        if terms and terms[0] == self.last_term:  # a common term's next part
            self.spans[-1][-1, 1] = spans[0, 1]
            spans, terms = spans[1:], terms[1:]
        if len(spans):
            self.spans.append(spans)
        self.written = int(ends[-1]) if len(ends) else self.written
        if terms:
            # (newline-separated, none after the last: the terms file's form)
            terms_out.write(("\n" if self.last_term is not None else "") + "\n".join(terms))
            self.last_term = terms[-1]

    def _positions(self, rowids: np.ndarray) -> np.ndarray:
        """Where ``rowids`` are in :attr:`rowids`; all must be there."""
        if self.table is not None:
            offsets = rowids - self.first
            inside = (offsets >= 0) & (offsets < len(self.table))
            positions = self.table[np.where(inside, offsets, 0)] if len(self.table) else offsets
            found = inside & (positions >= 0)
        else:
            positions = np.minimum(np.searchsorted(self.rowids, rowids), len(self.rowids) - 1)
            found = self.rowids[positions] == rowids if len(self.rowids) else positions < 0
        if not bool(np.all(found)):
            raise ValueError("the index holds rows the documents do not")
        return positions

    def blocks(self) -> Iterator[dict[str, np.ndarray]]:
        """The spilled postings, :data:`_BLOCK_POSTINGS` at a time."""
        for start in range(0, self.written, _BLOCK_POSTINGS):
            count = min(_BLOCK_POSTINGS, self.written - start)
            yield {
                name: np.fromfile(self.file(name), dtype="<i4", count=count, offset=start * 4)
                for name in _SPILLED
            }


def _write_postings(spill: _Spill, weights: Weights, paths: dict[str, Path]) -> None:
    """Write ``docs`` and ``impacts`` from the spilled postings."""
    spill.count_tokens()
    lengths = spill.lengths
    average = float(lengths.sum()) / len(lengths) if len(lengths) else 1.0
    norms = K1 * (1 - B + B * lengths / average)
    with (
        open(private_file(paths["docs"]), "wb") as docs_out,
        open(private_file(paths["impacts"]), "wb") as impacts_out,
    ):
        for handle, name in ((docs_out, "docs"), (impacts_out, "impacts")):
            header = {"descr": _ARRAYS[name], "fortran_order": False, "shape": (spill.written,)}
            np.lib.format.write_array_header_1_0(handle, header)
        for block in spill.blocks():
            docs = block["docs"]
            frequency = weights.title * block["title_tf"] + weights.body * block["body_tf"].astype(
                np.float64
            )
            impacts = (frequency * (K1 + 1.0)) / (frequency + norms[docs])
            docs_out.write(np.ascontiguousarray(docs, dtype="<i4").data)
            impacts_out.write(np.ascontiguousarray(impacts, dtype="<f4").data)


def _write_array(path: Path, array: np.ndarray, dtype: str) -> None:
    with open(private_file(path), "wb") as handle:
        np.save(handle, np.ascontiguousarray(array, dtype=dtype), allow_pickle=False)


def write_pack(
    folder: Path,
    rowids: np.ndarray,
    postings: Iterable[Postings],
    weights: Weights,
) -> str:
    """Pack a table's postings (:func:`kairox.retrieval.fts5_postings.read_postings`:
    ranges of terms in term order) over its rows ``rowids`` (ascending, every row, with
    tokens or not) with ``weights``, under a new token; returns it.

    :raises OSError: when the folder cannot be written; nothing is left behind.
    :raises ValueError: when the postings name rows ``rowids`` lacks.
    """
    private_folder(folder)
    token = secrets.token_hex(8)
    paths = _paths(folder, token)
    aside = {name: path.with_name(path.name + ".tmp") for name, path in paths.items()}
    scratch = folder / f"{token}.scratch"
    done = False
    try:
        private_folder(scratch)
        spill = _Spill(scratch, np.asarray(rowids, dtype=np.int64))
        with open(private_file(aside["terms"]), "w", encoding="utf-8", newline="") as terms:
            for part in postings:
                spill.add(part, terms)
        _write_postings(spill, weights, aside)
        spans = np.concatenate(spill.spans) if spill.spans else np.zeros((0, 2), np.int64)
        _write_array(aside["spans"], spans, "<i8")
        _write_array(aside["rowids"], spill.rowids, "<i8")
        for name, path in paths.items():
            os.replace(aside[name], path)
        done = True
        return token
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if not done:
            for path in (*aside.values(), *paths.values()):
                with contextlib.suppress(OSError):
                    path.unlink()
