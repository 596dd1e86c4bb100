"""How the ``kairox bench`` reports print as tables: a column is a header and a function
of the report's row, and one loop fills any table from its columns."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rich.table import Table

from kairox.cli.app import console

__all__ = [
    "cell",
    "compaction",
    "composite",
    "context",
    "markers",
    "rows_table",
    "scaling",
]

Row = dict[str, Any]
Column = tuple[str, Callable[[Row], str]]


def cell(key: str, spec: str = "", *inner: str, none: str | None = None) -> Callable[[Row], str]:
    """``row[key]`` (then ``[inner...]``) formatted with ``spec``; ``none`` where it is null."""

    def render(row: Row) -> str:
        value = row[key]
        for name in inner:
            value = value[name]
        if value is None and none is not None:
            return none
        return format(value, spec)

    return render


def _yes(key: str) -> Callable[[Row], str]:
    return lambda row: "yes" if row[key] else "NO"


def rows_table(columns: Sequence[Column], rows: Iterable[Row], title: str | None = None) -> Table:
    """A table of ``columns`` with one line a row."""
    table = Table(*(header for header, _ in columns), title=title)
    for row in rows:
        table.add_row(*(render(row) for _, render in columns))
    return table


_COMPOSITE: tuple[Column, ...] = (
    ("sources", cell("scenario")),
    ("N", cell("sources")),
    ("path", cell("path")),
    ("slowest source p50", cell("slowest_source_ms", ".2f", "p50")),
    ("in sequence p50", cell("sources_in_sequence_ms", ".2f", "p50")),
    ("composite p50", cell("composite_ms", ".2f", "p50")),
    ("p95", cell("composite_ms", ".2f", "p95")),
    ("overhead p50", cell("overhead_ms", ".2f", "p50")),
    ("p95", cell("overhead_ms", ".2f", "p95")),
    ("CPU floor p50", cell("cpu_floor_ms", ".2f", "p50")),
    ("bound", lambda row: f"{row['bound_ms']:.2f}" + ("" if row["within_bound"] else " ✗")),
)


def composite(report: dict[str, Any]) -> None:
    """Fan-out latency per scenario and N, then the fault run."""
    title = f"fan-out, ms ({report['queries']} queries)"
    console.print(rows_table(_COMPOSITE, report["fan_out"], title))
    fault = report["faults"]
    console.print(
        f"faults: {len(fault['sources']) - 2} healthy + slow (deadline {fault['deadline_ms']} ms) "
        f"+ failing: latency p50 {fault['latency_ms']['p50']:.1f} ms, p95 "
        f"{fault['latency_ms']['p95']:.1f} ms; hits from {', '.join(fault['hits_from'])}",
        markup=False,
    )
    for name, counts_by_status in fault["statuses"].items():
        error = fault["errors"].get(name)
        console.print(
            f"  {name}: {counts_by_status}" + (f" ({error})" if error else ""), markup=False
        )


_CONTEXT: tuple[Column, ...] = (
    ("turns", cell("history_turns", ",")),
    ("memories", cell("memories", ",")),
    ("cache", cell("cache")),
    ("p50 ms", cell("p50_ms", ".2f")),
    ("p95 ms", cell("p95_ms", ".2f")),
    ("cache misses", cell("cache_misses", ",")),
    ("turns in prompt", cell("turns_in_prompt", ",")),
    ("tokens", cell("used_tokens", ",")),
)


def context(report: dict[str, Any]) -> None:
    """Assembly time per history size, memory count and cache state."""
    title = f"context assembly, budget {report['budget']} tokens ({report['encoding']})"
    console.print(rows_table(_CONTEXT, report["rows"], title))


_MARKERS: tuple[Column, ...] = (
    ("chunk bytes", cell("chunk_bytes", ",")),
    ("seconds", cell("seconds", ".3f")),
    ("MB/s", cell("mb_per_s", ".2f")),
    ("× re.sub", cell("ratio_to_re_sub", ".1f")),
)


def markers(report: dict[str, Any]) -> None:
    """Extractor throughput per chunk size."""
    title = (
        f"marker extraction, {report['stream_bytes']:,} bytes, "
        f"re.sub {report['re_sub_seconds']:.3f} s"
    )
    console.print(rows_table(_MARKERS, report["chunks"], title))


def _share(key: str) -> Callable[[Row], str]:
    return cell(key, ".2f", none="-")


# Columns both compaction tables show.
_SUMMARIZER, _WINDOW = ("summarizer", cell("summarizer")), ("window", cell("window"))
_FINAL, _MIN = ("retention final", _share("retention_final")), ("min", _share("retention_min"))
_RECALL = ("question recall", _share("question_recall"))
_IN_BUDGET = ("in budget", _yes("within_budget"))
_MS_PER_COMPACTION = ("ms/compaction", cell("summary_ms_median", ".1f", none="-"))

_COMPACTION: tuple[Column, ...] = (
    _SUMMARIZER,
    _WINDOW,
    ("compactions", cell("compactions", ".1f")),
    _FINAL,
    ("mean", _share("retention_mean")),
    _MIN,
    _RECALL,
    _IN_BUDGET,
    _MS_PER_COMPACTION,
    (
        "note",
        lambda row: f"{row['fallbacks']} fallbacks to sliding-window" if row["fallbacks"] else "",
    ),
)
_SCENARIOS: tuple[Column, ...] = (
    ("scenario", cell("scenario")),
    _SUMMARIZER,
    _WINDOW,
    _FINAL,
    _MIN,
    _RECALL,
    ("corrections kept", _share("corrections_kept")),
    ("stale shown", cell("stale_shown")),
    _IN_BUDGET,
    _MS_PER_COMPACTION,
)


def compaction(report: dict[str, Any]) -> None:
    """Retention per summariser and window, then the domain scenarios."""
    table = rows_table(
        _COMPACTION,
        (),
        f"facts kept through compaction ({report['sessions']} sessions of "
        f"{report['turns']} turns, {len(report['facts'])} facts)",
    )
    for row in report["results"]:
        if row["status"] == "not run":
            table.add_row(row["summarizer"], str(row["window"]), *["-"] * 7, row["reason"])
        else:
            table.add_row(*(render(row) for _, render in _COMPACTION))
    console.print(table)
    if report.get("scenarios"):
        # The domain scenarios: newest values kept, corrections, stale values shown.
        title = (
            f"corrections, assistant- and tool-reported facts ({report['sessions']} "
            f"sessions of {report['scenario_turns']} turns per domain)"
        )
        console.print(rows_table(_SCENARIOS, report["scenarios"], title))


_SCALING: tuple[Column, ...] = (
    ("vectors", cell("vectors", ",")),
    ("path", cell("path")),
    ("p50 ms", cell("p50_ms", ".3f")),
    ("p95 ms", cell("p95_ms", ".3f")),
    ("× floor (p50)", cell("ratio_p50", ".2f")),
    ("build s", lambda row: "-" if row.get("build_s") is None else f"{row['build_s']:.1f}"),
)


def scaling(report: dict[str, Any]) -> None:
    """Dense search latency per size and path."""
    console.print(
        f"{report['dim']} dimensions · float32, unit length · {report['queries']} queries · "
        f"top {report['k']}",
        markup=False,
    )
    console.print(rows_table(_SCALING, report["results"]))
