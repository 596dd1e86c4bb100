"""The proposal rate bounds, driven by a clock the test moves."""

from __future__ import annotations

from kairox.config.schema import MemoryConfig
from kairox.memory.limits import DEFAULT_LIMITS, ProposalLimits, ProposalRate


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_per_minute_bound_lets_a_client_through_again_after_the_window():
    clock = Clock()
    rate = ProposalRate(ProposalLimits(max_per_minute=3, max_per_session=100), clock=clock)
    assert [rate.admit("s") for _ in range(3)] == [None, None, None]
    clock.now += 20
    refused = rate.admit("s")
    assert refused is not None and "3 memory proposals in the last minute" in refused
    assert "try again in 40 s" in refused
    assert rate.admit("other") is None  # each session has its own window
    clock.now += 40
    assert rate.admit("s") is None


def test_per_session_bound_counts_only_what_was_admitted():
    clock = Clock()
    rate = ProposalRate(ProposalLimits(max_per_minute=2, max_per_session=3), clock=clock)
    assert rate.admit("s") is None and rate.admit("s") is None
    assert rate.admit("s") is not None  # per minute; not counted
    clock.now += 60
    assert rate.admit("s") is None  # the third admitted
    refused = rate.admit("s")
    assert refused is not None and "already made 3 memory proposals" in refused


def test_zero_allows_none_and_the_config_defaults_are_the_limits_defaults():
    assert ProposalRate(ProposalLimits(max_per_session=0)).admit("s") is not None
    assert MemoryConfig().limits() == DEFAULT_LIMITS
