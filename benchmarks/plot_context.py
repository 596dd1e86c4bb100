"""Plot context-assembly time against history size from ``kairox bench context`` JSON.

Run: python benchmarks/plot_context.py [results/context-assembly.json] [plots/context-assembly.png]

Left: median assembly time per turn (log-log), warm token cache (solid) and cold (dashed),
one colour per memory count. Right: token counts the cache could not answer, i.e. the
texts tokenised for that turn. Needs matplotlib (rendered with the Agg backend, no display).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot is imported: no display needed
import matplotlib.pyplot as plt

HERE = Path(__file__).resolve().parent


def plot(report: dict, out: Path) -> None:
    rows = report["rows"]
    memory_counts = sorted({row["memories"] for row in rows})
    colours = dict(
        zip(memory_counts, plt.get_cmap("viridis")([0.05, 0.45, 0.8, 0.95]), strict=False)
    )
    figure, (times, misses) = plt.subplots(1, 2, figsize=(11, 4.4))
    for memories in memory_counts:
        for cache, style in (("warm", "-"), ("cold", "--")):
            cells = sorted(
                (r for r in rows if r["memories"] == memories and r["cache"] == cache),
                key=lambda r: r["history_turns"],
            )
            turns = [r["history_turns"] for r in cells]
            label = f"{memories:,} memories, {cache} cache"
            colour = colours[memories]
            times.plot(
                turns, [r["p50_ms"] for r in cells], style, marker="o", color=colour, label=label
            )
            misses.plot(
                turns,
                [r["cache_misses"] for r in cells],
                style,
                marker="o",
                color=colour,
                label=label,
            )
    # Beyond this many turns the window is full and older turns are dropped, not counted.
    full = [r for r in rows if r["turns_in_prompt"] < r["history_turns"] and not r["memories"]]
    if full:
        fits = max(r["turns_in_prompt"] for r in full)
        for axis in (times, misses):
            axis.axvline(fits, color="grey", linestyle=":", linewidth=1)
        times.annotate(
            f"window full: ~{fits:,} turns fit",
            (fits, 0.03),
            xycoords=("data", "axes fraction"),
            xytext=(4, 0),
            textcoords="offset points",
            fontsize=7.5,
            color="grey",
        )
    warm = {r["cache_misses"] for r in rows if r["cache"] == "warm"}
    if len(warm) == 1:
        misses.annotate(
            f"warm cache: {warm.pop()} per turn at every size (the new turn and prompt)",
            (0.03, 0.08),
            xycoords="axes fraction",
            fontsize=8,
        )
    for axis in (times, misses):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("history size (whole turns)")
        axis.grid(True, which="major", alpha=0.3)
    times.set_ylabel("assembly time per turn, median (ms)")
    times.set_title("Context assembly time")
    misses.set_ylabel("token counts not in the cache (texts tokenised)")
    misses.set_title("Tokenisation work per turn")
    times.legend(fontsize=7.5, loc="upper left")
    budget = report["budget"]
    machine = report["machine"]
    figure.suptitle(
        f"ContextAssembler, budget {budget:,} tokens ({report['encoding']}); "
        f"{machine.get('cpus', '?')} CPUs, Python {machine['python']}, {report['created'][:10]}",
        fontsize=10,
    )
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=120)
    plt.close(figure)


def main() -> None:
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "results" / "context-assembly.json"
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else HERE / "plots" / "context-assembly.png"
    plot(json.loads(source.read_text()), out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
