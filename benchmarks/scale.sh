#!/usr/bin/env bash
# Reproduce benchmarks/results/scale.json and scale-1m.json (README "Scale"): SciFact-built
# corpora of 10k and 100k passages, words only and with the default's hashing vectors, then
# 1M passages words only. The corpora (1.5 GB at 1M) and indexes are built under $SCRATCH
# (default: the temp folder) and deleted at the end. Needs the bench and ann extras.
set -euo pipefail
cd "$(dirname "$0")/.."
DATASET="${1:-../shared/datasets/scifact}"
SCRATCH="${SCRATCH:-${TMPDIR:-/tmp}}"
kairox bench scale --source "$DATASET" --sizes 10k,100k --vectors --scratch "$SCRATCH" \
  --out benchmarks/results/scale.json --plot benchmarks/plots/scale.png
kairox bench scale --source "$DATASET" --sizes 1M --scratch "$SCRATCH" \
  --out benchmarks/results/scale-1m.json
