#!/usr/bin/env bash
# Reproduce benchmarks/results/dense-scaling.json: exact dense search over 10k, 100k and 1M
# random unit vectors of 384 dimensions (1M x 384 float32 = 1.5 GB, built once; about 3 GB
# while the VectorSource copy exists), through top_k, VectorSource and (up to 100k)
# WorkspaceRagIndex, against one numpy matrix-vector product.
set -euo pipefail
cd "$(dirname "$0")/.."
exec kairox bench scaling --sizes 10k,100k,1M --queries 100 \
  --out benchmarks/results/dense-scaling.json "$@"
