#!/usr/bin/env bash
# Reproduce benchmarks/results/scifact-significance*.json from scifact-retrieval.json: every
# system's nDCG@10 against a baseline, paired by query, with p-values from a paired t-test
# and a paired randomization test (10,000 resamples, seed 0; scipy). Baselines: plain RRF
# (hybrid-rrf, scifact-significance.json) and the hybrid without sentence vectors
# (hybrid-doc, scifact-significance-sentences.json).
set -euo pipefail
cd "$(dirname "$0")/.."
for pair in "hybrid-rrf:scifact-significance" "hybrid-doc:scifact-significance-sentences"; do
  baseline="${pair%%:*}"
  out="benchmarks/results/${pair#*:}.json"
  kairox bench compare benchmarks/results/scifact-retrieval.json --baseline "$baseline" "$@"
  kairox bench compare benchmarks/results/scifact-retrieval.json --baseline "$baseline" --json "$@" \
    > "$out"
  echo "wrote $out"
done
