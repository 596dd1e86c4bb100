"""``RunStats.as_json``: every field in order, hidden ones left out, tallies sorted."""

from __future__ import annotations

from dataclasses import dataclass, field

from kairox.support.run_stats import HIDDEN, PATH_WHYS, TALLY, RunStats


@dataclass
class Example(RunStats):
    written: int = 0
    reasons: dict[str, int] = field(default_factory=dict, metadata=TALLY)
    why: list[tuple[str, str]] = field(default_factory=list, metadata=PATH_WHYS)
    notes: list[str] = field(default_factory=list, metadata=HIDDEN)
    size: int | None = None


def test_fields_print_in_order_with_their_metadata():
    stats = Example(written=3, reasons={"too large": 1, "binary": 2}, notes=["kept"])
    stats.why.append(("a.bin", "binary"))
    printed = stats.as_json()
    assert list(printed) == ["written", "reasons", "why", "size"]
    assert list(printed["reasons"].items()) == [("binary", 2), ("too large", 1)]
    assert printed["why"] == [{"path": "a.bin", "why": "binary"}]
    assert printed["size"] is None
    assert stats.notes == ["kept"]
