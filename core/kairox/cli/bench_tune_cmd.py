"""``kairox bench tune``, ``bench report`` and ``bench generate-queries``: tune what you
configured, look at runs, and make judgments when you have none."""

from __future__ import annotations

import json
from pathlib import Path

import click

from kairox.cli.app import AppContext, console, console_err, print_json, progress_bars
from kairox.cli.bench_common import json_option, out_option, profile_option
from kairox.support.terminal import printable


def _data_options(command: click.Command) -> click.Command:
    for option in reversed(
        [
            click.option(
                "--dataset",
                type=click.Path(exists=True, file_okay=False, path_type=Path),
                help="A BEIR folder (its queries and qrels of --split).",
            ),
            click.option("--split", default="train", show_default=True),
            click.option(
                "--queries",
                "queries_file",
                type=click.Path(exists=True, dir_okay=False, path_type=Path),
                help="Your queries: JSONL or TSV.",
            ),
            click.option(
                "--qrels",
                "qrels_file",
                type=click.Path(exists=True, dir_okay=False, path_type=Path),
                help="Your judgments: TREC or BEIR TSV.",
            ),
        ]
    ):
        command = option(command)
    return command


@click.command()
@profile_option("The profile to tune (default: default).")
@_data_options
@click.option("--kb", "kbs", default=None, help="Only these knowledge bases (comma-separated).")
@click.option("--workspace", is_flag=True, help="Only the workspace index.")
@click.option("--folds", default=5, show_default=True, type=int)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--alpha", default=0.05, show_default=True, type=click.FloatRange(0, 1))
@click.option(
    "--holdout-split",
    default=None,
    help="Also score the current and the best configuration on this split (--dataset).",
)
@click.option(
    "--holdout-qrels",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Also score them on these judgments of --queries (held out from tuning).",
)
@click.option("--write", is_flag=True, help="Set the recommended weights in kairox.toml.")
@out_option()
@json_option()
@click.pass_obj
def tune(
    app: AppContext,
    profile: str | None,
    dataset: Path | None,
    split: str,
    queries_file: Path | None,
    qrels_file: Path | None,
    kbs: str | None,
    workspace: bool,
    folds: int,
    seed: int,
    alpha: float,
    holdout_split: str | None,
    holdout_qrels: Path | None,
    write: bool,
    out: Path | None,
    as_json: bool,
) -> None:
    """Search fusion, per-source weights and candidate depth for PROFILE with k-fold
    cross-validation; recommend a change only when it is significant."""
    from kairox.bench import BenchError
    from kairox.bench.judgments import IdMatcher, custom_dataset, judged_ids
    from kairox.bench.profile import BenchUsageError
    from kairox.bench.selection import load_data, select
    from kairox.bench.tune import (
        check_folds,
        collect,
        config_of,
        current_config,
        holdout,
        write_weights,
    )
    from kairox.bench.tune import tune as run_tune

    name = profile or "default"
    try:
        chosen = select(
            app,
            dataset=dataset,
            split=split,
            systems="",
            profile=name,
            kbs=kbs,
            workspace=workspace,
            queries_file=queries_file,
            qrels_file=qrels_file,
        )
    except BenchUsageError as exc:
        raise click.UsageError(str(exc)) from None
    facade = app.facade()
    resolved = facade.resolve_profile(name)
    data = chosen.dataset
    try:
        check_folds(folds, len(data.queries))  # before asking any source
    except BenchError as exc:
        raise click.UsageError(str(exc)) from None
    with progress_bars() as advance:
        collected = collect(facade, resolved, data, only=chosen.systems.narrow, progress=advance)
        report = run_tune(
            collected, data, chosen.matcher, folds=folds, seed=seed, alpha=alpha, progress=advance
        )
        held = None
        if holdout_split is not None or holdout_qrels is not None:
            if holdout_qrels is not None:
                if queries_file is None:
                    raise click.UsageError("--holdout-qrels judges --queries: give --queries")
                other = custom_dataset(queries_file, holdout_qrels)
            else:
                other = load_data(dataset, holdout_split or "test", None, None)
            matcher = IdMatcher(judged_ids(other), root=facade.workspace_root)
            held_hits = collect(
                facade, resolved, other, only=chosen.systems.narrow, progress=advance
            )
            held = holdout(
                held_hits,
                other,
                matcher,
                {"current": current_config(collected), "best": config_of(report["best"])},
            )
            report["holdout"] = {"split": other.split, "queries": len(other.queries), **held}
    written: list[Path] = []
    if write and report["recommended"] is not None:
        weights = report["recommended"]["weights"]
        if weights != report["current"]["weights"]:
            written = write_weights(facade, weights)
        report["written"] = [str(p) for p in written]
    if out is not None:
        out.write_text(json.dumps(report, indent=2) + "\n")
    if as_json:
        print_json(report)
        return
    cv = report["cross_validated"]
    console.print(
        f"profile {resolved} · {report['queries']} queries · {report['folds']} folds · "
        f"{report['configurations']} configurations · sources {', '.join(report['sources'])}",
        markup=False,
    )
    console.print(
        f"current {json.dumps(_plain(report['current']))}: nDCG@10 {cv['current_ndcg@10']:.4f}",
        markup=False,
    )
    console.print(
        f"tuned (cross-validated): nDCG@10 {cv['tuned_ndcg@10']:.4f} ({cv['delta']:+.4f}; "
        f"p {cv['p_randomization']:.3g} randomization, {cv['p_ttest']:.3g} t-test)",
        markup=False,
    )
    console.print(
        f"best on all queries {json.dumps(_plain(report['best']))}: nDCG@10 "
        f"{report['best']['ndcg@10']:.4f}",
        markup=False,
    )
    if held is not None:
        console.print(
            f"held out ({report['holdout']['split']}, {report['holdout']['queries']} queries): "
            f"current {held['current']:.4f}, best {held['best']:.4f}",
            markup=False,
        )
    for source, count in report["source_failures"].items():
        console_err.print(printable(f"source {source} failed {count} queries"), markup=False)
    if report["refused"]:
        console.print(f"no change recommended: {report['refused']}", markup=False)
        return
    rec = report["recommended"]
    console.print(f"recommended: {json.dumps(rec)}", markup=False)
    if rec["fusion"] != report["current"]["fusion"]:
        console.print(f"  fusion: pass --fusion {rec['fusion']} to kairox search", markup=False)
    if rec["candidates"] != report["current"]["candidates"]:
        console.print(
            f"  candidates: the composite asks each source for {rec['candidates']} hits; "
            "kairox.toml has no setting for it",
            markup=False,
        )
    for path in written:
        console.print(f"wrote the weights to {path}", markup=False)
    if write and not written:
        console.print("the weights are already as recommended", markup=False)
    elif not write:
        console.print("pass --write to set the weights in kairox.toml", markup=False)


