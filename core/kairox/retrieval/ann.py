"""An approximate index for large vector collections: an int8 copy of every vector,
scanned with numkong's SIMD kernels on every core, its best rows scored exactly.

Exact search (:func:`kairox.retrieval.vectors.top_k`) multiplies every float32 vector,
passage and sentence, with the query. The index holds each vector quantised to int8 with
a scale of its own (a quarter of the bytes; the scale cancels in a cosine) and estimates
every row's cosine with numkong's int8 kernels (one slice of the rows per core). Each
passage's estimate is blended with its best sentence's as exact search blends them, and
only the :data:`CANDIDATES_PER_RESULT` best passages per result wanted are scored
exactly, on their float32 vectors (:func:`rescored_top_k`): the index decides which
passages are looked at, never the scores.

Why a quantised scan and not a graph: on the scale benchmark's 100,000 hashing-embedder
passages, usearch's HNSW graph (connectivity 16-32, expansion up to 1024, 200 candidates
rescored) found 0.88-0.91 of the exact top 10, after minutes of building; the int8 scan
finds all of them from 20 candidates, is built in seconds and needs no tuning per embedder.
usearch's own exhaustive search was 1.5x faster than exact, numkong's kernels (which
usearch uses inside) 3x. It stays linear, at a quarter of the bytes read: with sentences,
recall@10 against exact 1.000 at 10,000 passages and 0.985-0.987 at 100,000, p50 below
exact's (``kairox bench scale --vectors``). The passages missed there tie the 10th exact
score (the corpus repeats passages; a product over the candidate rows can order copies
otherwise than one over every row): counting those, recall is 1.000, and rescoring twice
the candidates finds no more, so the number stays. Past a size the scan is partitioned
(:mod:`kairox.retrieval.ann_ivf`): both pick candidates through
:meth:`CandidateIndex.candidates`, rescored alike by :func:`rescored_top_k`.

Rows are keyed by their text hash (:func:`key_of`), so a rebuild after an ingest quantises
only the vectors it has not seen (:meth:`AnnIndex.build` with the previous index) and drops
those that left; saved beside the vectors, the codes are memory-mapped by the next
process (:meth:`AnnIndex.open`). :func:`write_index` builds straight into those files, a
block of rows at a time, handing back the mapped pages it read after each: its memory
does not grow with the collection (a million vectors' codes are 384 MB). numkong is optional (``pip install 'kairox[ann]'``): its
wheel of SIMD kernels (some 40 MB installed) is something a small collection never needs.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from kairox.retrieval.vectors import DecodedRows, SentenceVectors, normalise, row_scores
from kairox.support.lazy_imports import LazyImport
from kairox.support.native_memory import release_mapped
from kairox.support.paths import private_file

__all__ = [
    "ANN_THRESHOLD",
    "NUMKONG",
    "AnnIndex",
    "CandidateIndex",
    "PassageRows",
    "blend",
    "candidates_for",
    "key_of",
    "keys_of",
    "positions_in",
    "quantise",
    "rescored_top_k",
    "scan_pool",
    "top_k_among",
    "write_array",
    "write_index",
]

NUMKONG = LazyImport(
    "numkong",
    needed_by="the approximate vector index of large collections",
    install="pip install 'kairox[ann]'",
)

#: Passages from which searches go through the index (below: exactly), by default: at
#: 10,000 SciFact-built passages with hashing vectors it already halved the p50 of exact
#: search with the same top 10 (``kairox bench scale --vectors``).
ANN_THRESHOLD = 10_000
#: Candidate rows looked up per result wanted, at least :data:`MIN_CANDIDATES` (200
#: instead of 100 bought no recall at 100,000 passages: ``ann_wide_*`` in the benchmark).
CANDIDATES_PER_RESULT = 10
MIN_CANDIDATES = 100
# Both cores (all of them) for the scan and for quantising: numkong lets go of the GIL.
_WORKERS = os.cpu_count() or 1
# Vectors quantised per task: bounds the float32 copies a task makes (1.5 MB each).
_BLOCK = 1_024
# Rows built per block: bounds the codes held and the mapped pages read (a few MB each).
_ROWS = 16 * _BLOCK


_POOL: list[ThreadPoolExecutor] = []
_POOL_LOCK = threading.Lock()


def scan_pool() -> ThreadPoolExecutor:
    """One pool of a thread per core for every index's scans (made on first use)."""
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(_WORKERS, "kairox-ann"))
        return _POOL[0]


def key_of(text_hash: str) -> int:
    """The index key of a vector: the first 64 bits of its (hex) text hash."""
    return int(text_hash[:16], 16)


