"""Marker-extractor throughput on a 10 MB stream, by chunk size, against one ``re.sub`` pass.

A thin wrapper kept for old links: the benchmark is ``kairox bench markers`` (the logic
lives in ``kairox.bench.markers``). Equivalent:

    kairox bench markers --megabytes 10 --out benchmarks/results/markers-throughput.json

Run: python benchmarks/markers_throughput.py [--megabytes 10] [--repeats 3] [--out FILE.json]
"""

from __future__ import annotations

import sys

from kairox.cli.bench_session_cmd import markers

if __name__ == "__main__":
    markers.main(args=sys.argv[1:], prog_name="markers_throughput.py")
