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
import statistics
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


def near_duplicates(embedder, texts: list[str], threshold: float = 0.9) -> int:
    if len(texts) < 2:
        return 0
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    sims = unit @ unit.T
    return sum(bool((sims[i, :i] >= threshold).any()) for i in range(1, len(texts)))


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def profile_table(args: argparse.Namespace) -> str:
    lines = ["[profiles.default]", "rerank_timeout_ms = 120000"]
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
        before = [near_duplicates(embedder, [h.text for h in r.hits]) for r in plain]
        for name in args.rerank.split(","):
            handle.search(QUESTIONS[0], k=10, rerank=name)  # warm-up: loads models
            results = [handle.search(q, k=10, rerank=name) for q in QUESTIONS]
            stages = [r.stages[0] for r in results]
            failed = [s for s in stages if str(s.status) != "ok"]
            latencies = [s.latency_ms for s in stages if str(s.status) == "ok"]
            after = [near_duplicates(embedder, [h.text for h in r.hits]) for r in results]
            rows.append(
                {
                    "rerank": name,
                    "queries": len(QUESTIONS),
                    "failed": len(failed),
                    "first_error": failed[0].error if failed else None,
                    "near_duplicates_before": sum(before),
                    "near_duplicates_after": sum(after),
                    "p50_ms": round(percentile(latencies, 50), 2),
                    "p95_ms": round(percentile(latencies, 95), 2),
                    "median_search_ms_before": round(
                        statistics.median(
                            sum(rep.latency_ms for rep in r.reports[:1]) for r in plain
                        ),
                        2,
                    ),
                }
            )
        handle.close()
    finally:
        config.unlink()
    print(
        "| reranker | near-duplicates in top 10 (20 queries), fused -> reranked | added p50 / p95 ms | failed |"
    )
    print("|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['rerank']} | {row['near_duplicates_before']} -> "
            f"{row['near_duplicates_after']} | {row['p50_ms']} / {row['p95_ms']} | "
            f"{row['failed']} |"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