def keys_of(text_hashes: Iterable[str]) -> np.ndarray:
    """:func:`key_of` for many hashes, as a ``uint64`` array."""
    return np.fromiter((key_of(h) for h in text_hashes), dtype=np.uint64)


def quantise(vectors: np.ndarray) -> np.ndarray:
    """Rows as int8, each scaled so its largest component is ±127 (all-zero rows stay 0):
    cosines between quantised rows follow those of the originals closely."""
    rows = np.asarray(vectors, dtype=np.float32)
    if rows.ndim == 1:
        rows = rows.reshape(1, -1)
    largest = np.abs(rows).max(axis=1, keepdims=True) if rows.size else rows[:, :1]
    scale = np.divide(127.0, largest, out=np.zeros_like(largest), where=largest > 0)
    return np.rint(rows * scale).astype(np.int8)


class AnnIndex:
    """The int8 codes of a collection's vectors, one row per vector, with each row's key
    (``None``: the codes are an int8 pack's own, and are not reused by a rebuild)."""

    def __init__(self, keys: np.ndarray | None, codes: np.ndarray) -> None:
        if (
            codes.ndim != 2
            or codes.dtype != np.int8
            or (keys is not None and len(keys) != len(codes))
        ):
            raise ValueError(
                f"an index needs one key per int8 row, got {len(keys or ())} keys and codes "
                f"of shape {codes.shape} ({codes.dtype})"
            )
        self.keys = None if keys is None else np.asarray(keys, dtype=np.uint64)
        self.codes = codes
        bounds = np.linspace(0, len(codes), _WORKERS + 1).astype(int)
        self._slices = [codes[a:b] for a, b in itertools.pairwise(bounds) if b > a]

    @property
    def dim(self) -> int:
        return int(self.codes.shape[1])

    def __len__(self) -> int:
        return len(self.codes)

    @classmethod
    def build(
        cls,
        keys: np.ndarray,
        vectors_of: Callable[[np.ndarray], np.ndarray],
        dim: int,
        previous: AnnIndex | None = None,
    ) -> tuple[AnnIndex, int]:
        """The index of ``keys`` (row ``i`` is key ``i``'s vector), in memory: rows
        ``previous`` holds are copied from it, the others quantised from
        ``vectors_of(positions in keys)``, a block at a time on every core. Returns it
        and how many were quantised (:func:`write_index` builds one straight to disk)."""
        keys = np.asarray(keys, dtype=np.uint64)
        codes = np.empty((len(keys), dim), dtype=np.int8)
        quantised = 0
        for start, block, new in _code_blocks(keys, vectors_of, dim, previous, ()):
            codes[start : start + len(block)] = block
            quantised += new
        return cls(keys, codes), quantised

    def save(self, codes_path: Path, keys_path: Path) -> None:
        """Write the codes and keys (each through a temporary file, then renamed; the
        codes last, so a reader never finds codes without their keys)."""
        assert self.keys is not None, "an int8 pack's own codes are saved with it"
        write_array(keys_path, [self.keys], self.keys.shape, self.keys.dtype)
        write_array(codes_path, [self.codes], self.codes.shape, self.codes.dtype)

    @classmethod
    def open(cls, codes_path: Path, keys_path: Path, dim: int) -> AnnIndex | None:
        """The index saved there, memory-mapped, or ``None`` when it is missing,
        unreadable or of another width (the caller then searches exactly, or rebuilds)."""
        try:
            keys = np.load(keys_path, mmap_mode="r", allow_pickle=False)
            codes = np.load(codes_path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError, EOFError):
            return None
        if keys.dtype != np.uint64 or codes.ndim != 2 or codes.shape[1] != dim:
            return None
        try:
            return cls(keys, codes)
        except ValueError:
            return None

    def scores(self, unit_query: np.ndarray) -> np.ndarray:
        """Every row's cosine with ``unit_query``, estimated from the int8 codes."""
        if not len(self):
            return np.zeros(0, dtype=np.float32)
        kernels, code = NUMKONG.load(), quantise(unit_query)

        def distances(rows: np.ndarray) -> np.ndarray:
            found = kernels.cdist(rows, code, metric="angular", out_dtype="float32")
            return np.asarray(found, dtype=np.float32).reshape(-1)

        if len(self._slices) > 1:
            distance = np.concatenate(list(scan_pool().map(distances, self._slices)))
        else:
            distance = distances(self.codes)
        return 1.0 - distance

    def candidates(self, unit_query: np.ndarray, layout: PassageRows, count: int) -> np.ndarray:
        """The ``count`` passages (ascending positions) of the best estimated scores:
        each passage's estimate blended with its best sentence's as exact search blends
        them (``sentences`` given), every row scanned."""
        estimates = self.scores(unit_query)
        passages = estimates[layout.chunk_rows]
        if layout.sentences is not None:
            best = layout.sentences.best_from(estimates, len(passages))
            passages = blend(passages, best, layout.sentence_weight)
        return np.sort(np.argpartition(-passages, count - 1)[:count])


