#!/usr/bin/env bash
# Reproduce the platform benchmarks' results and plot: composite fan-out, context assembly,
# marker extraction, compaction retention. About three minutes on 2 cores.
# The plot needs matplotlib (pip install matplotlib).
# Extra arguments go to `kairox bench compaction`, e.g. `--profile NAME` to run the llm
# summariser through a profile with a real model backend.
set -euo pipefail
cd "$(dirname "$0")/.."
kairox bench composite --out benchmarks/results/composite-fan-out.json
kairox bench context --out benchmarks/results/context-assembly.json
kairox bench markers --out benchmarks/results/markers-throughput.json
kairox bench compaction --out benchmarks/results/compaction-retention.json "$@"
python benchmarks/plot_context.py benchmarks/results/context-assembly.json \
  benchmarks/plots/context-assembly.png
