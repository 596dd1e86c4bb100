"""``kairox bench history``: find the files each commit changed, from its subject line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.table import Table

from kairox.cli.app import AppContext, console
from kairox.cli.bench_common import (
    folder_option,
    json_option,
    names_option,
    option,
    out_option,
    run,
    show,
    work_option,
)
from kairox.support.terminal import printable

_COLUMNS = ("hit@1", "hit@5", "mrr@10", "recall@10")


@click.command()
@folder_option(
    "--repo",
    "A git repository: a checkout or a bare git folder (repeatable; default: the "
    "current folder's). Its HEAD is what is indexed.",
    "repos",
    multiple=True,
)
@work_option("each repository's tree at HEAD and its private indexes.")
@names_option(
    "--systems",
    "default",
    "Comma-separated: default (what `kairox search` runs), profile:NAME, workspace-fts "
    "(words only), workspace (vectors only). The references always run.",
)
@names_option("--embedders", "hashing", "Comma-separated embedding backends (minilm: its plugin).")
@option(
    "--split",
    "test",
    "Evaluate the train (oldest) or test (newest) half, or all.",
    type=click.Choice(["train", "test", "all"]),
)
@click.option("--with-body", is_flag=True, help="Queries are the subject and the body.")
@option("--limit", 400, "Keep the newest N usable commits per repository.", type=click.IntRange(1))
@option(
    "--test-share",
    0.5,
    "Share of the kept queries, the newest, in the test split.",
    type=click.FloatRange(0, 1),
)
@option(
    "--min-queries",
    20,
    "Refuse a repository with fewer queries in the split.",
    type=click.IntRange(1),
)
@option(
    "-k",
    30,
    "Hits asked of each system per query (as `kairox search -k`).",
    "k",
    type=click.IntRange(1, 1000),
)
@click.option(
    "--write-queries",
    type=click.Path(file_okay=False, path_type=Path),
    help="Also write DIR/<repo>/queries.jsonl, train.tsv and test.tsv for `kairox bench tune`.",
)
@out_option()
@json_option()
@click.pass_obj
def history(
    app: AppContext,
    repos: tuple[Path, ...],
    write_queries: Path | None,
    out: Path | None,
    as_json: bool,
    **settings: Any,
) -> None:
    """File localisation judged by the repository's own history: each small source commit's
    subject is a query, the files it changed the answers (hit@1, hit@5, MRR@10, Recall@10),
    beside whole-file BM25 and path-and-symbol matching in the same run."""
    from kairox.bench import BenchUsageError
    from kairox.bench.history_run import history_benchmark

    # Only a bad request is a usage error; a missing library or plugin (a BenchError,
    # checked before any work) is reported as every `kairox bench` reports one. work,
    # systems, embedders, split, with_body, limit, test_share, min_queries, k: named as
    # history_benchmark()'s keywords, each goes through as given.
    report = run(
        history_benchmark,
        list(repos) or [Path.cwd()],
        errors=(BenchUsageError,),
        write_to=write_queries,
        pm=app.plugin_manager(),
        **settings,
    )
    show(report, out, as_json, _table)
    if write_queries is not None and not as_json:
        console.print(
            f"wrote the queries and train/test judgments to {write_queries}/<repo>/; tune "
            "with `kairox bench tune --queries queries.jsonl --qrels train.tsv "
            "--holdout-qrels test.tsv` in the repository's checkout",
            markup=False,
        )


def _table(report: dict[str, Any]) -> None:
    # Imported here as history_benchmark is above: `kairox --help` stays light.
    from kairox.bench.history_eval import skipped_commits

    rows = [*report["repos"], report["pooled"]]
    systems = list(report["pooled"]["systems"])
    table = Table("repository", "queries", "system", *_COLUMNS, "× BM25")
    for row in rows:
        for n, system in enumerate(systems):
            metrics = row["systems"][system]
            ratio = metrics.get("vs_bm25")
            table.add_row(
                printable(row.get("name", row["repo"])) if n == 0 else "",
                str(row["queries"]) if n == 0 else "",
                system,
                *(f"{metrics[c]:.3f}" for c in _COLUMNS),
                f"{ratio:.2f}" if ratio is not None else "-",
            )
        table.add_section()
    console.print(
        f"split {report['split']} · k {report['k']} · embedders {', '.join(report['embedders'])}",
        markup=False,
    )
    console.print(table)
    for row in report["repos"]:
        console.print(
            printable(
                f"{row['name']}: {row['queries']} {report['split']} queries "
                f"({row['train_queries']} train), head {row['head'][:12]}; "
                f"skipped commits: {skipped_commits(row['skipped'])}"
            ),
            markup=False,
        )
