"""An inverted-file (IVF) partition of a large collection's int8 vectors: a query scans
only the clusters nearest to it, so a search reads a few percent of the codes.

Centroids (about the square root of the row count) come from spherical k-means on a
sample (:func:`train_centroids`: at most :data:`SAMPLE_PER_CLUSTER` rows per cluster, read
a block at a time, so training memory is bounded whatever the collection); every vector
then goes to its nearest centroid, a block at a time (:func:`assign`). The index keeps
the rows cluster by cluster (``order``, with ``offsets``) and their int8 codes in that
order, contiguous per cluster, because gathering each probed cluster's rows from the pack
(numpy fancy indexing of the mapped pack) took 38.5 ms for 32 clusters of 2,000,000 rows
against 7.4 ms for the same rows scanned in place. An int8 pack's codes are then kept
there alone (:func:`kairox.workspace.vector_pack.hand_over_vectors`).

A search ranks the centroids against the query and scans the :attr:`IvfIndex.probes`
nearest clusters with numkong's int8 kernels, a share of them per core
(:meth:`IvfIndex.scan`): :data:`PROBE_SHARE` of the clusters, at least :data:`PROBES`
(:func:`probes_for`). The passages using one of the best scanned rows (as their vector
or a sentence's: :class:`RowUsers`) make the pool; every row a pooled passage uses is
estimated from its code, read when its cluster was not scanned (:meth:`IvfIndex.read`),
and the best passages by that estimate, blended with their best sentence's, are rescored
exactly (:func:`kairox.retrieval.ann.rescored_top_k`).

Why those rules. A fixed number of probes scans an ever smaller part of a growing
collection (clusters grow as its square root): 32 probes found 0.987 of the exact top 10
at 100,000 passages (``kairox bench scale --vectors --embedder minilm-cached``, int8,
sentence weight 0.5; 240,675 vectors, 491 clusters) but 0.960 at a million (2,042,000
vectors, 1,429 clusters). And a row outside the scanned clusters used to be estimated by
its centroid's cosine: a passage reached through a sentence it shares with its copies
(the benchmark's corpus repeats every passage some 190 times, one word changed) then
tied with every copy whose own row sat in an unscanned cluster, and 100 of them were
picked blindly; probing more clusters brought more passages into the pool and more of
those ties lost (100,000 passages: 0.977 at 64 probes against 0.987 at 32). Reading those
rows (a few hundred per query) ends the ties: on a simulation of that corpus (SciFact's
MiniLM vectors and their noisy copies at a cosine of 0.98, as the benchmark makes them;
100 queries) recall@10 went from 0.983 / 0.978 (32 / 64 probes) to 0.998 at 100,000
passages, and from 0.921 / 0.951 to 0.979 / 0.980 at a million. The rest there were
passages whose own row ranked just past the pool (4 rows per candidate) with their best
sentence in an unscanned cluster, and clusters ranked 70th: 8 rows per candidate and a
sixteenth of the clusters (90 of 1,428) gave 0.998 at a million, as at 100,000 (32
probes), at 1.2 times the old rule's time per query (46.5 against 38.7 ms p50 on the
simulated million, interleaved query by query, load 4). On the benchmark's own 100,000
passages (load 13-15; ``benchmarks/results/scale-minilm-cached-100k-read-rows.json``)
recall@10 is now 0.997 at 32 probes (as shipped) and at 64, p50 26.6 ms against 217.9 ms
exact; the knowledge base's hybrid search p50 13.9 ms warm. At a million (load 2-3,
an ingest beside; ``benchmarks/results/scale-minilm-cached-1m-ann-read-rows.json``):
1.000 as shipped (90 probes) at 21.7 ms p50, and already at 32 probes (10.1 ms), against
342.3 ms exact; 0.950 / 0.970 at 8 / 16. The rescoring depth
(:func:`~kairox.retrieval.ann.candidates_for`) stays: the linear scan finds every exact
result from the same 100 candidates.

Why numpy k-means and not faiss-cpu or usearch: training on the sample and assigning a
block of rows with one matrix product each took 50 s of CPU at two million vectors, in bounded
memory, with nothing to install; usearch has no IVF (its HNSW graph, built in memory,
would break the ingest memory bound at 2M vectors), and faiss-cpu's IVF would be a second
native library doing what numkong's kernels already do here.

Built incrementally: an ingest that adds vectors assigns only those to the existing
centroids (:func:`build_ivf` with the previous index), and trains anew only once the
collection has grown :data:`RETRAIN_GROWTH` times past the size it was trained on.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kairox.retrieval.ann import (
    NUMKONG,
    PassageRows,
    blend,
    positions_in,
    quantise,
    scan_pool,
    write_array,
)
from kairox.retrieval.vectors import SentenceVectors, normalise
from kairox.support.native_memory import release_mapped
from kairox.support.paths import private_file

__all__ = [
    "IVF_THRESHOLD",
    "PROBES",
    "PROBE_SHARE",
    "IvfIndex",
    "RowUsers",
    "assign",
    "build_ivf",
    "cluster_count",
    "probes_for",
    "train_centroids",
]

#: Vectors (passages and sentences) from which a collection's index is partitioned: below,
#: the linear int8 scan of :mod:`kairox.retrieval.ann` is as fast (measured at 240,675
#: vectors: ``kairox bench scale --vectors``).
IVF_THRESHOLD = 200_000
#: At least this many clusters are scanned per query (:func:`probes_for`).
PROBES = 32
#: The share of the clusters scanned per query, from :data:`PROBES` clusters on.
PROBE_SHARE = 1 / 16
#: Scanned rows (the best estimated) whose passages are candidates, per candidate wanted.
ROWS_PER_CANDIDATE = 8
#: At most this many sampled rows per cluster train the centroids.
SAMPLE_PER_CLUSTER = 64
#: Retrain once the collection has this many times the rows it was trained on.
RETRAIN_GROWTH = 2.0
# Rows assigned per block: bounds the float32 copies and scores an assignment holds
# (8,192 rows: 12 MB of vectors, 46 MB of scores against 1,414 centroids).
_ROWS = 8_192
_ITERATIONS = 12
# A share of the probed clusters per thread of the scan pool (one per core).
_WORKERS = os.cpu_count() or 1


def cluster_count(vectors: int) -> int:
    """How many clusters a collection of ``vectors`` is partitioned into: about the square
    root (each cluster then about as large as the centroid list), at least 16."""
    return max(16, round(math.sqrt(vectors)))


def probes_for(clusters: int) -> int:
    """How many of ``clusters`` a query scans: :data:`PROBE_SHARE` of them, at least
    :data:`PROBES` (all of them when there are fewer). A share, not a count: clusters
    grow as the square root of the collection, so a fixed count scans an ever smaller
    part of it, and recall falls with size (32 probes: 0.987 at 100,000 passages, 0.960
    at a million)."""
    return min(clusters, max(PROBES, math.ceil(clusters * PROBE_SHARE)))


def train_centroids(
    vectors_of: Callable[[np.ndarray], np.ndarray],
    count: int,
    clusters: int,
    *,
    seed: int = 0,
    mapped: Sequence[np.ndarray | None] = (),
) -> np.ndarray:
    """Unit centroids of spherical k-means on a sample of ``count`` rows (read with
    ``vectors_of(sorted positions)`` a block at a time, handing back the ``mapped``
    arrays' pages after each: at most :data:`SAMPLE_PER_CLUSTER` rows per cluster)."""
    rng = np.random.default_rng(seed)
    size = min(count, clusters * SAMPLE_PER_CLUSTER)
    positions = np.sort(rng.choice(count, size, replace=False))
    sample = np.empty((0, 0), dtype=np.float32)
    for start in range(0, size, _ROWS):
        block = normalise(vectors_of(positions[start : start + _ROWS]))
        if not start:
            sample = np.empty((size, block.shape[1]), dtype=np.float32)
        sample[start : start + len(block)] = block
        # A sampled row's page is read whole: the pages go back with each block.
        release_mapped(*mapped)
    clusters = min(clusters, len(sample))
    centroids = sample[rng.choice(len(sample), clusters, replace=False)].copy()
    for _ in range(_ITERATIONS):
        sums = np.zeros_like(centroids)
        sizes = np.zeros(clusters, dtype=np.int64)
        # A block at a time: the scores of the whole sample against every centroid would
        # be hundreds of MB at a million vectors.
        for start in range(0, len(sample), _ROWS):
            block = sample[start : start + _ROWS]
            nearest = np.argmax(block @ centroids.T, axis=1)
            order = np.argsort(nearest, kind="stable")
            used, first = np.unique(nearest[order], return_index=True)
            sums[used] += np.add.reduceat(block[order], first)
            sizes += np.bincount(nearest, minlength=clusters)
        empty = np.flatnonzero(sizes == 0)
        # An empty cluster restarts on a random sample row (not left dead).
        sums[empty] = sample[rng.choice(len(sample), len(empty), replace=False)]
        centroids = normalise(sums)
    return centroids


def assign(
    centroids: np.ndarray,
    vectors_of: Callable[[np.ndarray], np.ndarray],
    positions: np.ndarray,
    mapped: Sequence[np.ndarray | None] = (),
) -> np.ndarray:
    """The nearest centroid of each row ``positions`` (read a block at a time, handing
    back the ``mapped`` arrays' pages after each)."""
    found = np.empty(len(positions), dtype=np.int32)
    for start in range(0, len(positions), _ROWS):
        block = vectors_of(positions[start : start + _ROWS])
        found[start : start + len(block)] = np.argmax(block @ centroids.T, axis=1)
        release_mapped(*mapped)
    return found


@dataclass
class IvfIndex:
    """A partition of ``len(order)`` rows into clusters.

    :param centroids: ``(clusters, dim)`` unit float32 rows.
    :param offsets: cluster ``c``'s rows are ``order[offsets[c]:offsets[c + 1]]``.
    :param order: row numbers (of the collection), cluster by cluster, ascending within.
    :param codes: the rows' int8 codes in ``order`` (contiguous per cluster; ``None``
        while it is being built).
    :param trained: how many rows the centroids were trained on (retraining decides).
    """

    centroids: np.ndarray
    offsets: np.ndarray
    order: np.ndarray
    codes: np.ndarray | None = None
    trained: int = 0

    def __post_init__(self) -> None:
        clusters = len(self.centroids)
        if len(self.offsets) != clusters + 1 or int(self.offsets[-1]) != len(self.order):
            raise ValueError(
                f"an IVF index needs {clusters + 1} offsets ending at {len(self.order)} rows"
            )
        self._cluster_of: np.ndarray | None = None
        self._position: np.ndarray | None = None
        self._users: tuple[np.ndarray, SentenceVectors | None, RowUsers] | None = None
        #: Clusters scanned per query.
        self.probes = probes_for(clusters)
        #: Best scanned rows whose passages are candidates, per candidate wanted.
        self.rows_per_candidate = ROWS_PER_CANDIDATE

    def __len__(self) -> int:
        return len(self.order)

    def cluster_of(self) -> np.ndarray:
        """Each row's cluster (made on first use, then kept)."""
        if self._cluster_of is None:
            found = np.empty(len(self.order), dtype=np.int32)
            sizes = np.diff(self.offsets)
            found[self.order] = np.repeat(np.arange(len(self.centroids), dtype=np.int32), sizes)
            self._cluster_of = found
        return self._cluster_of

    def position_of(self) -> np.ndarray:
        """Each row's position in ``order`` and ``codes`` (made on first use, then kept)."""
        if self._position is None:
            self._position = positions_in(self.order)
        return self._position

    def probed(self, unit_query: np.ndarray) -> np.ndarray:
        """The :attr:`probes` clusters whose centroids are nearest ``unit_query``."""
        central = self.centroids @ unit_query
        probes = max(1, min(self.probes, len(central)))
        return np.argpartition(-central, probes - 1)[:probes]

    def scan(
        self, unit_query: np.ndarray, clusters: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The rows of ``clusters`` (by default the :meth:`probed` ones) and their cosines
        with ``unit_query`` estimated from their int8 codes (numkong's kernels)."""
        if clusters is None:
            clusters = self.probed(unit_query)
        # Ascending clusters read the codes forward; a share of them per core (numkong
        # lets go of the GIL).
        shares = np.array_split(np.sort(clusters), min(_WORKERS, max(len(clusters), 1)))
        code = quantise(unit_query)
        parts = list(scan_pool().map(functools.partial(self._scanned, code), shares))
        rows = [part[0] for part in parts if len(part[0])]
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        return np.concatenate(rows), np.concatenate([part[1] for part in parts if len(part[0])])

    def _scanned(self, code: np.ndarray, clusters: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        kernels = NUMKONG.load()
        rows, found = [], []
        for cluster in clusters.tolist():
            start, end = int(self.offsets[cluster]), int(self.offsets[cluster + 1])
            if end > start:
                rows.append(np.asarray(self.order[start:end], dtype=np.int64))
                distances = kernels.cdist(
                    self.codes[start:end], code, metric="angular", out_dtype="float32"
                )
                found.append(1.0 - np.asarray(distances, dtype=np.float32).reshape(-1))
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        return np.concatenate(rows), np.concatenate(found)

    def read(self, unit_query: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The cosines of ``rows`` (any clusters') with ``unit_query``, estimated from their
        int8 codes as :meth:`scan` estimates them."""
        if not len(rows):
            return np.zeros(0, dtype=np.float32)
        codes = self.codes[self.position_of()[rows]]
        found = NUMKONG.load().cdist(
            codes, quantise(unit_query), metric="angular", out_dtype="float32"
        )
        return 1.0 - np.asarray(found, dtype=np.float32).reshape(-1)

    def candidates(self, unit_query: np.ndarray, layout: PassageRows, count: int) -> np.ndarray:
        """The ``count`` passages (ascending positions) of the best estimated scores among
        those using one of the :attr:`rows_per_candidate` times ``count`` best scanned
        rows (as their vector or a sentence's), each passage's estimate blended with its
        best sentence's as exact search blends them. Every row those passages use is
        estimated from its code: the scan's estimate, or the row read (:meth:`read`) when
        its cluster was not probed."""
        clusters = self.probed(unit_query)
        rows, found = self.scan(unit_query, clusters)
        chunk_rows, sentences = np.asarray(layout.chunk_rows), layout.sentences
        users = self._users_of(layout.chunk_rows, sentences)
        wanted = min(len(rows), self.rows_per_candidate * count)
        if wanted < 1:
            return np.zeros(0, dtype=np.int64)
        best_rows = rows[np.argpartition(-found, wanted - 1)[:wanted]]
        passages = np.unique(users.passages[_ranges(users.starts, best_rows)])
        if not len(passages):  # rows no passage uses
            return np.zeros(0, dtype=np.int64)
        # Only the rows written here are read back: the scanned ones and the passages'.
        estimates = np.empty(len(self), dtype=np.float32)
        estimates[rows] = found
        used = chunk_rows[passages]
        if sentences is not None:
            used = np.concatenate(
                (used, users.sentence_rows[_ranges(users.sentence_starts, passages)])
            )
        probed = np.zeros(len(self.centroids), dtype=bool)
        probed[clusters] = True
        unread = np.unique(used[~probed[self.cluster_of()[used]]])
        estimates[unread] = self.read(unit_query, unread)
        scores = estimates[chunk_rows[passages]]
        if sentences is not None:
            best = users.best_sentence(estimates, passages)
            scores = blend(scores, best, layout.sentence_weight)
        count = min(count, len(passages))
        return np.sort(passages[np.argpartition(-scores, count - 1)[:count]])

    def _users_of(self, chunk_rows: np.ndarray, sentences: SentenceVectors | None) -> RowUsers:
        held = self._users
        if held is None or held[0] is not chunk_rows or held[1] is not sentences:
            held = (chunk_rows, sentences, RowUsers.of(len(self), chunk_rows, sentences))
            self._users = held
        return held[2]

    # -- files ---------------------------------------------------------------------

    def save(
        self,
        stem: Path,
        codes_of: Callable[[np.ndarray], np.ndarray],
        mapped: Sequence[np.ndarray | None] = (),
    ) -> None:
        """Write the index's files beside ``stem``, the codes from ``codes_of(rows)`` (int8,
        the rows' vectors) a block at a time, handing back the ``mapped`` arrays' pages
        after each. Each file is renamed into place, the meta last, so a reader never
        finds it without its arrays."""
        write_array(_path(stem, "centroids"), [self.centroids], self.centroids.shape)
        write_array(_path(stem, "offsets"), [self.offsets], self.offsets.shape)
        write_array(_path(stem, "order"), [self.order], self.order.shape)

        def blocks() -> Iterator[np.ndarray]:
            for start in range(0, len(self.order), _ROWS):
                # Ascending rows read the mapped vectors forward.
                rows = np.asarray(self.order[start : start + _ROWS])
                ascending = np.argsort(rows, kind="stable")
                block = np.empty((len(rows), self.centroids.shape[1]), dtype=np.int8)
                block[ascending] = codes_of(rows[ascending])
                release_mapped(*mapped)
                yield block

        shape = (len(self.order), self.centroids.shape[1])
        write_array(_path(stem, "codes"), blocks(), shape, np.int8)
        meta = {"trained": self.trained, "rows": len(self.order)}
        # Owner-only and renamed into place, as the arrays are (write_array).
        meta_path = _path(stem, "meta", ".json")
        partial = meta_path.with_name(meta_path.name + ".partial")
        private_file(partial).write_text(json.dumps(meta))
        partial.replace(meta_path)

    @classmethod
    def open(cls, stem: Path, dim: int) -> IvfIndex | None:
        """The index saved beside ``stem``, memory-mapped, or ``None`` when it is missing,
        unreadable or of another width (the caller then searches otherwise, or rebuilds)."""
        try:
            meta = json.loads(_path(stem, "meta", ".json").read_text())
            arrays = {
                name: np.load(_path(stem, name), mmap_mode="r", allow_pickle=False)
                for name in ("centroids", "offsets", "order", "codes")
            }
            index = cls(
                np.asarray(arrays["centroids"], dtype=np.float32),
                np.asarray(arrays["offsets"], dtype=np.int64),
                arrays["order"],
                arrays["codes"],
                int(meta["trained"]),
            )
        except (OSError, ValueError, EOFError, TypeError, KeyError, AttributeError):
            return None
        if index.centroids.shape[1:] != (dim,) or index.codes is None:
            return None
        if index.codes.shape != (meta["rows"], dim) or len(index) != meta["rows"]:
            return None
        return index


@dataclass(frozen=True)
class RowUsers:
    """Which passages use each vector row (as their own vector or a sentence's), and
    each passage's sentence rows: both as ranges of one array, by row and by passage."""

    starts: np.ndarray  # row r's passages: passages[starts[r]:starts[r + 1]]
    passages: np.ndarray
    sentence_starts: np.ndarray  # passage p's sentence rows: sentence_rows[...[p]:...[p + 1]]
    sentence_rows: np.ndarray

    @classmethod
    def of(cls, rows: int, chunk_rows: np.ndarray, sentences: SentenceVectors | None) -> RowUsers:
        count = len(chunk_rows)
        owners = np.zeros(0, dtype=np.int64)
        vector_rows = np.zeros(0, dtype=np.int64)
        if sentences is not None:
            owners = np.asarray(sentences.owners, dtype=np.int64)
            vector_rows = (
                np.arange(len(owners)) if sentences.rows is None else np.asarray(sentences.rows)
            )
        by_owner = np.argsort(owners, kind="stable")
        users = np.concatenate((np.asarray(chunk_rows, dtype=np.int64), vector_rows))
        by_row = np.argsort(users, kind="stable")
        passages = np.concatenate((np.arange(count), owners))[by_row].astype(np.int32)
        return cls(
            np.searchsorted(users[by_row], np.arange(rows + 1)),
            passages,
            np.searchsorted(owners[by_owner], np.arange(count + 1)),
            vector_rows[by_owner].astype(np.int64),
        )

    def best_sentence(self, estimates: np.ndarray, passages: np.ndarray) -> np.ndarray:
        """Per passage, its best sentence's estimate; NaN for one without sentences."""
        best = np.full(len(passages), np.nan, dtype=np.float32)
        counts = self.sentence_starts[passages + 1] - self.sentence_starts[passages]
        has = counts > 0
        if has.any():
            values = estimates[self.sentence_rows[_ranges(self.sentence_starts, passages[has])]]
            best[has] = np.maximum.reduceat(values, np.cumsum(counts[has]) - counts[has])
        return best


def _ranges(starts: np.ndarray, which: np.ndarray) -> np.ndarray:
    """The positions ``starts[w]:starts[w + 1]`` of every ``w`` in ``which``, in order."""
    low = starts[which]
    counts = starts[which + 1] - low
    ends = np.cumsum(counts)
    return np.arange(int(ends[-1]) if len(ends) else 0) - np.repeat(ends - counts - low, counts)


def _path(stem: Path, name: str, suffix: str = ".npy") -> Path:
    return Path(f"{stem}.ivf-{name}{suffix}")


def build_ivf(
    vectors_of: Callable[[np.ndarray], np.ndarray],
    count: int,
    *,
    previous: tuple[IvfIndex, np.ndarray] | None = None,
    keys: np.ndarray | None = None,
    mapped: Sequence[np.ndarray | None] = (),
    clusters: int | None = None,
) -> tuple[IvfIndex, int]:
    """The partition of ``count`` rows (``vectors_of(positions)`` gives their unit
    float32 vectors). With ``previous`` (an index and its rows' keys) and ``keys`` (this
    collection's), rows it held keep their cluster, and only new rows are assigned, to
    its centroids, unless the collection outgrew them (:data:`RETRAIN_GROWTH`). Returns
    the index (no codes: the caller saves them, or reads its own) and how many rows
    were assigned."""
    positions = np.arange(count, dtype=np.int64)
    found = np.full(count, -1, dtype=np.int32)
    old = None
    if previous is not None and keys is not None:
        old_index, old_keys = previous
        if len(old_index) and count <= RETRAIN_GROWTH * max(old_index.trained, 1):
            old = old_index
            order = np.argsort(old_keys, kind="stable")
            held = np.asarray(old_keys)[order]
            at = np.minimum(np.searchsorted(held, keys), len(held) - 1)
            kept = held[at] == keys
            found[kept] = old.cluster_of()[order[at[kept]]]
    if old is not None:
        centroids, trained = np.asarray(old.centroids), old.trained
    else:
        clusters = clusters or cluster_count(count)
        centroids = train_centroids(vectors_of, count, clusters, mapped=mapped)
        trained = count
    missing = positions[found < 0]
    found[missing] = assign(centroids, vectors_of, missing, mapped)
    # Cluster by cluster, ascending rows within one (a stable sort).
    order = np.argsort(found, kind="stable").astype(np.int64)
    sizes = np.bincount(found, minlength=len(centroids))
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    return IvfIndex(centroids.astype(np.float32), offsets, order, None, trained), len(missing)
