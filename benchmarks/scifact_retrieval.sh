#!/usr/bin/env bash
# Reproduce benchmarks/results/scifact-retrieval.json: every retrieval system on SciFact (test).
# Needs kairox-tantivy and kairox-sentence-transformers (`make install`). Embedding the
# corpus with MiniLM takes about 5 minutes on 2 cores the first time; it is cached after.
set -euo pipefail
cd "$(dirname "$0")/.."
dataset="${KAIROX_DATASETS:-../shared/datasets}/scifact"
exec kairox bench retrieval --dataset "$dataset" \
  --systems sqlite-fts,tantivy,hashing,dense,hybrid \
  --split test --out benchmarks/results/scifact-retrieval.json "$@"
