"""kairox.context.assembly: the trace an assembly gives, every source with tokens and drops."""

from __future__ import annotations

import json

from kairox.context.assembler import DROP_OLDER_HISTORY, AssemblyInput
from kairox.support.models import ChatMessage

from .conftest import assembler, every_source, fits_exactly, hit, memory, recount, turn


def test_trace_names_every_source_with_tokens_and_drops():
    data = AssemblyInput(
        "sys",
        "go",
        memories=[memory(1, "m")],
        knowledge_base_hits={"kb": [hit("k", "kb text")]},
        history=[turn(i) for i in range(8)],
    )
    fixed = fits_exactly(AssemblyInput("sys", "go", memories=[memory(1, "m")]))
    result = assembler(fixed + 60).assemble(data)
    trace = json.loads(json.dumps(result.trace()))
    assert trace["budget"] == fixed + 60
    assert trace["used_tokens"] == result.used_tokens == recount(result.messages, "o200k_base")
    by_source = {s["source"]: s for s in trace["sources"]}
    assert set(by_source) == set(every_source("kb"))
    assert sum(s["tokens"] for s in trace["sources"]) == trace["used_tokens"]
    assert by_source["memory:user"]["included"] == 1
    assert by_source["prompt"]["tokens"] == recount([ChatMessage("user", "go")], "o200k_base") - 3
    history = by_source["history"]
    assert history["dropped"] > 0
    assert DROP_OLDER_HISTORY in history["reasons"]
    # The dropped turns 0 .. n-1 are one range: from turn 0's first event to turn n-1's last.
    dropped = history["dropped"]
    assert history["dropped_items"] == [f"events 0-{dropped * 10 - 9} ({dropped} turns)"]
