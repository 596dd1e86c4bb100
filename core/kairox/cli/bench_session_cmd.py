"""``kairox bench composite|context|markers|compaction``: platform performance and quality.

Plain click commands; the ``bench`` group attaches them. Each writes its JSON report with
``--out`` (``benchmarks/results/`` holds the published ones), prints it with ``--json``,
and otherwise prints a table. Progress goes to stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kairox.cli import bench_tables as tables
from kairox.cli.app import AppContext
from kairox.cli.bench_common import (
    json_option,
    names_option,
    numbers_option,
    option,
    out_option,
    profile_option,
    run,
    show,
)

__all__ = ["compaction", "composite", "context", "markers"]


_OUT = out_option("Write the JSON report here.")
_JSON = json_option()


# -- composite ------------------------------------------------------------------------------


_KIND_HELP = "The local knowledge-base kind the real sources are built with (sqlite-fts, tantivy)."
_SCENARIOS_HELP = "Fan-out scenarios: local (the --kind sources), sleep-async, sleep-thread."


@click.command()
@option("--kind", "sqlite-fts", _KIND_HELP)
@numbers_option("--sources", "1,2,4,8", "Source counts N to fan out over.", "source_counts")
@option("--queries", 100, "Timed queries per N.")
@option("--documents", 1000, "Corpus size of each source.")
@option("--delay-ms", 10.0, "How long each synthetic source takes.")
@option("--deadline-ms", 250, "The hanging source's deadline in the fault run.")
@option("--fault-queries", 20, "Queries in the fault run.")
@names_option("--scenarios", "local,sleep-async,sleep-thread", _SCENARIOS_HELP)
@_OUT
@_JSON
@click.pass_obj
def composite(app: AppContext, out: Path | None, as_json: bool, **settings: Any) -> None:
    """Fan-out overhead of the composite retriever over N sources, and its fault behaviour."""
    from kairox.bench.composite import CompositeBenchError, benchmark

    # The options are named as benchmark()'s keywords: each goes through as given.
    registry = app.plugin_manager().registry
    report = run(benchmark, registry, errors=(CompositeBenchError,), **settings)
    show(report, out, as_json, tables.composite)


# -- context --------------------------------------------------------------------------------


@click.command()
@numbers_option("--turns", "10,100,1000,10000", "History sizes in whole turns.", "history_sizes")
@numbers_option("--memories", "0,100,1000", "Memory counts.", "memory_counts")
@option("--repeats", 25, "Timed assemblies per cell.")
@profile_option(
    "Take encoding, context window and headroom from this profile "
    "(default: 128k window, 4,096 headroom, o200k_base)."
)
@_OUT
@_JSON
@click.pass_obj
def context(
    app: AppContext,
    history_sizes: list[int],
    memory_counts: list[int],
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
    report = run(
        benchmark,
        history_sizes=history_sizes,
        memory_counts=memory_counts,
        repeats=repeats,
        **window,
    )
    show(report, out, as_json, tables.context)


# -- markers --------------------------------------------------------------------------------


@click.command()
@option("--megabytes", 10.0, "Size of the stream.")
@numbers_option("--chunks", "1,64,4096", "Chunk sizes to feed, in bytes.")
@option("--repeats", 3, "Runs per chunk size (median).")
@_OUT
@_JSON
def markers(
    megabytes: float, chunks: list[int], repeats: int, out: Path | None, as_json: bool
) -> None:
    """Memory-marker extractor throughput by chunk size, against one re.sub pass."""
    from kairox.bench.markers import benchmark

    report = run(benchmark, megabytes=megabytes, chunks=chunks, repeats=repeats)
    show(report, out, as_json, tables.markers)


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
@names_option("--summarizers", "extractive,sliding-window,llm", "Summarisers to compare.")
@numbers_option("--windows", "2048,4096,8192", "Context windows in tokens.")
@option("--turns", 80, "Turns per session.")
@option("--sessions", 5, "Sessions (seeds) per cell.")
@option("--scenario-turns", 60, "Turns per session of the correction scenarios (one per domain).")
@profile_option(
    "A profile with a real model backend: the llm summariser writes its summaries "
    "through it (the conversation itself stays scripted)."
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
    profile: str | None,
    backend: str | None,
    out: Path | None,
    as_json: bool,
    **settings: Any,
) -> None:
    """Share of early planted facts still in the prompt after each compaction."""
    from kairox.bench.compaction import benchmark

    # summarizers, windows, turns, sessions, scenario_turns: named as benchmark()'s keywords.
    wanted = "llm" in settings["summarizers"]
    llm, reason = _llm_backend(app, profile, backend) if wanted else (None, "")
    pm = app.plugin_manager()
    report = run(benchmark, pm.registry, pm, llm=llm, llm_reason=reason, **settings)
    show(report, out, as_json, tables.compaction)
