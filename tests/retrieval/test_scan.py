"""A large product shared with a helper thread: bit-for-bit the one-call product on one BLAS
thread, whatever the helper does (helps, is late, stalls in the middle of a chunk)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from kairox.retrieval.model import FAN_OUT
from kairox.retrieval.scan import ALIGN, MIN_BYTES, Helper, search_product, shared_product
from kairox.retrieval.vectors import SentenceVectors, top_k


def _unit(rows: int, dim: int, seed: int) -> np.ndarray:
    matrix = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def large() -> np.ndarray:
    # Over MIN_BYTES, and a row count that is no multiple of ALIGN (a short last chunk).
    matrix = _unit(33_333, 96, seed=1)
    assert matrix.nbytes >= MIN_BYTES and matrix.shape[0] % ALIGN
    return matrix


@pytest.fixture(scope="module")
def queries() -> np.ndarray:
    return _unit(6, 96, seed=2)


def _one_thread(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    # The reference: one call on one BLAS thread, what a search next to other sources
    # computed before (several BLAS threads split the rows elsewhere: other last bits).
    with threadpool_limits(limits=1, user_api="blas"):
        return matrix @ query


class _Held(Helper):
    """A helper whose jobs wait in a list until the test runs them in a thread of its own."""

    def __init__(self) -> None:
        self.jobs: list = []

    def submit(self, job) -> None:
        self.jobs.append(job)


def test_the_shared_product_is_bit_for_bit_the_one_call_product(large, queries):
    helper = Helper("test-scan")
    for query in queries:
        assert np.array_equal(
            shared_product(large, query, helper=helper), _one_thread(large, query)
        )


def test_a_helper_that_never_runs_costs_nothing_but_its_share(large, queries):
    helper = _Held()
    answer = shared_product(large, queries[0], helper=helper)
    assert np.array_equal(answer, _one_thread(large, queries[0]))
    (job,) = helper.jobs
    kept = answer.copy()
    job()  # late: every chunk is done, it takes none and changes nothing
    assert np.array_equal(answer, kept)


def test_a_helper_stalled_inside_a_chunk_is_not_waited_for(large, queries):
    helper = _Held()
    go = threading.Event()
    took = threading.Event()

    def stall_in_a_chunk() -> None:
        (job,) = helper.jobs
        product = job.__self__  # the product the helper was given
        chunk = product.take()
        took.set()
        go.wait()
        product.compute(chunk)  # after the caller repeated this chunk and returned

    original_submit = helper.submit

    def submit(job) -> None:
        original_submit(job)
        thread = threading.Thread(target=stall_in_a_chunk)
        thread.start()
        took.wait()  # the helper holds its chunk before the caller starts
        helper.thread = thread

    helper.submit = submit  # type: ignore[method-assign]
    answer = shared_product(large, queries[1], helper=helper)
    assert np.array_equal(answer, _one_thread(large, queries[1]))
    kept = answer.copy()
    go.set()
    helper.thread.join()
    assert np.array_equal(answer, kept)


def test_small_and_degenerate_inputs_are_one_call(queries):
    helper = _Held()
    small = _unit(1_000, 96, seed=3)
    assert np.array_equal(shared_product(small, queries[0], helper=helper), small @ queries[0])
    empty = np.zeros((0, 96), dtype=np.float32)
    assert shared_product(empty, queries[0], helper=helper).shape == (0,)
    assert helper.jobs == []  # none of these was worth a hand-off


def test_search_product_next_to_other_sources_matches_one_thread(large, queries):
    alone = [_one_thread(large, q) for q in queries]
    token = FAN_OUT.set(2)
    try:
        shared = [search_product(large, q) for q in queries]
    finally:
        FAN_OUT.reset(token)
    assert all(np.array_equal(a, b) for a, b in zip(alone, shared, strict=True))


def test_sentence_aware_rankings_are_the_same_shared_or_not(large, queries):
    passages = _unit(3_000, 96, seed=4)
    owners = np.sort(np.random.default_rng(5).integers(0, 3_000, size=large.shape[0]))
    sentences = SentenceVectors(large, owners, unit=True)
    for query in queries:
        with threadpool_limits(limits=1, user_api="blas"):
            alone = top_k(passages, query, 100, sentences=sentences)
        token = FAN_OUT.set(2)
        try:
            shared = top_k(passages, query, 100, sentences=sentences)
        finally:
            FAN_OUT.reset(token)
        assert np.array_equal(alone[0], shared[0]) and np.array_equal(alone[1], shared[1])
        assert len(alone[0]) == 100


def test_a_forked_child_starts_a_helper_of_its_own(large, queries):
    import multiprocessing

    token = FAN_OUT.set(2)
    try:
        search_product(large, queries[0])  # the parent's helper exists now
    finally:
        FAN_OUT.reset(token)
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        helped = pool.apply(_child_product, (large, queries[2]))
    assert np.array_equal(helped, _one_thread(large, queries[2]))


def _child_product(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    from kairox.retrieval import scan

    assert scan._helper is None  # not the parent's (its thread is not in this process)
    token = FAN_OUT.set(2)
    try:
        answer = search_product(matrix, query)
    finally:
        FAN_OUT.reset(token)
    assert scan._helper is not None and scan._helper._thread.is_alive()
    return answer
