"""Check ``kairox bench retrieval --profile`` against an independent evaluation.

Runs ``kairox search --profile P --json -k 100`` once per query (a separate process each,
in the current folder's workspace), ranks each output by the judged ids of its hits
(``metadata.path`` when the qrels name files, else the hit id; first occurrence kept),
scores it with ir-measures (nDCG@10) and prints the largest per-query difference from
the benchmark's own report::

    python benchmarks/verify_profile.py --profile default --queries q.jsonl \\
        --qrels test.trec --report run.json [--system profile:default] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import ir_measures
from ir_measures import nDCG


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", required=True)
    parser.add_argument("--queries", type=Path, required=True)
    parser.add_argument("--qrels", type=Path, required=True)
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--system")
    parser.add_argument("--kairox", default=str(Path(sys.executable).with_name("kairox")))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--save", type=Path, help="Keep the search outputs here (JSON).")
    parser.add_argument("--load", type=Path, help="Score outputs saved by --save instead.")
    args = parser.parse_args(argv)

    queries = {}
    for line in args.queries.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            queries[str(record.get("id", record.get("_id")))] = record["text"]
    qrels = list(ir_measures.read_trec_qrels(str(args.qrels)))
    judged_queries = sorted({q.query_id for q in qrels})

    def search(qid: str) -> tuple[str, list[dict]]:
        command = [args.kairox, "search", "--profile", args.profile, "--json", "-k", "100"]
        for _attempt in (1, 2):  # once more if the process died (a busy machine)
            done = subprocess.run([*command, queries[qid]], capture_output=True, text=True)
            if done.returncode == 0:
                return qid, json.loads(done.stdout)["hits"]
        raise SystemExit(f"query {qid}: kairox search failed: {done.stderr.strip()}")

    if args.load is not None:
        outputs = json.loads(args.load.read_text())
    else:
        with ThreadPoolExecutor(args.workers) as pool:
            outputs = dict(pool.map(search, judged_queries))
    if args.save is not None:
        args.save.write_text(json.dumps(outputs))
    run = []
    for qid, hits in outputs.items():
        ranked = list(dict.fromkeys((h["metadata"] or {}).get("path") or h["id"] for h in hits))
        run += [
            ir_measures.ScoredDoc(qid, doc, float(len(ranked) - i)) for i, doc in enumerate(ranked)
        ]
    mine = dict.fromkeys(judged_queries, 0.0)
    for metric in ir_measures.iter_calc([nDCG @ 10], qrels, run):
        mine[metric.query_id] = metric.value
    report = json.loads(args.report.read_text())
    system = args.system or f"profile:{args.profile}"
    theirs = report["per_query"][system]["ndcg@10"]
    diffs = {qid: abs(mine[qid] - theirs.get(qid, 0.0)) for qid in judged_queries}
    worst = max(diffs, key=diffs.get)
    print(
        json.dumps(
            {
                "queries": len(judged_queries),
                "independent_ndcg@10": sum(mine.values()) / len(mine),
                "bench_ndcg@10": sum(theirs.values()) / len(theirs),
                "max_abs_diff": diffs[worst],
                "worst_query": worst,
                "queries_differing": sum(1 for d in diffs.values() if d > 1e-9),
            },
            indent=2,
        )
    )
    return 0 if diffs[worst] <= 0.0005 else 1


if __name__ == "__main__":
    raise SystemExit(main())
