"""``kairox bench code``: code search quality, line windows versus syntax-aware chunks."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from kairox.cli.app import AppContext, console
from kairox.cli.bench_common import (
    finish,
    folder_option,
    json_option,
    names,
    option,
    out_option,
    work_option,
    wrote,
)


@click.command()
@folder_option(
    "--sdists",
    "A folder of .tar.gz sdists, e.g. from `pip download --no-binary :all: --no-deps "
    "click rich httpx -d DIR` (keep it outside the repository).",
    required=True,
)
@work_option("the stripped corpus and one index per chunking and embedder.")
@option(
    "--embedders",
    "hashing,minilm",
    "Comma-separated embedding backends (minilm: kairox-sentence-transformers).",
)
@option(
    "--sentence-weight",
    0.5,
    "As [workspace] sentence_weight; 0 embeds whole chunks only (half the work).",
    type=click.FloatRange(0, 1),
)
@out_option()
@json_option()
@click.pass_obj
def code(
    app: AppContext,
    sdists: Path,
    work: Path,
    embedders: str,
    sentence_weight: float,
    out: Path | None,
    as_json: bool,
) -> None:
    """MRR@10 and Recall@10 of FTS, each embedder and the hybrid, per chunking."""
    from kairox.bench.code import code_benchmark

    backends = names(embedders, "--embedders", empty="name at least one embedding backend")
    if not any(sdists.glob("*.tar.gz")):
        raise click.BadParameter(
            f"no .tar.gz sdists in {sdists}; fetch some with `pip download --no-binary :all: "
            f"--no-deps click rich httpx -d {sdists}`",
            param_hint="--sdists",
        )
    report = code_benchmark(
        sdists,
        work,
        app.plugin_manager().registry,
        embedders=backends,
        sentence_weight=sentence_weight,
    )
    if not finish(report, out, as_json):
        return
    table = Table("chunking", "system", "MRR@10", "Recall@10", "test MRR@10", "test Recall@10")
    for row in report["systems"]:
        table.add_row(
            row["chunking"],
            row["system"],
            f"{row['mrr@10']:.3f}",
            f"{row['recall@10']:.3f}",
            f"{row['test_mrr@10']:.3f}",
            f"{row['test_recall@10']:.3f}",
        )
    queries = report["queries"]
    console.print(
        f"{', '.join(report['packages'])} · {report['files']} files · {queries['all']} queries "
        f"({queries['train']} train, {queries['test']} test)",
        markup=False,
    )
    console.print(table)
    for key, tuned in report["weight_tuning"].items():
        console.print(f"{key}: vector weight tuned on train = {tuned['best_weight']}", markup=False)
    wrote(out)
