"""``kairox bench embed``: documents per second, agreement, FLOP rate and nDCG per backend."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from kairox.cli.app import AppContext, console
from kairox.cli.bench_common import finish, json_option, names, option, out_option, run, wrote


@click.command()
@click.option(
    "--dataset",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A folder in BEIR layout: corpus.jsonl, queries.jsonl, qrels/<split>.tsv.",
)
@option(
    "--backends",
    "minilm-st,minilm-fp32,minilm,minilm-int8",
    "Comma-separated embedding backends; the first is the reference.",
)
@option("--sample", 1000, "Documents timed (the corpus' first N; 0 = all).", type=int)
@option("--rounds", 3, type=click.IntRange(min=1))
@click.option(
    "--ndcg/--no-ndcg",
    default=False,
    help="Also index the full corpus with each backend: nDCG@10 of dense and hybrid (slow).",
)
@option("--split", "test")
@out_option()
@json_option()
@click.pass_obj
def embed(
    app: AppContext,
    dataset: Path,
    backends: str,
    sample: int,
    rounds: int,
    ndcg: bool,
    split: str,
    out: Path | None,
    as_json: bool,
) -> None:
    """Embedding speed (interleaved rounds, medians), cosine with the first backend,
    FLOP rate against the CPU's peak and, with --ndcg, SciFact-style nDCG@10."""
    from kairox.bench.beir import load_beir
    from kairox.bench.embed import EmbedBenchError, benchmark_embed
    from kairox.support.paths import kairox_home

    backend_names = names(backends, "--backends", empty="name at least one embedding backend")
    data = load_beir(dataset, split)
    report = run(
        benchmark_embed,
        data,
        backend_names,
        app.plugin_manager().registry,
        errors=(EmbedBenchError,),
        param_hint="--backends",
        sample=sample,
        rounds=rounds,
        ndcg=ndcg,
        cache_dir=kairox_home() / "cache" / "embeddings" / "bench-embed",
    )
    if not finish(report, out, as_json):
        return
    columns = ["backend", "vectors", "docs/s", "× ref", "cos min", "cos mean", "GFLOP/s", "of peak"]
    extra = ["nDCG dense", "nDCG hybrid"] if ndcg else []
    table = Table(*columns, *extra)
    for row in report["backends"]:
        table.add_row(
            row["backend"],
            row["vectors"],
            f"{row['docs_per_s']:.1f}",
            f"{row['speedup']:.2f}",
            f"{row['cosine_min']:.5f}",
            f"{row['cosine_mean']:.5f}",
            "-" if row["gflops"] is None else f"{row['gflops']:.1f}",
            "-" if row["of_peak"] is None else f"{row['of_peak']:.1%}",
            *([f"{row['ndcg@10_dense']:.4f}", f"{row['ndcg@10_hybrid']:.4f}"] if ndcg else []),
        )
    peak = report["peak_gflops"]
    console.print(
        f"{report['documents']} documents ({report['tokens']} tokens) · {report['rounds']} "
        f"rounds, medians · reference {report['reference']} · peak fp32 {peak['fp32']} "
        f"bf16 {peak['bf16']} int8 {peak['int8']} GFLOP/s · {', '.join(report['cpu_features'])}",
        markup=False,
    )
    console.print(table)
    wrote(out)
