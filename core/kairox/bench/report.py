"""What every ``kairox bench`` report shares: the machine it ran on, when, percentiles,
and reading and writing reports and run files."""

from __future__ import annotations

import json
import os
import platform
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kairox.bench import BenchError

if TYPE_CHECKING:
    from kairox.bench.retrieval import SystemRun


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        info["memory_gib"] = round(pages / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info


def created_now() -> str:
    """Now, in UTC, as an ISO 8601 timestamp to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100, linear interpolation, as numpy's default); 0.0 for
    no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (position - low))


def corpus_size(report: Mapping[str, Any]) -> str:
    """``"5,183 documents"``, or, for your own queries over a profile's sources (no corpus
    loaded), ``"4 judged documents"``."""
    documents = report.get("documents")
    if documents is None:
        return f"{report.get('judged_documents', 0):,} judged documents in your sources"
    return f"{documents:,} documents"


def write_runs(runs: Mapping[str, SystemRun], folder: Path) -> None:
    """One TREC run file per system: ``qid Q0 docid rank score system``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, ran in runs.items():
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
        lines = [
            f"{qid} Q0 {doc} {rank} {score:.6g} {safe}"
            for qid, ranked in ran.run.items()
            for rank, (doc, score) in enumerate(
                zip(ranked, ran.scores.get(qid) or [0.0] * len(ranked), strict=True), start=1
            )
        ]
        (folder / f"{safe}.trec").write_text("\n".join(lines) + ("\n" if lines else ""))


def write_report(report: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def load_report(path: Path) -> dict[str, Any]:
    try:
        report = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise BenchError(f"cannot read {path}: {exc}") from exc
    if not isinstance(report, dict) or "systems" not in report:
        raise BenchError(f"{path} is not a `kairox bench retrieval --out` report")
    if not report.get("per_query"):
        raise BenchError(
            f"{path} has no per-query results; re-run `kairox bench retrieval --out` "
            "with this version of Kairox"
        )
    return report
