"""``kairox bench``: retrieval quality and speed."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kairox.cli.app import AppContext, console, console_err


@click.group()
def bench() -> None:
    """Benchmarks (quality and speed); see benchmarks/README.md."""


@bench.command()
@click.option(
    "--dataset",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A folder in BEIR layout: corpus.jsonl, queries.jsonl, qrels/<split>.tsv.",
)
@click.option(
    "--systems",
    default="sqlite-fts,hashing",
    show_default=True,
    help="Comma-separated: sqlite-fts, tantivy, dense (MiniLM), hashing, hybrid, dense:<backend>.",
)
@click.option("--split", default="test", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write JSON here.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report.")
@click.pass_obj
def retrieval(
    app: AppContext, dataset: Path, systems: str, split: str, out: Path | None, as_json: bool
) -> None:
    """nDCG@10, Recall@100, MRR@10, index time and query latency per system."""
    from kairox.bench.beir import load_beir
    from kairox.bench.retrieval import benchmark, write_report
    from kairox.paths import kairox_home

    names = [name.strip() for name in systems.split(",") if name.strip()]
    if not names:
        raise click.BadParameter("name at least one system", param_hint="--systems")
    data = load_beir(dataset, split)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console_err,
        transient=True,
    )
    tasks: dict[str, int] = {}

    def advance(what: str, done: int, total: int) -> None:
        if what not in tasks:
            tasks[what] = progress.add_task(what, total=total)
        progress.update(tasks[what], completed=done)

    with progress:
        report = benchmark(
            data,
            names,
            app.plugin_manager().registry,
            cache_dir=kairox_home() / "cache" / "embeddings",
            progress=advance,
        )
    if out is not None:
        write_report(report, out)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    table = Table("system", "nDCG@10", "Recall@100", "MRR@10", "index s", "p50 ms", "p95 ms", "q/s")
    for row in report["systems"]:
        table.add_row(
            row["system"],
            f"{row['ndcg@10']:.3f}",
            f"{row['recall@100']:.3f}",
            f"{row['mrr@10']:.3f}",
            f"{row['index_s']:.1f}" + (" (cached)" if row["index_cached"] else ""),
            f"{row['p50_ms']:.2f}",
            f"{row['p95_ms']:.2f}",
            f"{row['qps']:.0f}",
        )
    console.print(
        f"{report['dataset']} · split {report['split']} · {report['documents']} documents · "
        f"{report['queries']} queries",
        markup=False,
    )
    console.print(table)
    if out is not None:
        console.print(f"wrote {out}", markup=False)
