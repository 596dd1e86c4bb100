"""``kairox bench scale``: a knowledge base at growing sizes against bm25s."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from kairox.cli.app import console
from kairox.cli.bench_common import json_option, option, out_option, run, show
from kairox.cli.bench_tables import Column, cell, rows_table

_SCALE: tuple[Column, ...] = (
    ("passages", cell("passages", ",")),
    ("system", cell("system")),
    ("ingest cpu s", cell("ingest_cpu_s", ".1f")),
    ("peak RSS MB", cell("peak_rss_mb", ".0f")),
    ("disk MB", cell("disk_mb", ".1f")),
    ("× text", cell("disk_per_text", ".1f")),
    ("p50 ms", cell("search_p50_ms", ".2f", none="-")),
    ("× bm25s", cell("ratio_to_bm25s", ".2f", none="-")),
    ("ANN recall@k (ties)", lambda row: _ann_recall(row, "ann")),
    ("ANN p50 ms (exact)", lambda row: _ann_latency(row)),
    ("2× candidates: recall, ties (p50 ms)", lambda row: _ann_wide(row)),
)


def _ann(row: dict[str, Any], prefix: str, spec: str) -> str:
    found = [value for key, value in row.items() if key.startswith(prefix)]
    return format(found[0], spec) if found and found[0] is not None else "-"


def _ann_latency(row: dict[str, Any]) -> str:
    if row.get("ann_p50_ms") is None:
        return "-"
    return f"{row['ann_p50_ms']:.2f} ({row['exact_p50_ms']:.2f})"


def _ann_recall(row: dict[str, Any], name: str) -> str:
    strict = _ann(row, f"{name}_recall@", ".3f")
    return strict if strict == "-" else f"{strict} ({_ann(row, f'{name}_recall_ties@', '.3f')})"


def _ann_wide(row: dict[str, Any]) -> str:
    if row.get("ann_wide_p50_ms") is None:
        return "-"
    return f"{_ann_recall(row, 'ann_wide')} ({row['ann_wide_p50_ms']:.2f})"


def table(report: dict[str, Any]) -> None:
    """One row per size and system."""
    load = report["load_average"]["before"]
    console.print(
        f"{report['source']} ({report['source_passages']:,} passages, repeated and perturbed) · "
        f"{report['queries']} queries · top {report['k']} · load {load[0]:.1f} at the start",
        markup=False,
    )
    console.print(rows_table(_SCALE, report["results"]))


@click.command()
@click.option(
    "--source",
    required=True,
    type=click.Path(exists=True, path_type=Path),
    help="A BEIR folder (corpus.jsonl and queries.jsonl) the corpora are built from.",
)
@option("--sizes", "10k,100k", "Comma-separated passage counts (k and M suffixes allowed).")
@click.option(
    "--vectors",
    is_flag=True,
    help="Also ingest and search with the default's vectors (embedding_backend = hashing).",
)
@click.option(
    "--embedder",
    type=click.Choice(["hashing", "minilm-cached"]),
    default="hashing",
    show_default=True,
    help="With --vectors: the default's hashing vectors, or MiniLM's (minilm-int8) "
    "computed once for the source's texts and given to every perturbed copy with a little "
    "noise (embedding time excluded; see docs/benchmarking.md).",
)
@click.option(
    "--vector-cache",
    type=click.Path(file_okay=False, path_type=Path),
    help="With --embedder minilm-cached: the folder caching the source's MiniLM vectors "
    "(default: ~/.cache/kairox/bench).",
)
@click.option(
    "--vector-config",
    default="{}",
    help="With --vectors: more sqlite-fts settings of that knowledge base, as JSON, e.g. "
    '\'{"vector_format": "int8", "sentence_weight": 0.5}\'.',
)
@option("--queries", 100, "How many of the source's queries to time.", type=click.IntRange(1))
@option("-k", 10, None, "k", type=click.IntRange(1))
@click.option(
    "--scratch",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Where the corpora and indexes are built (deleted at the end); default: the temp folder.",
)
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), help="Write a PNG here.")
@out_option()
@json_option()
def scale(sizes: str, plot: Path | None, out: Path | None, as_json: bool, **settings: Any) -> None:
    """Ingest CPU, peak memory, disk and search p50 of a sqlite-fts knowledge base at
    growing sizes, interleaved query by query with bm25s."""
    from kairox.bench import BenchError
    from kairox.bench.scale import benchmark
    from kairox.bench.scaling import parse_size

    try:
        counts = [parse_size(part) for part in sizes.split(",") if part.strip()]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--sizes") from None
    if not counts:
        raise click.BadParameter("name at least one size", param_hint="--sizes")
    try:
        settings["vector_config"] = json.loads(settings["vector_config"])
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--vector-config") from None
    if not isinstance(settings["vector_config"], dict):
        raise click.BadParameter("give a JSON object", param_hint="--vector-config")
    report = run(benchmark, settings.pop("source"), counts, errors=(BenchError,), **settings)
    show(report, out, as_json, table)
    if plot is not None:
        from kairox.bench.plots import plot_scale

        plot_scale(report, plot)
        if not as_json:
            console.print(f"wrote {plot}", markup=False)
