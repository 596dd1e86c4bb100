#!/usr/bin/env bash
# Reproduce benchmarks/results/scifact-retrieval.json: every retrieval system and peer on
# SciFact (test), each in its own process (peak memory), per-query results included.
# Needs kairox-tantivy, kairox-sentence-transformers (`make install`) and the bench extra
# (pip install 'kairox[bench]': ir-measures, rank-bm25, bm25s, PyStemmer, scipy, matplotlib).
# Embedding the corpus with MiniLM takes about 5 minutes on 2 cores the first time; it is
# cached under $KAIROX_HOME/cache/embeddings after that.
set -euo pipefail
cd "$(dirname "$0")/.."
dataset="${KAIROX_DATASETS:-../shared/datasets}/scifact"
exec kairox bench retrieval --dataset "$dataset" \
  --systems sqlite-fts,tantivy,rank_bm25,bm25s,hashing,dense,hybrid,hybrid-rrf,hybrid-wrrf,hybrid-minmax,hybrid-dbsf,hybrid-title1,dense-doc,hybrid-doc \
  --split test --out benchmarks/results/scifact-retrieval.json "$@"
