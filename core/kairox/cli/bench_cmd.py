"""``kairox bench``: retrieval quality, speed and memory; dense search scaling."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from kairox.cli import bench_tables as tables
from kairox.cli.app import AppContext, console, console_err, progress_bars
from kairox.cli.bench_common import json_option, option, out_option, run, show
from kairox.support.terminal import printable


@click.group()
def bench() -> None:
    """Benchmarks (quality and speed); see benchmarks/README.md."""


@bench.command()
@click.option(
    "--dataset",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A folder in BEIR layout: corpus.jsonl, queries.jsonl, qrels/<split>.tsv.",
)
@click.option(
    "--systems",
    default=None,
    help="Comma-separated: sqlite-fts, tantivy, rank_bm25, bm25s, dense (MiniLM, "
    "sentence-aware), dense-doc (MiniLM, whole documents), hashing, hybrid, hybrid-rrf, "
    "hybrid-wrrf, hybrid-minmax, hybrid-dbsf, hybrid-title1, hybrid-doc, "
    "dense:<backend>; 'peers' = every installed peer, 'hybrids' = every hybrid; "
    "profile:NAME, kb:ID (what `kairox search` runs) and kind:NAME (a kind built fresh on "
    "the corpus). Default: sqlite-fts,hashing,peers, or none with --profile.",
)
@click.option(
    "--profile",
    "profile",
    default=None,
    help="Benchmark what `kairox search --profile NAME` runs (adds profile:NAME).",
)
@click.option("--kb", "kbs", default=None, help="With --profile: only these knowledge bases.")
@click.option(
    "--workspace", "workspace", is_flag=True, help="With --profile: only the workspace index."
)
@click.option(
    "--queries",
    "queries_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help='Your queries: JSONL {"id", "text"} or TSV id<TAB>text.',
)
@click.option(
    "--qrels",
    "qrels_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Your judgments: TREC qrels or BEIR TSV, graded.",
)
@click.option(
    "--kind-config",
    "kind_configs",
    multiple=True,
    help="Settings of a kind:NAME system: NAME='{\"key\": value}' (JSON; repeatable).",
)
@click.option("--split", default="test", show_default=True)
@out_option()
@click.option(
    "--run-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Also write one TREC run file per system here.",
)
@click.option(
    "--isolate/--no-isolate",
    default=None,
    help="Run each system in its own forked process and measure its peak memory "
    "(default: on where the platform can fork).",
)
@click.option(
    "--filtered",
    is_flag=True,
    help="Also time sqlite-fts and tantivy with a metadata filter of ~10%% selectivity "
    "(a synthetic `bucket` field; kairox.bench.filtered).",
)
@json_option()
@click.pass_obj
def retrieval(
    app: AppContext,
    out: Path | None,
    run_dir: Path | None,
    isolate: bool | None,
    as_json: bool,
    filtered: bool,
    **selection: Any,
) -> None:
    """nDCG@10, Recall@100, MRR@10, index time, latency and peak memory per system.

    Exits 1 when a source timed out, failed or was skipped for some query (the report
    says which and how often), 2 for an unknown system, profile, knowledge base or kind.
    """
    from kairox.bench.generate import NOTE, generated_judgments
    from kairox.bench.profile import BenchUsageError
    from kairox.bench.report import corpus_size, write_report
    from kairox.bench.retrieval import benchmark
    from kairox.bench.selection import select
    from kairox.support.paths import kairox_home

    # --dataset, --split, --systems, --profile, --kb, --workspace, --queries, --qrels and
    # --kind-config are named as select()'s keywords.
    dataset: Path | None = selection["dataset"]
    queries_file: Path | None = selection["queries_file"]
    try:
        chosen = select(app, **selection)
        with progress_bars() as advance:
            report = benchmark(
                chosen.dataset,
                chosen.names,
                app.plugin_manager().registry,
                cache_dir=kairox_home() / "cache" / "embeddings",
                progress=advance,
                isolate=isolate,
                run_dir=run_dir,
                systems_from=chosen.systems,
                matcher=chosen.matcher,
            )
    except BenchUsageError as exc:
        raise click.UsageError(str(exc)) from None
    judgments = generated_judgments(dataset, queries_file.parent if queries_file else None)
    if judgments is not None:
        report["judgments"] = judgments
    if filtered:
        if dataset is None:
            raise click.UsageError("--filtered needs --dataset (a BEIR folder)")
        report["filtered"] = _filtered(app, chosen.dataset, chosen.names)
    if out is not None:
        write_report(report, out)
    failed = [row for row in report["systems"] if row.get("failures")]
    if as_json:
        click.echo(json.dumps(report, indent=2))
        if failed:
            raise SystemExit(1)
        return
    ratio = any("qps_vs_rank_bm25" in row for row in report["systems"])
    columns = ["system", "nDCG@10", "Recall@100", "MRR@10", "index s", "p50 ms", "p95 ms", "q/s"]
    table = Table(*columns, *(["× rank_bm25"] if ratio else []), "peak MB")
    for row in report["systems"]:
        peak = row.get("peak_rss_mb")
        table.add_row(
            row["system"],
            f"{row['ndcg@10']:.3f}",
            f"{row['recall@100']:.3f}",
            f"{row['mrr@10']:.3f}",
            f"{row['index_s']:.1f}" + (" (cached)" if row["index_cached"] else ""),
            f"{row['p50_ms']:.2f}",
            f"{row['p95_ms']:.2f}",
            f"{row['qps']:.0f}",
            *([f"{row['qps_vs_rank_bm25']:.1f}"] if ratio else []),
            "-" if peak is None else f"{peak:.0f}",
        )
    console.print(
        f"{report['dataset']} · split {report['split']} · {corpus_size(report)} · "
        f"{report['queries']} queries",
        markup=False,
    )
    console.print(table)
    if report.get("filtered"):
        rows = report["filtered"]
        filtered_table = Table("system", "p50 ms", "filtered p50 ms", "ratio", "k hits")
        for row in rows:
            filtered_table.add_row(
                row["system"],
                f"{row['p50_ms']:.2f}",
                f"{row['filtered_p50_ms']:.2f}",
                f"{row['filtered_vs_unfiltered_p50']}",
                f"{row['full_k']}/{row['queries_with_k_matches']}",
            )
        console.print(
            f"filtered {rows[0]['filter']} (selectivity {rows[0]['selectivity']:.1%})",
            markup=False,
        )
        console.print(filtered_table)
    for skipped in report.get("skipped", []):
        console.print(f"skipped {skipped['reason']}", markup=False)
    if judgments is not None:
        console.print(printable(f"{NOTE} (model {judgments.get('model')})"), markup=False)
    for row in failed:
        for source, entry in row["failures"].items():
            console_err.print(
                printable(
                    f"{row['system']}: source {source} did not answer {entry['queries']} of "
                    f"{row['queries']} queries (last: {entry['last_error']}); those queries "
                    "are scored on the other sources' hits"
                ),
                markup=False,
            )
    if out is not None:
        console.print(f"wrote {out}", markup=False)
    if failed:
        raise SystemExit(1)


def _filtered(app: AppContext, data: Any, names: list[str]) -> list[dict[str, Any]]:
    import tempfile

    from kairox.bench.filtered import FILTERED_KINDS, filtered_run

    registry = app.plugin_manager().registry
    kinds = [k for k in FILTERED_KINDS if k in names and k in registry.knowledge_base_kinds]
    with tempfile.TemporaryDirectory(prefix="kairox-bench-filtered-") as scratch:
        return filtered_run(data, kinds, registry, Path(scratch))


@bench.command()
@click.argument("first", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument(
    "second", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--baseline",
    help="With one report: compare every other system of it against this one.",
)
@click.option(
    "--metric",
    type=click.Choice(["ndcg@10", "recall@100", "mrr@10"]),
    default="ndcg@10",
    show_default=True,
)
@click.option("--resamples", default=10_000, show_default=True, type=click.IntRange(100))
@json_option("Print JSON.")
def compare(
    first: Path,
    second: Path | None,
    baseline: str | None,
    metric: str,
    resamples: int,
    as_json: bool,
) -> None:
    """Per-system deltas between two `bench retrieval --out` reports, with paired p-values.

    FIRST SECOND: each system in both, SECOND minus FIRST. FIRST --baseline SYSTEM: each
    system minus SYSTEM. p-values: paired t-test and paired randomization test (scipy),
    two-sided, over the queries both sides answered.
    """
    from kairox.bench.metrics import compare as compare_reports
    from kairox.bench.report import load_report

    a = load_report(first)
    b = load_report(second) if second is not None else None
    if b is not None and baseline is not None:
        raise click.UsageError("--baseline compares systems within one report; give one file")
    if b is not None and (a.get("dataset"), a.get("split")) != (b.get("dataset"), b.get("split")):
        console_err.print(
            f"note: different data ({a.get('dataset')} {a.get('split')} vs "
            f"{b.get('dataset')} {b.get('split')}); only shared query ids are paired",
            markup=False,
        )
    rows = compare_reports(a, b, baseline=baseline, metric=metric, resamples=resamples)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    left = f"{baseline}" if b is None else first.name
    right = "value" if b is None else second.name  # type: ignore[union-attr]
    table = Table("system", left, right, "Δ", "p (t-test)", "p (randomization)", "queries")
    for row in rows:
        table.add_row(
            row["system"],
            f"{row['a']:.4f}",
            f"{row['b']:.4f}",
            f"{row['delta']:+.4f}",
            f"{row['p_ttest']:.4g}",
            f"{row['p_randomization']:.4g}",
            str(row["queries"]),
        )
    console.print(f"{metric}, paired by query", markup=False)
    console.print(table)


@bench.command()
@option("--sizes", "10k,100k,1M", "Comma-separated vector counts (k and M suffixes allowed).")
@option("--dim", 384, type=click.IntRange(1))
@option("--queries", 100, type=click.IntRange(1))
@option("-k", 10, None, "k", type=click.IntRange(1))
@option(
    "--workspace-max",
    "100k",
    "Largest size also measured through WorkspaceRagIndex (SQLite); 0 to skip it.",
)
@option("--seed", 0)
@out_option()
@json_option()
def scaling(
    sizes: str, workspace_max: str, out: Path | None, as_json: bool, **settings: Any
) -> None:
    """Dense search latency at growing sizes, against one numpy matrix-vector product."""
    from kairox.bench.scaling import benchmark, parse_size

    try:
        counts = [parse_size(part) for part in sizes.split(",") if part.strip()]
        largest_workspace = parse_size(workspace_max)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if not counts:
        raise click.BadParameter("name at least one size", param_hint="--sizes")
    # --dim, --queries, -k and --seed are named as benchmark()'s keywords.
    report = run(benchmark, counts, errors=(), workspace_max=largest_workspace, **settings)
    show(report, out, as_json, tables.scaling)


def _attach_session_benchmarks() -> None:
    from kairox.cli import bench_code_cmd, bench_history_cmd, bench_session_cmd

    bench.add_command(bench_code_cmd.code)
    bench.add_command(bench_history_cmd.history)
    for command in (
        bench_session_cmd.composite,
        bench_session_cmd.context,
        bench_session_cmd.markers,
        bench_session_cmd.compaction,
    ):
        bench.add_command(command)


_attach_session_benchmarks()


def _attach_tuning_benchmarks() -> None:
    from kairox.cli import bench_tune_cmd

    for command in bench_tune_cmd.COMMANDS:
        bench.add_command(command)


_attach_tuning_benchmarks()


def _attach_recall_benchmark() -> None:
    from kairox.cli.bench_recall_cmd import recall

    bench.add_command(recall)


_attach_recall_benchmark()


def _attach_embed_benchmark() -> None:
    from kairox.cli.bench_embed_cmd import embed

    bench.add_command(embed)


_attach_embed_benchmark()


def _attach_scale_benchmark() -> None:
    from kairox.cli.bench_scale_cmd import scale

    bench.add_command(scale)


_attach_scale_benchmark()
