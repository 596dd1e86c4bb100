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

The build reads the documents once, a block at a time, spilling each block's postings
to scratch files sorted by bucket (a term's id modulo :data:`_BUCKETS`) then term; the
pack is then written bucket by bucket, so memory holds one block or one bucket (not the
corpus's postings) at any time, and what it keeps per block is its buckets' offsets.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import shutil
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kairox.support.paths import private_file, private_folder

__all__ = ["Bm25Pack", "Weights", "read_pack", "remove_packs", "write_pack"]

#: FTS5's bm25() constants (sqlite/ext/fts5/fts5_aux.c).
K1 = 1.2
B = 0.75
_MIN_IDF = 1e-6

#: Documents tokenized and spilled at a time; buckets the postings are merged by
#: (1M SciFact-sized passages: ~100M postings, 800k a bucket).
_BLOCK_DOCS = 2_000
_BUCKETS = 128
#: Term ids fit 24 bits of the build's sort key (16.7M distinct terms).
_MAX_TERMS = 1 << 24

#: name -> dtype of the arrays a pack stores (``terms`` is a text file beside them).
_ARRAYS = {
    "spans": "<i8",  # (terms, 2): term t's postings are [spans[t, 0], spans[t, 1])
    "docs": "<i4",  # each posting's row position (in ``rowids``)
    "impacts": "<f4",  # each posting's bm25 part but the IDF (N is the pack's)
    "rowids": "<i8",  # ascending, so a position's order is its rowid's order
}
#: The scratch arrays of the build, per posting (int32 each).
_SPILLED = ("terms", "docs", "title_tf", "body_tf")

#: The tokens of one column's text, as the FTS5 table's tokenizer gives them.
Tokenize = Callable[[str], list[str]]


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
    """The postings of the documents read so far, a block at a time, sorted by bucket
    then term within each block, in scratch files."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.terms: dict[str, int] = defaultdict(self._next_term)
        self.buckets: list[np.ndarray] = []  # per block: where each bucket starts, and its end
        self.offsets: list[int] = []  # per block: its first posting in the files
        self.rowids: list[np.ndarray] = []
        self.lengths: list[np.ndarray] = []  # per block: each row's tokens
        self.written = 0

    def _next_term(self) -> int:
        return len(self.terms)

    def file(self, name: str) -> Path:
        return self.folder / f"spill.{name}"

    def add(self, block: Sequence[tuple[int, str, str]], tokenize: Tokenize) -> None:
        """Tokenize ``(rowid, title, body)`` rows and append their postings."""
        lookup = self.terms.__getitem__
        first = sum(len(rowids) for rowids in self.rowids)
        ids: list[int] = []
        sizes = np.zeros((len(block), 2), dtype=np.int64)
        for offset, (_, title, body) in enumerate(block):
            for column, text in enumerate((title, body)):
                tokens = tokenize(text) if text else []
                ids.extend(map(lookup, tokens))  # (one list per block: a third faster)
                sizes[offset, column] = len(tokens)
        flat = sizes.ravel()
        docs = np.repeat(np.repeat(np.arange(first, first + len(block)), 2), flat)
        columns = np.repeat(np.tile([0, 1], len(block)), flat)
        terms = np.array(ids, dtype=np.int64)
        if len(self.terms) > _MAX_TERMS:
            raise ValueError(f"more than {_MAX_TERMS:,} distinct terms: too many for a pack")
        # (bucket, term, doc, column) in one sortable key: 7, 24, 31 and 1 bits.
        keys = ((terms % _BUCKETS) << 56) | (terms << 32) | (docs << 1) | columns
        unique, counts = np.unique(keys, return_counts=True)
        # One posting per (term, doc), with its count in each column.
        pairs = unique >> 1
        starts = np.ones(len(pairs), dtype=bool)
        starts[1:] = pairs[1:] != pairs[:-1]
        slot = np.cumsum(starts) - 1
        in_body = (unique & 1).astype(bool)
        title_tf = np.zeros(int(starts.sum()), dtype=np.int64)
        body_tf = np.zeros_like(title_tf)
        title_tf[slot[~in_body]] = counts[~in_body]
        body_tf[slot[in_body]] = counts[in_body]
        pairs = pairs[starts]
        spilled = {
            "terms": (pairs >> 31) & ((1 << 24) - 1),
            "docs": pairs & ((1 << 31) - 1),
            "title_tf": title_tf,
            "body_tf": body_tf,
        }
        for name, array in spilled.items():
            with open(self.file(name), "ab") as handle:
                handle.write(np.ascontiguousarray(array, dtype="<i4").data)
        self.offsets.append(self.written)
        bucket_of = pairs >> 55
        self.buckets.append(np.searchsorted(bucket_of, np.arange(_BUCKETS + 1)))
        self.rowids.append(np.asarray([row[0] for row in block], dtype=np.int64))
        self.lengths.append(sizes.sum(axis=1))
        self.written += len(pairs)

    def bucket(self, bucket: int) -> dict[str, np.ndarray]:
        """Every block's postings in ``bucket``, in block order (so in rowid order)."""
        pieces: dict[str, list[np.ndarray]] = {name: [] for name in _SPILLED}
        for block, offset in enumerate(self.offsets):
            start, stop = (int(bound) for bound in self.buckets[block][bucket : bucket + 2])
            for name in _SPILLED:
                pieces[name].append(
                    np.fromfile(
                        self.file(name),
                        dtype="<i4",
                        count=stop - start,
                        offset=(offset + start) * 4,
                    )
                )
        return {
            name: np.concatenate(parts) if parts else np.zeros(0, dtype="<i4")
            for name, parts in pieces.items()
        }


def _write_postings(spill: _Spill, weights: Weights, paths: dict[str, Path]) -> np.ndarray:
    """Write ``docs`` and ``impacts`` bucket by bucket (in each, by term, then by rowid:
    the order of the blocks); returns each term's span."""
    lengths = np.concatenate(spill.lengths) if spill.lengths else np.zeros(0, np.int64)
    average = float(lengths.sum()) / len(lengths) if len(lengths) else 1.0
    norms = K1 * (1 - B + B * lengths / average)
    total = spill.written
    spans = np.zeros((len(spill.terms), 2), dtype=np.int64)
    with (
        open(private_file(paths["docs"]), "wb") as docs_out,
        open(private_file(paths["impacts"]), "wb") as impacts_out,
    ):
        for handle, name in ((docs_out, "docs"), (impacts_out, "impacts")):
            header = {"descr": _ARRAYS[name], "fortran_order": False, "shape": (total,)}
            np.lib.format.write_array_header_1_0(handle, header)
        written = 0
        for bucket in range(_BUCKETS):
            postings = spill.bucket(bucket)
            order = np.argsort(postings["terms"], kind="stable")
            terms = postings["terms"][order]
            docs = postings["docs"][order]
            frequency = weights.title * postings["title_tf"][order] + weights.body * postings[
                "body_tf"
            ][order].astype(np.float64)
            impacts = (frequency * (K1 + 1.0)) / (frequency + norms[docs])
            docs_out.write(np.ascontiguousarray(docs, dtype="<i4").data)
            impacts_out.write(np.ascontiguousarray(impacts, dtype="<f4").data)
            present, first, count = np.unique(terms, return_index=True, return_counts=True)
            spans[present, 0] = written + first
            spans[present, 1] = written + first + count
            written += len(terms)
    return spans


def _write_array(path: Path, array: np.ndarray, dtype: str) -> None:
    with open(private_file(path), "wb") as handle:
        np.save(handle, np.ascontiguousarray(array, dtype=dtype), allow_pickle=False)


def write_pack(
    folder: Path,
    documents: Iterable[tuple[int, str, str]],
    tokenize: Tokenize,
    weights: Weights,
) -> str:
    """Pack ``(rowid, title, body)`` rows (ascending rowids) tokenized by ``tokenize``
    (the FTS5 table's own tokenizer) with ``weights``, under a new token; returns it.

    :raises OSError: when the folder cannot be written; nothing is left behind.
    :raises ValueError: when the documents hold more distinct terms than a pack can.
    """
    private_folder(folder)
    token = secrets.token_hex(8)
    paths = _paths(folder, token)
    aside = {name: path.with_name(path.name + ".tmp") for name, path in paths.items()}
    scratch = folder / f"{token}.scratch"
    done = False
    try:
        private_folder(scratch)
        spill = _Spill(scratch)
        block: list[tuple[int, str, str]] = []
        for row in documents:
            block.append(row)
            if len(block) >= _BLOCK_DOCS:
                spill.add(block, tokenize)
                block = []
        if block:
            spill.add(block, tokenize)
        spans = _write_postings(spill, weights, aside)
        _write_array(aside["spans"], spans, "<i8")
        rowids = np.concatenate(spill.rowids) if spill.rowids else np.zeros(0, np.int64)
        _write_array(aside["rowids"], rowids, "<i8")
        with open(private_file(aside["terms"]), "w", encoding="utf-8") as handle:
            handle.write("\n".join(spill.terms))  # insertion order is id order
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
