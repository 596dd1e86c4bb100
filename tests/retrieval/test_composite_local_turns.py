"""When the local sources are asked in turn: while their answers mostly compute, and not
while they mostly wait (for a contended CPU, or the disk), where threads of their own finish
sooner; then once in a while in turn again, to see whether the waiting has passed."""

from __future__ import annotations

import threading

from kairox.retrieval import CompositeWorkspaceRetriever, Hit, Query, SourceStatus
from kairox.retrieval.composite_local import JUDGED_AFTER, PROBE_EVERY, WAITING_MS, TurnCosts
from tests.retrieval.test_composite_local import LocalSource


def test_answers_that_mostly_compute_are_always_asked_in_turn() -> None:
    costs = TurnCosts()
    for _ in range(3 * PROBE_EVERY):
        costs.note(cpu_ms=40.0, wall_ms=45.0)  # slow, but computing
        assert costs.take_turn()
    assert not costs.waiting()


def test_waiting_is_judged_only_after_a_few_searches() -> None:
    costs = TurnCosts()
    for _ in range(JUDGED_AFTER - 1):
        costs.note(cpu_ms=1.0, wall_ms=50.0)
        assert not costs.waiting()
    costs.note(cpu_ms=1.0, wall_ms=50.0)
    assert costs.waiting()


def test_one_search_that_waited_long_changes_nothing() -> None:
    costs = TurnCosts()
    for wall_ms in (1.0, 1.0, 200.0, 1.0, 1.0):  # preempted once
        costs.note(cpu_ms=0.8, wall_ms=wall_ms)
    assert not costs.waiting()


def test_a_short_wait_is_no_reason_to_leave_the_turn() -> None:
    costs = TurnCosts()
    for _ in range(JUDGED_AFTER):
        costs.note(cpu_ms=0.1, wall_ms=WAITING_MS / 2)  # 50x the CPU time, yet short
    assert not costs.waiting()


def test_while_waiting_one_search_in_so_many_is_asked_in_turn() -> None:
    costs = TurnCosts()
    for _ in range(JUDGED_AFTER):
        costs.note(cpu_ms=2.0, wall_ms=60.0)
    turns = [costs.take_turn() for _ in range(2 * PROBE_EVERY)]
    assert turns.count(True) == 2
    assert turns[PROBE_EVERY - 1] and turns[-1]
    # Turns that compute again bring the averages back down: in turn from then on.
    for _ in range(20):
        costs.note(cpu_ms=2.0, wall_ms=2.5)
    assert all(costs.take_turn() for _ in range(PROBE_EVERY))


class WaitingLocalSource(LocalSource):
    """Waits 15 ms in whichever thread asks it locally (as on a cold disk or a busy CPU)."""

    def retrieve_local(self, query: Query) -> list[Hit]:
        threading.Event().wait(1.5 * WAITING_MS / 1000)
        return super().retrieve_local(query)


def test_local_sources_that_mostly_wait_are_asked_in_threads_of_their_own() -> None:
    waiting, quick = WaitingLocalSource("waiting", ["w"]), LocalSource("quick", ["q"])
    composite = CompositeWorkspaceRetriever([waiting, quick])
    try:
        for _ in range(JUDGED_AFTER):
            composite.retrieve_sync(Query("q"))
        assert len(waiting.local_calls) == JUDGED_AFTER and waiting.loop_calls == 0
        result = composite.retrieve_sync(Query("q"))
    finally:
        composite.close()
    assert waiting.loop_calls == quick.loop_calls == 1  # each in a worker thread of its own
    assert len(quick.local_calls) == JUDGED_AFTER
    assert [r.status for r in result.reports] == [SourceStatus.OK, SourceStatus.OK]
    assert composite.answers_here()  # still local sources: asked in turn once it passes