def write_index(
    codes_path: Path,
    keys_path: Path,
    keys: np.ndarray,
    vectors_of: Callable[[np.ndarray], np.ndarray],
    dim: int,
    *,
    previous: AnnIndex | None = None,
    mapped: Sequence[np.ndarray | None] = (),
) -> int:
    """Build the index of ``keys`` as :meth:`AnnIndex.build` does, straight into its
    files (as :meth:`AnnIndex.save` writes them): a block of rows at a time, so memory
    stays bounded whatever the collection's size. ``mapped``: the memory-mapped arrays
    ``vectors_of`` reads, whose pages are handed back after each block (as
    ``previous``'s are). Returns how many vectors were quantised.

    :raises OSError: when a file cannot be written (nothing is left behind).
    """
    keys = np.asarray(keys, dtype=np.uint64)
    quantised = [0]

    def blocks() -> Iterator[np.ndarray]:
        for _, block, new in _code_blocks(keys, vectors_of, dim, previous, mapped):
            quantised[0] += new
            yield block

    write_array(keys_path, [keys], keys.shape, keys.dtype)
    write_array(codes_path, blocks(), (len(keys), dim), np.int8)
    return quantised[0]


def _code_blocks(
    keys: np.ndarray,
    vectors_of: Callable[[np.ndarray], np.ndarray],
    dim: int,
    previous: AnnIndex | None,
    mapped: Sequence[np.ndarray | None],
) -> Iterator[tuple[int, np.ndarray, int]]:
    """The codes of ``keys``, :data:`_ROWS` rows at a time, in order: (first row, the
    block's codes, how many of them were quantised rather than copied from ``previous``)."""
    if previous is not None and (previous.dim != dim or not len(previous)):
        previous = None
    if previous is not None and previous.keys is not None:
        order = np.argsort(previous.keys, kind="stable")
        held = previous.keys[order]
    # numpy lets go of the GIL inside each task's arithmetic, so tasks share the cores.
    with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
        for start in range(0, len(keys), _ROWS):
            block_keys = keys[start : start + _ROWS]
            codes = np.empty((len(block_keys), dim), dtype=np.int8)
            missing = np.arange(len(block_keys))
            if previous is not None and previous.keys is not None:
                at = np.minimum(np.searchsorted(held, block_keys), len(held) - 1)
                found = held[at] == block_keys
                codes[found] = previous.codes[order[at[found]]]
                missing = np.flatnonzero(~found)

            tasks = [missing[n : n + _BLOCK] for n in range(0, len(missing), _BLOCK)]
            list(pool.map(functools.partial(_quantise_into, codes, vectors_of, start), tasks))
            # The pages read for this block leave the resident set with it.
            release_mapped(*mapped, None if previous is None else previous.codes)
            yield start, codes, len(missing)


def _quantise_into(
    codes: np.ndarray,
    vectors_of: Callable[[np.ndarray], np.ndarray],
    offset: int,
    positions: np.ndarray,
) -> None:
    codes[positions] = quantise(vectors_of(offset + positions))


def positions_in(order: np.ndarray) -> np.ndarray:
    """Where each row number stands in ``order`` (a permutation of them): the inverse."""
    position = np.empty(len(order), dtype=np.int64)
    position[np.asarray(order)] = np.arange(len(order), dtype=np.int64)
    return position


