"""``kairox bench report RUN.json [RUN2.json] --out report.html``: one page to look at.

The page is self-contained and works offline: no script, no stylesheet or font from a
CDN, the plots embedded as ``data:`` PNGs (and written next to the page too, for a
README). It shows the systems table, per-query wins and losses (the second run against
the first, or each system against the first system of one run), each source's
contribution to a profile's fused top 10 (how often a hit came only from it), latency
distributions, and, for generated judgments, what they can and cannot measure.
"""

from __future__ import annotations

import base64
import html
import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kairox.bench import BenchError
from kairox.bench.metrics import METRICS
from kairox.bench.plots import _pyplot
from kairox.bench.report import corpus_size

GENERATED_NOTE = (
    "These judgments were generated: one question per sampled passage, that passage judged "
    "relevant. They measure recall of the sampled passage only: other passages that answer "
    "the question count as misses, so absolute scores are lower bounds; compare systems, "
    "not numbers across datasets."
)
_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:72em;color:#222}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:.3em .6em}
th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}
.win{color:#060}.loss{color:#a00}.note{background:#fff6d6;padding:.6em;border:1px solid #e0c060}
img{max-width:100%}
"""


def _systems(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[tuple[str, Mapping, Mapping]]:
    """(label, system row, per-query metrics) for every system of every run."""
    rows = []
    for label, run in runs:
        for row in run.get("systems", []):
            name = row["system"] if len(runs) == 1 else f"{label}: {row['system']}"
            rows.append((name, row, run.get("per_query", {}).get(row["system"], {})))
    return rows


def _pairs(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[tuple[str, Mapping, Mapping]]:
    """(title, left per-query, right per-query) to compare query by query."""
    if len(runs) == 2:
        (la, a), (lb, b) = runs
        shared = [s for s in a.get("per_query", {}) if s in b.get("per_query", {})]
        return [(f"{s}: {lb} vs {la}", a["per_query"][s], b["per_query"][s]) for s in shared]
    run = runs[0][1]
    names = list(run.get("per_query", {}))
    if len(names) < 2:
        return []
    base = names[0]
    return [(f"{s} vs {base}", run["per_query"][base], run["per_query"][s]) for s in names[1:]]


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for cell in row:
            if isinstance(cell, float):
                cells.append(f'<td class="n">{cell:.4f}</td>')
            elif isinstance(cell, int):
                cells.append(f'<td class="n">{cell}</td>')
            else:
                cells.append(f"<td>{html.escape(str(cell))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def wins_and_losses(
    left: Mapping[str, float], right: Mapping[str, float], *, top: int = 10
) -> dict[str, Any]:
    """Queries where ``right`` beats, loses to or ties ``left``, biggest first."""
    shared = sorted(set(left) & set(right))
    deltas = {q: right[q] - left[q] for q in shared}
    wins = sorted((q for q in shared if deltas[q] > 1e-9), key=lambda q: -deltas[q])
    losses = sorted((q for q in shared if deltas[q] < -1e-9), key=lambda q: deltas[q])
    return {
        "wins": len(wins),
        "losses": len(losses),
        "ties": len(shared) - len(wins) - len(losses),
        "top_wins": [(q, left[q], right[q]) for q in wins[:top]],
        "top_losses": [(q, left[q], right[q]) for q in losses[:top]],
    }


def _png(plt: Any, figure: Any, path: Path) -> str:
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    encoded = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{encoded}">'


def _plots(systems: list[tuple[str, Mapping, Mapping]], runs: Sequence, out: Path) -> list[str]:
    plt = _pyplot()
    images = []
    names = [name for name, _, _ in systems]
    figure, axis = plt.subplots(figsize=(max(5, len(names) * 1.1), 3.5))
    axis.bar(range(len(names)), [row.get("ndcg@10", 0.0) for _, row, _ in systems])
    axis.set_xticks(range(len(names)), names, rotation=30, ha="right")
    axis.set_ylabel("nDCG@10")
    images.append(_png(plt, figure, out.with_name(f"{out.stem}-quality.png")))
    latencies = []
    for label, run in runs:
        for system, values in run.get("latencies_ms", {}).items():
            if values:
                latencies.append((system if len(runs) == 1 else f"{label}: {system}", values))
    if latencies:
        figure, axis = plt.subplots(figsize=(max(5, len(latencies) * 1.1), 3.5))
        axis.boxplot([v for _, v in latencies], showfliers=True)
        axis.set_xticks(
            range(1, len(latencies) + 1), [n for n, _ in latencies], rotation=30, ha="right"
        )
        axis.set_yscale("log")
        axis.set_ylabel("latency per query (ms, log)")
        images.append(_png(plt, figure, out.with_name(f"{out.stem}-latency.png")))
    return images


def render(paths: Sequence[Path], out: Path) -> Path:
    """Write the page for the runs at ``paths`` to ``out`` (PNGs beside it)."""
    runs = []
    for path in paths:
        try:
            runs.append((path.stem, json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError) as exc:
            raise BenchError(
                f"{path}: not a `kairox bench retrieval --out` report ({exc})"
            ) from None
        if "systems" not in runs[-1][1]:
            raise BenchError(f"{path}: not a `kairox bench retrieval --out` report (no systems)")
    out.parent.mkdir(parents=True, exist_ok=True)
    systems = _systems(runs)
    parts = ["<h1>Retrieval benchmark</h1>"]
    for label, run in runs:
        parts.append(
            f"<p>{html.escape(label)}: {html.escape(str(run.get('dataset')))} · split "
            f"{html.escape(str(run.get('split')))} · {corpus_size(run)} · "
            f"{run.get('queries')} queries · {html.escape(str(run.get('created', '')))}</p>"
        )
        judgments = run.get("judgments") or {}
        if judgments.get("generated"):
            model = html.escape(str(judgments.get("model", "?")))
            parts.append(f'<p class="note">{GENERATED_NOTE} Model: {model}.</p>')
    parts.append("<h2>Systems</h2>")
    parts.append(
        _table(
            ["system", *METRICS, "p50 ms", "p95 ms", "q/s", "failures"],
            [
                [
                    name,
                    *(float(row.get(m, 0.0)) for m in METRICS),
                    float(row.get("p50_ms", 0.0)),
                    float(row.get("p95_ms", 0.0)),
                    float(row.get("qps", 0.0)),
                    ", ".join(
                        f"{s}: {e['queries']}" for s, e in (row.get("failures") or {}).items()
                    )
                    or "none",
                ]
                for name, row, _ in systems
            ],
        )
    )
    pairs = _pairs(runs)
    if pairs:
        parts.append("<h2>Per-query wins and losses (nDCG@10)</h2>")
        for title, left, right in pairs:
            result = wins_and_losses(left.get("ndcg@10", {}), right.get("ndcg@10", {}))
            parts.append(
                f"<h3>{html.escape(title)}</h3><p><span class=win>{result['wins']} wins</span>, "
                f"<span class=loss>{result['losses']} losses</span>, {result['ties']} ties</p>"
            )
            rows = [["win", q, a, b, b - a] for q, a, b in result["top_wins"]]
            rows += [["loss", q, a, b, b - a] for q, a, b in result["top_losses"]]
            if rows:
                parts.append(_table(["", "query", "before", "after", "Δ"], rows))
    contributions = [(n, row["contributions"]) for n, row, _ in systems if row.get("contributions")]
    if contributions:
        parts.append("<h2>Each source's contribution to the fused top 10</h2>")
        parts.append(
            "<p>in top 10: fused top-10 hits the source found; only from it: those no other "
            "source found (what the profile would lose without it).</p>"
        )
        for name, counts in contributions:
            total = sum(c["in_top"] for c in counts.values()) or 1
            parts.append(f"<h3>{html.escape(name)}</h3>")
            parts.append(
                _table(
                    ["source", "in top 10", "only from it", "share only"],
                    [
                        [source, c["in_top"], c["only"], c["only"] / total]
                        for source, c in sorted(counts.items())
                    ],
                )
            )
    parts.append("<h2>Plots</h2>")
    parts.extend(_plots(systems, runs, out))
    latency_rows = []
    for label, run in runs:
        for system, values in run.get("latencies_ms", {}).items():
            if values:
                ordered = sorted(values)
                latency_rows.append(
                    [
                        system if len(runs) == 1 else f"{label}: {system}",
                        ordered[0],
                        statistics.median(ordered),
                        ordered[int(0.95 * (len(ordered) - 1))],
                        ordered[-1],
                    ]
                )
    if latency_rows:
        parts.append("<h2>Latency distribution (ms)</h2>")
        parts.append(_table(["system", "min", "median", "p95", "max"], latency_rows))
    page = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>Kairox retrieval benchmark</title><style>{_STYLE}</style></head>"
        f"<body>{''.join(parts)}</body></html>\n"
    )
    out.write_text(page, encoding="utf-8")
    return out
