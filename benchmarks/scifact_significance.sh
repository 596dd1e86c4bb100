#!/usr/bin/env bash
# Reproduce benchmarks/results/scifact-significance.json from scifact-retrieval.json: every
# system's nDCG@10 against plain RRF (hybrid-rrf), paired by query, with p-values from a
# paired t-test and a paired randomization test (10,000 resamples, seed 0; scipy).
set -euo pipefail
cd "$(dirname "$0")/.."
kairox bench compare benchmarks/results/scifact-retrieval.json --baseline hybrid-rrf "$@"
kairox bench compare benchmarks/results/scifact-retrieval.json --baseline hybrid-rrf --json "$@" \
  > benchmarks/results/scifact-significance.json
echo "wrote benchmarks/results/scifact-significance.json"