def _plain(config: dict) -> dict:
    return {k: v for k, v in config.items() if k != "ndcg@10"}


@click.command("report")
@click.argument("first", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument(
    "second", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The HTML file (PNG plots are written beside it).",
)
def report(first: Path, second: Path | None, out: Path) -> None:
    """One self-contained offline HTML page of one or two `bench retrieval --out` runs."""
    from kairox.bench.html_report import render

    render([first] if second is None else [first, second], out)
    console.print(f"wrote {out}", markup=False)


@click.command("generate-queries")
@click.option("--kb", "kb_id", required=True, help="The knowledge base to sample passages from.")
@click.option("--n", "n", default=100, show_default=True, type=click.IntRange(1))
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The folder to write the BEIR dataset to.",
)
@profile_option("Whose model writes the questions (default).")
@click.option("--seed", default=0, show_default=True, type=int)
@click.pass_obj
def generate_queries(
    app: AppContext, kb_id: str, n: int, out_dir: Path, profile: str | None, seed: int
) -> None:
    """Ask the profile's model for one question per sampled passage; write BEIR files
    (that passage judged relevant). They measure recall of the sampled passage only."""
    from kairox.bench.generate import NOTE, generate

    with progress_bars() as advance:
        manifest = generate(
            app.facade(), kb_id, n, out_dir, profile=profile, seed=seed, progress=advance
        )
    console.print(
        printable(
            f"wrote {manifest['queries']} questions by {manifest['model']} "
            f"({manifest['backend']}) to {out_dir}; {NOTE}"
        ),
        markup=False,
    )


COMMANDS = [tune, report, generate_queries]
