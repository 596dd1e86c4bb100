#!/usr/bin/env bash
# Redraw benchmarks/plots/{retrieval-quality,retrieval-latency,dense-scaling}.png from the
# JSON results (matplotlib, Agg backend).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python -m kairox.bench.plots \
  --retrieval benchmarks/results/scifact-retrieval.json \
  --scaling benchmarks/results/dense-scaling.json \
  --out-dir benchmarks/plots "$@"
