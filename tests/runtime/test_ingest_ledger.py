"""kairox.runtime.ingest_ledger: the ids an ingest run has seen, kept on disk."""

from __future__ import annotations

import pytest

from kairox.runtime.ingest_ledger import IngestLedger


@pytest.fixture
def ledger():
    with IngestLedger() as opened:
        yield opened


def test_copies_of_an_id_are_counted_and_only_repeats_reported(ledger):
    ledger.add_inputs(["a", "b", "a"])
    ledger.add_inputs(["a", "c"])
    assert ledger.repeated() == {"a": 3}
    assert ledger.inputs_among(["a", "c", "z"]) == {"a", "c"}
    ledger.forget_input("c")
    assert ledger.inputs_among(["c"]) == set()


def test_produced_ids_are_found_across_lookup_batches(ledger):
    ids = [f"doc{n}#{n % 7}" for n in range(1_203)]
    ledger.add_produced(ids[::2])
    ledger.add_produced(ids[:2])  # again: kept once
    assert ledger.produced_among(ids) == set(ids[::2]) | {ids[1]}


def test_an_id_holding_an_escaped_byte_round_trips(ledger):
    odd = "caf\udce9.txt"  # a file name that is not UTF-8, as os.fsdecode gives it
    ledger.add_inputs([odd, odd])
    assert ledger.repeated() == {odd: 2}
    ledger.add_produced([odd])
    assert ledger.produced_among([odd, "other"]) == {odd}
