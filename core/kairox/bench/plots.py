"""PNG plots of the benchmark reports (matplotlib, Agg backend: no display needed).

``python -m kairox.bench.plots --retrieval R.json --scaling S.json --scale C.json
--out-dir DIR`` writes ``retrieval-quality.png``, ``retrieval-latency.png``,
``dense-scaling.png`` and ``scale.png`` (each only when its report is given).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kairox.bench import BENCH_EXTRA, BenchError

#: Reference nDCG@10 lines on the quality plot (DESIGN.md §10).
REFERENCES = {"FTS5 + MiniLM RRF (0.722)": 0.722, "published BM25 + BGE-base RRF (0.744)": 0.744}


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise BenchError(
            f"plots need matplotlib: {BENCH_EXTRA} (or pip install matplotlib)"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _title(report: Mapping[str, Any], what: str) -> str:
    dataset = Path(str(report.get("dataset", "?"))).name
    return f"{what} · {dataset} {report.get('split', '')} · {report.get('created', '')[:10]}"


def _system_bars(
    rows: Sequence[Mapping[str, Any]], first: tuple[str, str], second: tuple[str, str]
) -> tuple[Any, Any, Any, range]:
    """One pair of horizontal bars per system, ``(key, label)`` ``first`` above ``second``;
    returns ``(plt, fig, ax, positions)``."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 2.4))
    positions = range(len(rows))
    (top, top_label), (bottom, bottom_label) = first, second
    ax.barh([p + 0.2 for p in positions], [r[top] for r in rows], 0.4, label=top_label)
    ax.barh(
        [p - 0.2 for p in positions],
        [r[bottom] for r in rows],
        0.4,
        label=bottom_label,
        alpha=0.55,
    )
    ax.set_yticks(list(positions), [r["system"] for r in rows])
    return plt, fig, ax, positions


def _finish_bars(
    bars: tuple[Any, Any, Any],
    report: Mapping[str, Any],
    labels: tuple[str, str],
    legend_y: float,
    out: Path,
) -> Path:
    """Title and x label (``labels``) and the legend (``legend_y`` below the plot) of a
    :func:`_system_bars` figure; save it."""
    plt, fig, ax = bars
    what, xlabel = labels
    ax.set_xlabel(xlabel)
    ax.set_title(_title(report, what))
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, legend_y), ncol=2, fontsize=7)
    fig.tight_layout()
    return _save(fig, plt, out)


def plot_quality(report: Mapping[str, Any], out: Path) -> Path:
    """nDCG@10 and Recall@100 per system, best nDCG@10 on top."""
    rows = sorted(report["systems"], key=lambda r: r["ndcg@10"])
    plt, fig, ax, positions = _system_bars(
        rows, ("ndcg@10", "nDCG@10"), ("recall@100", "Recall@100")
    )
    for p, r in zip(positions, rows, strict=True):
        ax.text(r["ndcg@10"] + 0.005, p + 0.2, f"{r['ndcg@10']:.3f}", va="center", fontsize=8)
    for (label, value), style in zip(REFERENCES.items(), (":", "--"), strict=False):
        ax.axvline(value, color="grey", linestyle=style, linewidth=1, label=label)
    ax.set_xlim(0, 1.05)
    return _finish_bars((plt, fig, ax), report, ("Retrieval quality", "score"), -0.1, out)


def plot_latency(report: Mapping[str, Any], out: Path) -> Path:
    """Query latency p50 and p95 per system (log scale), fastest on top."""
    rows = sorted(report["systems"], key=lambda r: -r["p50_ms"])
    plt, fig, ax, positions = _system_bars(rows, ("p50_ms", "p50"), ("p95_ms", "p95"))
    for p, r in zip(positions, rows, strict=True):
        label = f"{r['p50_ms']:.2f} ms · {r['qps']:.0f} q/s"
        if r.get("peak_rss_mb") is not None:
            label += f" · peak {r['peak_rss_mb']:.0f} MB"
        ax.text(max(r["p50_ms"], r["p95_ms"]) * 1.1, p, label, va="center", fontsize=7)
    ax.set_xscale("log")
    ax.set_xlim(min(r["p50_ms"] for r in rows) * 0.5, max(r["p95_ms"] for r in rows) * 12)
    labels = ("Query latency", "ms per query (log scale)")
    return _finish_bars((plt, fig, ax), report, labels, -0.12, out)


def plot_scaling(report: Mapping[str, Any], out: Path) -> Path:
    """p50 latency against the number of vectors, one line per path (log-log)."""
    plt = _pyplot()
    by_path: dict[str, list[tuple[int, float, float]]] = {}
    for row in report["results"]:
        by_path.setdefault(row["path"], []).append((row["vectors"], row["p50_ms"], row["p95_ms"]))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for path, points in by_path.items():
        points.sort()
        xs = [p[0] for p in points]
        ax.plot(xs, [p[1] for p in points], marker="o", label=f"{path} p50")
        ax.fill_between(xs, [p[1] for p in points], [p[2] for p in points], alpha=0.12)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"vectors ({report['dim']} dimensions, float32)")
    ax.set_ylabel("ms per query (band: p50 to p95)")
    ax.set_title(f"Exact dense search · top {report['k']} · {report.get('created', '')[:10]}")
    ax.legend(fontsize=8)
    ax.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    return _save(fig, plt, out)


def plot_scale(report: Mapping[str, Any], out: Path) -> Path:
    """Ingest peak memory and search p50 against the number of passages, one line per
    system (log-log), side by side."""
    plt = _pyplot()
    by_system: dict[str, list[tuple[int, float, float | None]]] = {}
    for row in report["results"]:
        point = (row["passages"], row["peak_rss_mb"], row.get("search_p50_ms"))
        by_system.setdefault(row["system"], []).append(point)
    fig, (memory, latency) = plt.subplots(1, 2, figsize=(11, 4.5))
    for system, points in by_system.items():
        points.sort()
        xs = [p[0] for p in points]
        memory.plot(xs, [p[1] for p in points], marker="o", label=system)
        timed = [(x, p[2]) for x, p in zip(xs, points, strict=True) if p[2] is not None]
        if timed:
            latency.plot(*zip(*timed, strict=True), marker="o", label=system)
    for ax, label in ((memory, "ingest peak RSS, MB"), (latency, "search p50, ms")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("passages")
        ax.set_ylabel(label)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8)
    source = Path(str(report.get("source", "?"))).name
    fig.suptitle(f"Scale · {source} · {report.get('created', '')[:10]}")
    fig.tight_layout()
    return _save(fig, plt, out)


def _save(fig: Any, plt: Any, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def main(argv: Sequence[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--retrieval", type=Path, help="a `kairox bench retrieval --out` report")
    parser.add_argument("--scaling", type=Path, help="a `kairox bench scaling --out` report")
    parser.add_argument("--scale", type=Path, help="a `kairox bench scale --out` report")
    parser.add_argument("--out-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    written = []
    if args.retrieval is not None:
        report = json.loads(args.retrieval.read_text())
        written.append(plot_quality(report, args.out_dir / "retrieval-quality.png"))
        written.append(plot_latency(report, args.out_dir / "retrieval-latency.png"))
    if args.scaling is not None:
        written.append(
            plot_scaling(json.loads(args.scaling.read_text()), args.out_dir / "dense-scaling.png")
        )
    if args.scale is not None:
        report = json.loads(args.scale.read_text())
        written.append(plot_scale(report, args.out_dir / "scale.png"))
    for path in written:
        print(f"wrote {path}")
    return written


if __name__ == "__main__":
    main()
