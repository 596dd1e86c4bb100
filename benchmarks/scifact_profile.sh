#!/usr/bin/env bash
# Benchmark and tune a real profile on SciFact (benchmarks/README.md, "Your profile").
#
# The workspace is SciFact's corpus as one file per document (corpus/<id>.txt, title on
# the first line), indexed by `kairox index` (the workspace index: hashing vectors and
# FTS5) and ingested into knowledge base `papers` (sqlite-fts), so the default profile
# fuses three sources. The qrels name the files (corpus/<id>.txt), which match a
# workspace chunk by its path and a knowledge-base document by its id.
#
#   benchmarks/scifact_profile.sh DATASET_DIR [WORK_DIR]
set -euo pipefail
data=${1:?usage: scifact_profile.sh DATASET_DIR [WORK_DIR]}
work=${2:-$(mktemp -d)}
here=$(cd "$(dirname "$0")" && pwd)
export KAIROX_HOME="$work/home"
mkdir -p "$work/ws/corpus" "$KAIROX_HOME"
python - "$data" "$work" <<'EOF'
import csv, json, sys
from pathlib import Path
data, work = Path(sys.argv[1]), Path(sys.argv[2])
for line in (data / "corpus.jsonl").open():
    r = json.loads(line)
    (work / "ws/corpus" / f"{r['_id']}.txt").write_text(f"{r.get('title') or ''}\n\n{r['text']}\n")
for split in ("train", "test"):
    rows = list(csv.reader((data / "qrels" / f"{split}.tsv").open(), delimiter="\t"))[1:]
    with (work / f"qrels-{split}.trec").open("w") as out:
        out.writelines(f"{q} 0 corpus/{d}.txt {s}\n" for q, d, s in rows)
with (work / "queries.jsonl").open("w") as out:
    for line in (data / "queries.jsonl").open():
        r = json.loads(line)
        out.write(json.dumps({"id": r["_id"], "text": r["text"]}) + "\n")
EOF
cat > "$work/ws/kairox.toml" <<'EOF'
# SciFact as a workspace and a knowledge base
[knowledge_bases.papers]
kind = "sqlite-fts"
path = "papers.db"
timeout_ms = 60000

[workspace]
timeout_ms = 60000
EOF
cd "$work/ws"
kairox kb ingest papers corpus
kairox index
q=(--queries "$work/queries.jsonl")
kairox bench retrieval --profile default "${q[@]}" --qrels "$work/qrels-test.trec" \
  --out "$here/results/profile-scifact-test.json"
python "$here/verify_profile.py" --profile default "${q[@]}" --qrels "$work/qrels-test.trec" \
  --report "$here/results/profile-scifact-test.json" | tee "$here/results/profile-verify.json"
kairox bench tune --profile default "${q[@]}" --qrels "$work/qrels-train.trec" \
  --holdout-qrels "$work/qrels-test.trec" --out "$here/results/profile-tune.json"
kairox bench report "$here/results/profile-scifact-test.json" --out "$here/plots/profile-report.html"
