"""``kairox bench composite|context|markers|compaction``: platform performance and quality.

Plain click commands; the ``bench`` group attaches them. Each writes its JSON report with
``--out`` (``benchmarks/results/`` holds the published ones), prints it with ``--json``,
and otherwise prints a table. Progress goes to stderr.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from kairox.cli.app import AppContext, console, progress_bars

__all__ = ["compaction", "composite", "context", "markers"]


def _int_list(value: str, hint: str) -> list[int]:
    """``"1,2,4"`` as ``[1, 2, 4]``; a clear usage error otherwise."""
    try:
        numbers = [int(part.replace("_", "")) for part in value.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(
            f"expected comma-separated whole numbers, got {value!r}", param_hint=hint
        ) from None
    if not numbers:
        raise click.BadParameter("give at least one number", param_hint=hint)
    return numbers


def _names(value: str, hint: str) -> list[str]:
    names = [part.strip() for part in value.split(",") if part.strip()]
    if not names:
        raise click.BadParameter("give at least one name", param_hint=hint)
    return names


def _finish(report: dict[str, Any], out: Path | None, as_json: bool) -> bool:
    """Write and/or print the JSON; ``True`` when the table should be printed too."""
    if out is not None:
        from kairox.bench.report import write_report

        write_report(report, out)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return False
    return True


def _wrote(out: Path | None) -> None:
    if out is not None:
        console.print(f"wrote {out}", markup=False)


_OUT = click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the JSON report here."
)
_JSON = click.option("--json", "as_json", is_flag=True, help="Print the JSON report.")


# -- composite ------------------------------------------------------------------------------


@click.command()
@click.option(
    "--kind",
    default="sqlite-fts",
    show_default=True,
    help="The local knowledge-base kind the real sources are built with (sqlite-fts, tantivy).",
)
@click.option(
    "--sources",
    "source_counts",
    default="1,2,4,8",
    show_default=True,
    help="Source counts N to fan out over.",
)
@click.option("--queries", default=100, show_default=True, help="Timed queries per N.")
@click.option("--documents", default=1000, show_default=True, help="Corpus size of each source.")
@click.option(
    "--delay-ms",
    default=10.0,
    show_default=True,
    help="How long each synthetic source takes.",
)
@click.option(
    "--deadline-ms",
    default=250,
    show_default=True,
    help="The hanging source's deadline in the fault run.",
)
@click.option("--fault-queries", default=20, show_default=True, help="Queries in the fault run.")
@click.option(
    "--scenarios",
    default="local,sleep-async,sleep-thread",
    show_default=True,
    help="Fan-out scenarios: local (the --kind sources), sleep-async, sleep-thread.",
)
@_OUT
@_JSON
@click.pass_obj
def composite(
    app: AppContext,
    kind: str,
    source_counts: str,
    queries: int,
    documents: int,
    delay_ms: float,
    deadline_ms: int,
    fault_queries: int,
    scenarios: str,
    out: Path | None,
    as_json: bool,
) -> None:
    """Fan-out overhead of the composite retriever over N sources, and its fault behaviour."""
    from kairox.bench.composite import CompositeBenchError, benchmark

    counts = _int_list(source_counts, "--sources")
    try:
        with progress_bars() as progress:
            report = benchmark(
                app.plugin_manager().registry,
                kind=kind,
                source_counts=counts,
                queries=queries,
                documents=documents,
                delay_ms=delay_ms,
                deadline_ms=deadline_ms,
                fault_queries=fault_queries,
                scenarios=_names(scenarios, "--scenarios"),
                progress=progress,
            )
    except CompositeBenchError as exc:
        raise click.UsageError(str(exc)) from None
    if not _finish(report, out, as_json):
        return
    table = Table(
        "sources",
        "N",
        "path",
        "slowest source p50",
        "in sequence p50",
        "composite p50",
        "p95",
        "overhead p50",
        "p95",
        "CPU floor p50",
        "bound",
        title=f"fan-out, ms ({report['queries']} queries)",
    )
    for row in report["fan_out"]:
        table.add_row(
            row["scenario"],
            str(row["sources"]),
            row["path"],
            f"{row['slowest_source_ms']['p50']:.2f}",
            f"{row['sources_in_sequence_ms']['p50']:.2f}",
            f"{row['composite_ms']['p50']:.2f}",
            f"{row['composite_ms']['p95']:.2f}",
            f"{row['overhead_ms']['p50']:.2f}",
            f"{row['overhead_ms']['p95']:.2f}",
            f"{row['cpu_floor_ms']['p50']:.2f}",
            f"{row['bound_ms']:.2f}" + ("" if row["within_bound"] else " ✗"),
        )
    console.print(table)
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
    _wrote(out)


# -- context --------------------------------------------------------------------------------


@click.command()
@click.option(
    "--turns",
    "history_sizes",
    default="10,100,1000,10000",
    show_default=True,
    help="History sizes in whole turns.",
)
@click.option(
    "--memories", "memory_counts", default="0,100,1000", show_default=True, help="Memory counts."
)
@click.option("--repeats", default=25, show_default=True, help="Timed assemblies per cell.")
@click.option(
    "--profile",
    default=None,
    help="Take encoding, context window and headroom from this profile "
    "(default: 128k window, 4,096 headroom, o200k_base).",
)
@_OUT
@_JSON
@click.pass_obj
def context(
    app: AppContext,
    history_sizes: str,
    memory_counts: str,
    repeats: int,
    profile: str | None,
    out: Path | None,
    as_json: bool,
) -> None:
    """Context-assembly time by history size and memory count, warm vs cold token cache."""
    from kairox.bench.context import benchmark

    window: dict[str, Any] = {}
    if profile is not None:
        _, chosen = app.config().resolve_profile(profile)
        window = {
            "encoding": chosen.encoding,
            "context_window": chosen.context_window,
            "headroom": chosen.headroom,
        }
    try:
        with progress_bars() as progress:
            report = benchmark(
                history_sizes=_int_list(history_sizes, "--turns"),
                memory_counts=_int_list(memory_counts, "--memories"),
                repeats=repeats,
                progress=progress,
                **window,
            )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if not _finish(report, out, as_json):
        return
    table = Table(
        "turns",
        "memories",
        "cache",
        "p50 ms",
        "p95 ms",
        "cache misses",
        "turns in prompt",
        "tokens",
        title=f"context assembly, budget {report['budget']} tokens ({report['encoding']})",
    )
    for row in report["rows"]:
        table.add_row(
            f"{row['history_turns']:,}",
            f"{row['memories']:,}",
            row["cache"],
            f"{row['p50_ms']:.2f}",
            f"{row['p95_ms']:.2f}",
            f"{row['cache_misses']:,}",
            f"{row['turns_in_prompt']:,}",
            f"{row['used_tokens']:,}",
        )
    console.print(table)
    _wrote(out)


# -- markers --------------------------------------------------------------------------------


@click.command()
@click.option("--megabytes", default=10.0, show_default=True, help="Size of the stream.")
@click.option(
    "--chunks", default="1,64,4096", show_default=True, help="Chunk sizes to feed, in bytes."
)
@click.option("--repeats", default=3, show_default=True, help="Runs per chunk size (median).")
@_OUT
@_JSON
def markers(megabytes: float, chunks: str, repeats: int, out: Path | None, as_json: bool) -> None:
    """Memory-marker extractor throughput by chunk size, against one re.sub pass."""
    from kairox.bench.markers import benchmark

    try:
        with progress_bars() as progress:
            report = benchmark(
                megabytes=megabytes,
                chunks=_int_list(chunks, "--chunks"),
                repeats=repeats,
                progress=progress,
            )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if not _finish(report, out, as_json):
        return
    table = Table(
        "chunk bytes",
        "seconds",
        "MB/s",
        "× re.sub",
        title=f"marker extraction, {report['stream_bytes']:,} bytes, "
        f"re.sub {report['re_sub_seconds']:.3f} s",
    )
    for row in report["chunks"]:
        table.add_row(
            f"{row['chunk_bytes']:,}",
            f"{row['seconds']:.3f}",
            f"{row['mb_per_s']:.2f}",
            f"{row['ratio_to_re_sub']:.1f}",
        )
    console.print(table)
    _wrote(out)


# -- compaction -----------------------------------------------------------------------------


def _llm_backend(app: AppContext, profile: str | None, backend: str | None) -> tuple[Any, str]:
    """The real model for the ``llm`` summariser, or ``None`` and why it does not run."""
    from kairox.bench.compaction import NO_BACKEND, LlmBackend

    if profile is None and backend is None:
        return None, NO_BACKEND
    name, chosen = app.config().resolve_profile(profile or "default")
    if backend is not None:
        chosen = chosen.model_copy(update={"backend": backend})
    if chosen.backend == "scripted":
        return None, (
            f"not run: profile {name!r} uses the scripted backend, which cannot write real "
            "summaries; pick a profile with a real model backend"
        )
    model = app.facade().model_backend(chosen)
    return LlmBackend(model, chosen.model, f"{chosen.backend}:{chosen.model}"), ""


@click.command()
@click.option(
    "--summarizers",
    default="extractive,sliding-window,llm",
    show_default=True,
    help="Summarisers to compare.",
)
@click.option(
    "--windows", default="2048,4096,8192", show_default=True, help="Context windows in tokens."
)
@click.option("--turns", default=80, show_default=True, help="Turns per session.")
@click.option("--sessions", default=5, show_default=True, help="Sessions (seeds) per cell.")
@click.option(
    "--scenario-turns",
    default=60,
    show_default=True,
    help="Turns per session of the correction scenarios (one per domain).",
)
@click.option(
    "--profile",
    default=None,
    help="A profile with a real model backend: the llm summariser writes its summaries "
    "through it (the conversation itself stays scripted).",
)
@click.option(
    "--backend",
    default=None,
    help="A model backend name for the llm summariser (overrides the profile's).",
)
@_OUT
@_JSON
@click.pass_obj
def compaction(
    app: AppContext,
    summarizers: str,
    windows: str,
    turns: int,
    sessions: int,
    scenario_turns: int,
    profile: str | None,
    backend: str | None,
    out: Path | None,
    as_json: bool,
) -> None:
    """Share of early planted facts still in the prompt after each compaction."""
    from kairox.bench.compaction import benchmark

    names = _names(summarizers, "--summarizers")
    llm, reason = _llm_backend(app, profile, backend) if "llm" in names else (None, "")
    pm = app.plugin_manager()
    try:
        with progress_bars() as progress:
            report = benchmark(
                pm.registry,
                pm,
                summarizers=names,
                windows=_int_list(windows, "--windows"),
                turns=turns,
                sessions=sessions,
                llm=llm,
                llm_reason=reason,
                progress=progress,
                scenario_turns=scenario_turns,
            )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if not _finish(report, out, as_json):
        return
    table = Table(
        "summarizer",
        "window",
        "compactions",
        "retention final",
        "mean",
        "min",
        "question recall",
        "in budget",
        "ms/compaction",
        "note",
        title=f"facts kept through compaction ({report['sessions']} sessions of "
        f"{report['turns']} turns, {len(report['facts'])} facts)",
    )

    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    for row in report["results"]:
        if row["status"] == "not run":
            table.add_row(row["summarizer"], str(row["window"]), *["-"] * 7, row["reason"])
            continue
        note = f"{row['fallbacks']} fallbacks to sliding-window" if row["fallbacks"] else ""
        table.add_row(
            row["summarizer"],
            str(row["window"]),
            f"{row['compactions']:.1f}",
            share(row["retention_final"]),
            share(row["retention_mean"]),
            share(row["retention_min"]),
            share(row["question_recall"]),
            "yes" if row["within_budget"] else "NO",
            _ms(row["summary_ms_median"]),
            note,
        )
    console.print(table)
    if report.get("scenarios"):
        console.print(_scenario_table(report, share))
    _wrote(out)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _scenario_table(report: dict[str, Any], share: Callable[[float | None], str]) -> Table:
    """The domain scenarios: newest values kept, corrections, stale values shown."""
    table = Table(
        "scenario",
        "summarizer",
        "window",
        "retention final",
        "min",
        "question recall",
        "corrections kept",
        "stale shown",
        "in budget",
        "ms/compaction",
        title=f"corrections, assistant- and tool-reported facts ({report['sessions']} "
        f"sessions of {report['scenario_turns']} turns per domain)",
    )
    for row in report["scenarios"]:
        table.add_row(
            row["scenario"],
            row["summarizer"],
            str(row["window"]),
            share(row["retention_final"]),
            share(row["retention_min"]),
            share(row["question_recall"]),
            share(row["corrections_kept"]),
            str(row["stale_shown"]),
            "yes" if row["within_budget"] else "NO",
            _ms(row["summary_ms_median"]),
        )
    return table
