"""``kairox bench retrieval --profile`` over the cloud kinds, against their loopback servers
(real boto3, pinecone and weaviate clients over real sockets)."""

from __future__ import annotations

import json

import pytest

bedrock_testing = pytest.importorskip("kairox_bedrock.testing")
pinecone_testing = pytest.importorskip("kairox_pinecone.testing")
weaviate_testing = pytest.importorskip("kairox_weaviate.testing")

from kairox.default_plugins.hashing_embedder import HashingEmbedder  # noqa: E402
from kairox.retrieval import VectorRecord  # noqa: E402
from tests.integration.conftest import cloud_tables  # noqa: E402

KEY = "pinecone-test-key-0002"
DOCS = {
    "bedrock": "Bedrock summary: glacier melt raises sea level by millimetres a year.",
    "pinecone": "Pinecone memo: espresso extraction pressure and crema.",
    "weaviate": "Weaviate article: sourdough starter feeding schedule and yeast.",
}
QUERIES = {
    "q-ice": "glacier melt sea level",
    "q-coffee": "espresso crema",
    "q-bread": "sourdough yeast",
}
# Judged ids as each kind names its passages: Bedrock by the document's uri, Pinecone
# by the vector id, Weaviate by the object's doc_id property.
QRELS = {"q-ice": "s3://climate/glaciers.pdf", "q-coffee": "pc-1", "q-bread": "wv-1"}


@pytest.fixture
def cloud_workspace(workspace, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDKAIROXTEST000001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "kairox-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("KAIROX_PINECONE_KEY", KEY)
    embedder = HashingEmbedder()
    location = bedrock_testing.make_location("S3", "s3://climate/glaciers.pdf")
    bedrock = bedrock_testing.BedrockTestServer(
        [bedrock_testing.BedrockDocument(DOCS["bedrock"], location, {})]
    ).start()
    pinecone = pinecone_testing.PineconeTestServer(embedder.dim, api_key=KEY).start()
    vector = embedder.embed([DOCS["pinecone"]])[0].tolist()
    pinecone.seed([VectorRecord("pc-1", vector, DOCS["pinecone"])])
    weaviate = weaviate_testing.WeaviateTestServer(["Notes"]).start()
    weaviate.seed(
        "Notes",
        [{"text": DOCS["weaviate"], "doc_id": "wv-1"}],
        vectors=[embedder.embed([DOCS["weaviate"]])[0].tolist()],
    )
    (workspace / "kairox.toml").write_text(
        f"""
{cloud_tables(bedrock, pinecone, weaviate)}"""
    )
    queries = workspace / "queries.jsonl"
    queries.write_text("".join(json.dumps({"id": q, "text": t}) + "\n" for q, t in QUERIES.items()))
    qrels = workspace / "qrels.tsv"
    qrels.write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in QRELS.items())
    )
    try:
        yield workspace, (bedrock, pinecone, weaviate)
    finally:
        bedrock.close()
        pinecone.close()
        weaviate.stop()


def bench(invoke, *args):
    return invoke(
        "bench", "retrieval", "--json", "--queries", "queries.jsonl", "--qrels", "qrels.tsv", *args
    )


def test_the_profile_and_each_cloud_kb_are_benchmarked_through_their_servers(
    cloud_workspace, invoke
):
    _, (bedrock, pinecone, _) = cloud_workspace
    result = bench(invoke, "--profile", "default", "--systems", "kb:aws,kb:pc,kb:wv")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    systems = {row["system"]: row for row in report["systems"]}
    assert systems["profile:default"]["sources"] == ["aws", "pc", "wv"]
    assert systems["profile:default"]["mrr@10"] > 0
    per_query = report["per_query"]
    # each knowledge base finds its own passage, first
    assert per_query["kb:aws"]["mrr@10"]["q-ice"] == 1.0
    assert per_query["kb:pc"]["mrr@10"]["q-coffee"] == 1.0
    assert per_query["kb:wv"]["mrr@10"]["q-bread"] == 1.0
    # every query (and the warm-up) went over the wire to each server
    assert len(bedrock.requests) >= 2 * len(QUERIES)
    assert len(pinecone.requests) >= 2 * len(QUERIES)


def test_a_cloud_source_that_errors_is_counted_per_query(cloud_workspace, invoke):
    _, (_, pinecone, _) = cloud_workspace
    pinecone.close()  # pinecone now refuses connections: an error on every query
    result = bench(invoke, "--profile", "default")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    failures = report["systems"][0]["failures"]
    assert set(failures) == {"pc"} and failures["pc"]["queries"] == len(QUERIES)
    assert failures["pc"]["error"] == len(QUERIES)
    # the other two still answered and are scored
    assert report["per_query"]["profile:default"]["mrr@10"]["q-ice"] == 1.0
