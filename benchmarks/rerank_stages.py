"""Search stages on the user's path: what ``mmr`` (and optionally ``llm``, ``cross-encoder``,
``bedrock``) do to a real workspace search, through ``kairox.open`` as an application would.

For each of the questions below, searched on this repository's workspace index (top 10):

* near-duplicates: hits whose vector (the workspace embedder's) has cosine >= 0.9 with a
  higher-ranked hit, with the profile's fused ranking and after the reranker;
* the latency the stage adds (its own status line's latency), p50 and p95.

    python benchmarks/rerank_stages.py [--workspace .] [--rerank mmr,llm] \
        [--llm-url http://127.0.0.1:8080/v1 --llm-model NAME] [--cross-encoder PATH] \
        [--bedrock-endpoint URL --bedrock-arn ARN]

The workspace must be indexed (``kairox index``). Prints a Markdown table and JSON.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

import kairox

QUESTIONS = [
    "how does a plugin register a knowledge base kind",
    "where are failed requests retried with backoff",
    "how is the token budget of a prompt computed",
    "what happens when a source times out",
    "how are memory markers extracted from a stream",
    "how does compaction summarise old history",
    "where is the workspace index chunked",
    "how are secrets kept out of error messages",
    "how does fusion merge rankings from several sources",
    "what does kairox config check print",
    "how is the web memory browser protected against CSRF",
    "how does the MCP server expose search",
    "where are sentence vectors packed for cold searches",
    "how does the loopback test server inject faults",
    "how are pending memory proposals approved",
    "how is a tantivy index opened and locked",
    "what does the daemon do when it dies mid request",
    "how does kb ingest read JSONL records",
    "how are hits printed without terminal escapes",
    "how does the hashing embedder build vectors",
]


THRESHOLDS = (0.7, 0.8, 0.9)


def near_duplicates(embedder, hits) -> dict[str, int]:
    """Hits like a higher-ranked one: by cosine (the workspace embedder's vectors) at each
    threshold, and by coming from the same file."""
    counts = {f"cos>={t}": 0 for t in THRESHOLDS} | {"same_file": 0}
    if len(hits) < 2:
        return counts
    vectors = np.asarray(embedder.embed([h.text for h in hits]), dtype=np.float32)
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    sims = unit @ unit.T
    for i in range(1, len(hits)):
        for t in THRESHOLDS:
            counts[f"cos>={t}"] += bool((sims[i, :i] >= t).any())
        counts["same_file"] += any(hits[i].uri == hits[j].uri for j in range(i))
    return counts


def total(counts: list[dict[str, int]]) -> dict[str, int]:
    return {key: sum(c[key] for c in counts) for key in counts[0]}


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def profile_table(args: argparse.Namespace) -> str:
    lines = ["[profiles.default]", "rerank_timeout_ms = 120000"]
    lines += [f"rerank_depth = {args.depth}"]
    # A stage's own keys are valid where the profile names that stage.
    lines.append(f'rerank = "{args.rerank.split(",")[0]}"')
    if "llm" in args.rerank.split(","):
        lines.append(f"rerank_passage_chars = {args.passage_chars}")
    if args.llm_url:
        lines += [f'base_url = "{args.llm_url}"', f'model = "{args.llm_model}"']
        lines += ['api_key_env = "KAIROX_BENCH_NO_KEY"']
    if args.cross_encoder:
        lines.append(f'cross_encoder = "{args.cross_encoder}"')
    if args.bedrock_arn:
        lines.append(f'bedrock_rerank_model_arn = "{args.bedrock_arn}"')
        if args.bedrock_endpoint:
            lines.append(f'bedrock_rerank_endpoint_url = "{args.bedrock_endpoint}"')
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workspace", default=".")
    parser.add_argument("--rerank", default="mmr")
    parser.add_argument("--llm-url")
    parser.add_argument("--llm-model", default="test-model")
    parser.add_argument("--cross-encoder")
    parser.add_argument("--bedrock-endpoint")
    parser.add_argument("--bedrock-arn")
    parser.add_argument("--depth", type=int, default=30, help="rerank_depth")
    parser.add_argument("--passage-chars", type=int, default=600, help="for llm")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    # The config file's folder is the workspace root, so it goes in the workspace for the
    # run (a temporary name; removed afterwards).
    with tempfile.NamedTemporaryFile(
        "w", suffix=".toml", prefix=".rerank-bench-", dir=args.workspace, delete=False
    ) as written:
        written.write(profile_table(args))
    config = Path(written.name)
    try:
        handle = kairox.open(args.workspace, config_path=config)
        facade = handle.facade
        embedder = facade.sources.embedding_backend(facade.config.workspace.embedding_backend)
        rows = []
        plain = [handle.search(q, k=10, rerank="none") for q in QUESTIONS]
        before = total([near_duplicates(embedder, r.hits) for r in plain])
        for name in args.rerank.split(","):
            handle.search(QUESTIONS[0], k=10, rerank=name)  # warm-up: loads models
            results = [handle.search(q, k=10, rerank=name) for q in QUESTIONS]
            stages = [r.stages[0] for r in results]
            failed = [s for s in stages if str(s.status) != "ok"]
            latencies = [s.latency_ms for s in stages if str(s.status) == "ok"]
            after = total([near_duplicates(embedder, r.hits) for r in results])
            rows.append(
                {
                    "rerank": name,
                    "queries": len(QUESTIONS),
                    "failed": len(failed),
                    "first_error": failed[0].error if failed else None,
                    "near_duplicates_before": before,
                    "near_duplicates_after": after,
                    "p50_ms": round(percentile(latencies, 50), 2),
                    "p95_ms": round(percentile(latencies, 95), 2),
                }
            )
        handle.close()
    finally:
        config.unlink()
    keys = list(rows[0]["near_duplicates_before"]) if rows else []
    header = " | ".join(f"{key} (fused -> reranked)" for key in keys)
    print(f"| reranker | {header} | added p50 / p95 ms | failed |")
    print("|---" * (len(keys) + 3) + "|")
    for row in rows:
        cells = " | ".join(
            f"{row['near_duplicates_before'][k]} -> {row['near_duplicates_after'][k]}" for k in keys
        )
        print(
            f"| {row['rerank']} | {cells} | {row['p50_ms']} / {row['p95_ms']} | {row['failed']} |"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
