"""Marker-extractor throughput on a 10 MB stream, by chunk size, against one ``re.sub`` pass.

Run: python benchmarks/markers_throughput.py [--megabytes 10] [--out FILE.json]

The stream mixes prose, code fences, inline code and valid and malformed ``<memory>``
markers. The baseline is the cheapest possible "strip the markers" (one regex pass over
the whole text, which cannot stream and ignores code); the extractor's cost is quoted as a
ratio to it. Medians of three runs per chunk size.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

from kairox.memory import MarkerExtractor

PIECES = [
    "The build passed after we pinned the parser version. ",
    "Next we look at the flaky test in `tests/test_io.py` and the <b>odd</b> markup.\n",
    '<memory scope="workspace" key="ci.python">CI runs Python 3.11 only.</memory>',
    '```python\nprint(\'<memory scope="user" key="x">literal in code</memory>\')\n```\n',
    "<memory scope='user' key='tone'>Prefers short answers.</memory> ",
    '<memory scope="global">rejected: unknown scope</memory>',
    "Some unicode: café, 東京, 🚀 and a stray < sign.\n",
]


def make_stream(size: int) -> str:
    unit = "".join(PIECES)
    return (unit * (size // len(unit) + 1))[:size]


def extract(text: str, chunk: int) -> int:
    extractor = MarkerExtractor()
    visible = 0
    for start in range(0, len(text), chunk):
        visible += len(extractor.feed(text[start : start + chunk]))
    visible += len(extractor.close())
    return visible


BASELINE = re.compile(r"<memory\b[^>]*>.*?</memory>", re.IGNORECASE | re.DOTALL)


def median_seconds(run, repeats: int) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    text = make_stream(int(args.megabytes * 1_000_000))
    baseline = median_seconds(lambda: BASELINE.sub("", text), args.repeats)
    rows = []
    for chunk in (1, 64, 4096):
        seconds = median_seconds(lambda c=chunk: extract(text, c), args.repeats)
        rows.append(
            {
                "chunk_bytes": chunk,
                "seconds": round(seconds, 3),
                "mb_per_s": round(len(text) / seconds / 1e6, 2),
                "ratio_to_re_sub": round(seconds / baseline, 1),
            }
        )
        print(
            f"chunk {chunk:>5}: {seconds:8.3f} s  {rows[-1]['mb_per_s']:7.2f} MB/s  "
            f"{rows[-1]['ratio_to_re_sub']:7.1f}x re.sub"
        )
    print(f"re.sub baseline: {baseline:.3f} s")
    report = {
        "benchmark": "markers_throughput",
        "stream_bytes": len(text),
        "re_sub_seconds": round(baseline, 4),
        "chunks": rows,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
    }
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