def write_array(
    path: Path,
    blocks: Iterable[np.ndarray],
    shape: tuple[int, ...],
    dtype: np.dtype | type | None = None,
) -> None:
    """An ``.npy`` file of ``shape`` written from ``blocks`` (its rows in order) through
    a temporary file renamed into place; owner-only, as the pack beside it (the codes are
    the vectors, roughly)."""
    blocks = iter(blocks)
    if dtype is None:  # the first block's
        first = next(blocks)
        dtype, blocks = first.dtype, itertools.chain([first], blocks)
    dtype = np.dtype(dtype)
    partial = path.with_name(path.name + ".partial.npy")
    try:
        with open(private_file(partial), "wb") as handle:
            header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False}
            np.lib.format.write_array_header_1_0(handle, {**header, "shape": shape})
            written = 0
            for block in blocks:
                handle.write(np.ascontiguousarray(block, dtype=dtype).data)
                written += len(block)
        if written != shape[0]:
            raise ValueError(f"{written} rows written to {path.name}, {shape} expected")
        partial.replace(path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


@dataclass(frozen=True, eq=False)
class PassageRows:
    """Where the passages' vectors are among an index's rows: passage ``i``'s own is row
    ``chunk_rows[i]``, its sentences' are in ``sentences`` (``None``: passages alone),
    blended with ``sentence_weight`` as exact search blends them."""

    chunk_rows: np.ndarray
    sentences: SentenceVectors | None = None
    sentence_weight: float = 0.0


class CandidateIndex(Protocol):
    """What :func:`rescored_top_k` asks of an index: the passages worth scoring exactly
    (:class:`AnnIndex` scans every row; :class:`kairox.retrieval.ann_ivf.IvfIndex` the
    clusters nearest the query)."""

    def __len__(self) -> int: ...

    def candidates(self, unit_query: np.ndarray, layout: PassageRows, count: int) -> np.ndarray:
        """The ``count`` passages (ascending positions) worth scoring exactly."""


def blend(scores: np.ndarray, best: np.ndarray, sentence_weight: float) -> np.ndarray:
    """Passage scores blended with their best sentence's (``best``; NaN: a passage without
    sentences keeps its own) as exact search blends them, float32."""
    blended = (1 - sentence_weight) * scores + sentence_weight * best
    return np.where(np.isnan(best), scores, blended).astype(np.float32)


def candidates_for(k: int) -> int:
    """How many passages a search for ``k`` scores exactly: :data:`CANDIDATES_PER_RESULT`
    per result wanted, at least :data:`MIN_CANDIDATES`."""
    return max(MIN_CANDIDATES, k * CANDIDATES_PER_RESULT)


def rescored_top_k(
    index: CandidateIndex,
    chunk_rows: np.ndarray,
    matrix: np.ndarray | DecodedRows,
    query: np.ndarray,
    k: int,
    *,
    sentences: SentenceVectors | None = None,
    sentence_weight: float = 0.0,
    candidates: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the passage ``matrix`` and exact scores of the ``k`` best passages, best
    first (ties by row, rows scoring 0 or less left out, as
    :func:`~kairox.retrieval.vectors.top_k`, and sentence-aware as it is when
    ``sentences`` are given).

    The index holds the vectors the passages and sentences point into: passage ``i``'s
    vector is its row ``chunk_rows[i]``, a sentence's its row in ``sentences.rows``. It
    picks ``candidates`` passages (by default :func:`candidates_for`) by their estimated
    scores (:meth:`CandidateIndex.candidates`); those are then scored exactly. Only the
    candidates' rows of ``matrix`` and their sentences' are read: given as
    :class:`~kairox.retrieval.vectors.DecodedRows`, only those are decoded.
    """
    query = normalise(query)[0]
    aware = sentences is not None and sentence_weight and len(sentences.owners)
    count = min(len(chunk_rows), candidates or candidates_for(k))
    if count < 1:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    layout = PassageRows(chunk_rows, sentences if aware else None, sentence_weight)
    rows = index.candidates(query, layout, count)
    return top_k_among(rows, matrix, query, k, sentences=sentences, sentence_weight=sentence_weight)


def top_k_among(
    rows: np.ndarray,
    matrix: np.ndarray | DecodedRows,
    query: np.ndarray,
    k: int,
    *,
    sentences: SentenceVectors | None = None,
    sentence_weight: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~kairox.retrieval.vectors.top_k` over the passage ``rows`` of ``matrix``
    alone (an index's candidates, the passages a filter allows), scored exactly: only
    their rows and their sentences' are read, so only those are decoded from
    :class:`~kairox.retrieval.vectors.DecodedRows`. Ties are broken by row."""
    rows = np.asarray(rows, dtype=np.int64).reshape(-1)
    if not len(rows) or k < 1:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    query = normalise(query)[0]
    scores = row_scores(matrix, rows, query)
    if sentences is not None and sentence_weight and len(sentences.owners):
        best = sentences.best_of(query, rows)
        scores = blend(scores, best, sentence_weight)
    order = np.lexsort((rows, -scores))[:k]
    best_rows, best_scores = rows[order], scores[order]
    keep = best_scores > 0
    return best_rows[keep], best_scores[keep]
