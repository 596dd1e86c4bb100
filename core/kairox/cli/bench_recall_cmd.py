"""``kairox bench recall``: evidence recall on LoCoMo-format conversations (kairox.bench.recall)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.table import Table

from kairox.cli.app import console
from kairox.cli.bench_common import json_option, numbers_option, option, out_option, run, show
from kairox.support.terminal import printable

__all__ = ["recall"]


@click.command()
@click.option(
    "--dataset",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="A LoCoMo-format JSON file (a list of conversations with their questions).",
)
@numbers_option("--budgets", "2048,4096,8192", "Prompt budgets in tokens.")
@numbers_option("--ks", "10,50", "Depths of the recall source alone and of BM25.")
@option("--conversations", "", "Only these sample ids, comma-separated (default: all).")
@option("--embedder", "hashing", "The workspace embedding backend recall's vectors come from.")
@out_option("Write the JSON report here.")
@json_option()
def recall(
    dataset: Path,
    budgets: list[int],
    ks: list[int],
    conversations: str,
    embedder: str,
    out: Path | None,
    as_json: bool,
) -> None:
    """Evidence recall of assembled prompts and of the recall source, with references."""
    from kairox.bench.recall import RecallBenchError, benchmark

    report = run(
        benchmark,
        dataset,
        errors=(RecallBenchError,),
        budgets=budgets,
        ks=ks,
        conversations=[c.strip() for c in conversations.split(",") if c.strip()] or None,
        embedder=embedder,
    )
    show(report, out, as_json, table)


def table(report: dict[str, Any]) -> None:
    """One row per system, one column per category and 1-4."""
    categories = report["categories"]
    keys = [*sorted(k for k in report["questions"] if k != "1-4"), "1-4"]
    grid = Table(
        title=printable(
            f"evidence recall, {', '.join(report['conversations'])} "
            f"({report['turns']:,} turns, {report['embedder']} embedder)"
        )
    )
    grid.add_column("system")
    for key in keys:
        name = categories.get(key, "categories 1-4")
        grid.add_column(f"{name} ({report['questions'][key]})", justify="right")
    for system, row in report["evidence_recall"].items():
        grid.add_row(system, *(f"{row[key]:.3f}" if key in row else "-" for key in keys))
    console.print(grid)
    spent = ", ".join(f"{b}: {t:,.0f}" for b, t in report["prompt_tokens"].items())
    console.print(f"prompt tokens spent (mean) by budget: {spent}")
