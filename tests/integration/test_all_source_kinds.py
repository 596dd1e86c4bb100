"""All five knowledge-base kinds in one ``kairox search``, and ``kairox kb sync`` round trips.

The cloud kinds point at the loopback servers their plugins ship (real boto3, pinecone
and weaviate clients over real sockets). Needs every first-party plugin installed, as
``make test`` does.
"""

from __future__ import annotations

import json

import pytest

bedrock_testing = pytest.importorskip("kairox_bedrock.testing")
pinecone_testing = pytest.importorskip("kairox_pinecone.testing")
weaviate_testing = pytest.importorskip("kairox_weaviate.testing")
pytest.importorskip("kairox_tantivy")

from kairox.default_plugins.hashing_embedder import HashingEmbedder  # noqa: E402
from kairox.retrieval import VectorRecord  # noqa: E402
from kairox.retrieval.filters import matches, parse_filter  # noqa: E402
from kairox.runtime.facade import AppFacade  # noqa: E402
from kairox.runtime.sync import record_id  # noqa: E402
from tests.integration.conftest import cloud_tables  # noqa: E402

QUERY = "glacier melt"
PINECONE_KEY = "pinecone-test-key-0001"
DOCS = {
    "sqlite": "Glacier melt in the Alps accelerated after 2003, the sqlite report says.",
    "tantivy": "Tantivy notes: glacier melt rates measured with stakes and radar.",
    "bedrock": "Bedrock summary: glacier melt raises sea level by millimetres a year.",
    "pinecone": "Pinecone memo: glacier melt feeds rivers in late summer.",
    "weaviate": "Weaviate article: glacier melt and albedo feedback loops.",
}


@pytest.fixture
def servers(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDKAIROXTEST000001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "kairox-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("KAIROX_PINECONE_KEY", PINECONE_KEY)
    embedder = HashingEmbedder()
    bedrock = bedrock_testing.BedrockTestServer(
        [
            bedrock_testing.BedrockDocument(
                DOCS["bedrock"],
                bedrock_testing.make_location("S3", "s3://climate/glaciers.pdf"),
                {},
            )
        ]
    ).start()
    pinecone = pinecone_testing.PineconeTestServer(embedder.dim, api_key=PINECONE_KEY).start()
    pinecone.seed(
        [VectorRecord("pc-1", embedder.embed([DOCS["pinecone"]])[0].tolist(), DOCS["pinecone"])]
    )
    weaviate = weaviate_testing.WeaviateTestServer(["Notes"]).start()
    weaviate.seed(
        "Notes",
        [{"text": DOCS["weaviate"], "doc_id": "wv-1"}],
        vectors=[embedder.embed([DOCS["weaviate"]])[0].tolist()],
    )
    try:
        yield bedrock, pinecone, weaviate
    finally:
        bedrock.close()
        pinecone.close()
        weaviate.stop()


def configure(workspace, bedrock, pinecone, weaviate):
    (workspace / "sqlite.jsonl").write_text(
        json.dumps({"id": "sq-1", "text": DOCS["sqlite"]}) + "\n"
    )
    (workspace / "tantivy.jsonl").write_text(
        json.dumps({"id": "tv-1", "text": DOCS["tantivy"]}) + "\n"
    )
    (workspace / "kairox.toml").write_text(
        f"""
[knowledge_bases.local_fts]
kind = "sqlite-fts"
path = "state/fts.db"

[knowledge_bases.local_tantivy]
kind = "tantivy"
index_dir = "state/tantivy"

{cloud_tables(bedrock, pinecone, weaviate)}"""
    )


def search(invoke):
    result = invoke("search", QUERY, "-k", "10", "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_one_fused_ranking_with_provenance_from_all_five(invoke, workspace, servers):
    configure(workspace, *servers)
    assert invoke("kb", "ingest", "local_fts", "sqlite.jsonl").exit_code == 0
    assert invoke("kb", "ingest", "local_tantivy", "tantivy.jsonl").exit_code == 0

    data = search(invoke)
    reports = {r["source"]: r for r in data["sources"]}
    assert {name: r["status"] for name, r in reports.items()} == dict.fromkeys(
        ["local_fts", "local_tantivy", "aws", "pc", "wv"], "ok"
    )
    provenance = {p["source"] for hit in data["hits"] for p in hit["sources"]}
    assert provenance == {"local_fts", "local_tantivy", "aws", "pc", "wv"}
    texts = " ".join(hit["text"] for hit in data["hits"])
    assert all(doc in texts for doc in DOCS.values())

    # stop one server: that source reports an error, the other four still answer
    servers[1].close()
    data = search(invoke)
    reports = {r["source"]: r for r in data["sources"]}
    assert reports["pc"]["status"] == "error" and reports["pc"]["error"]
    assert all(
        reports[name]["status"] == "ok" for name in ("local_fts", "local_tantivy", "aws", "wv")
    )
    provenance = {p["source"] for hit in data["hits"] for p in hit["sources"]}
    assert provenance == {"local_fts", "local_tantivy", "aws", "wv"}


def make_workspace_files(workspace, count):
    folder = workspace / "notes"
    folder.mkdir()
    for i in range(count):
        words = " ".join(f"w{i}_{j}" for j in range(40))
        (folder / f"note{i:04}.txt").write_text(f"note {i}: {words}\n")
    return folder


def expected_ids(facade):
    index = facade.workspace_index()
    try:
        return {
            record_id(index.workspace_id, c.relpath, c.chunk_index)
            for c in index.iter_chunk_vectors()
        }
    finally:
        index.close()


def test_sync_2000_chunks_then_mirror_a_deletion(invoke, workspace, servers):
    _, pinecone, weaviate = servers
    configure(workspace, *servers)
    notes = make_workspace_files(workspace, 2000)
    assert invoke("index", "--json").exit_code == 0
    upserted = []
    for kb in ("pc", "wv"):
        # The workspace keeps words only (the hashing default): sync embeds its chunks.
        result = invoke("kb", "sync", kb, "--json")
        assert result.exit_code == 0, result.output
        upserted.append(json.loads(result.output)["upserted"])
    facade = AppFacade(cwd=workspace)
    expected = expected_ids(facade)
    assert len(expected) >= 2000
    assert upserted == [len(expected), len(expected)]

    def remote_pinecone():
        return {v.metadata.get("kairox_id", v.id) for v in pinecone.vectors().values()} - {"pc-1"}

    def remote_weaviate():
        return {o.properties.get("doc_id") for o in weaviate.objects("Notes")} - {"wv-1"}

    assert remote_pinecone() == expected
    assert remote_weaviate() == expected

    (notes / "note0007.txt").unlink()
    assert invoke("index").exit_code == 0
    after = expected_ids(AppFacade(cwd=workspace))
    assert len(after) == len(expected) - 1
    for kb in ("pc", "wv"):
        result = json.loads(invoke("kb", "sync", kb, "--json").output)
        assert (result["upserted"], result["deleted"]) == (0, 1)
    assert remote_pinecone() == after
    assert remote_weaviate() == after


FILTER = "lang in (en, fr) and not draft"


def test_one_filter_over_all_five_kinds(invoke, workspace, servers):
    """Each kind holds a passage the filter keeps and ones it drops (the fixture's own,
    without metadata, among them); every hit of one filtered `kairox search` satisfies
    the filter, and all five kinds answer ``ok``."""
    bedrock, pinecone, weaviate = servers
    configure(workspace, *servers)
    embedder = HashingEmbedder()
    variants = {
        "keep": {"lang": "en", "draft": False},
        "draft": {"lang": "en", "draft": True},
        "german": {"lang": "de", "draft": False},
    }
    for kind in ("sqlite", "tantivy"):
        lines = [
            json.dumps({"id": f"{kind}-{v}", "text": f"{DOCS[kind]} ({v})", "metadata": meta})
            for v, meta in variants.items()
        ]
        (workspace / f"{kind}.jsonl").write_text("\n".join(lines) + "\n")
    for v, meta in variants.items():
        bedrock.documents.append(
            bedrock_testing.BedrockDocument(
                f"{DOCS['bedrock']} ({v})",
                bedrock_testing.make_location("S3", f"s3://climate/{v}.pdf"),
                meta,
            )
        )
        text = f"{DOCS['pinecone']} ({v})"
        pinecone.seed([VectorRecord(f"pc-{v}", embedder.embed([text])[0].tolist(), text, meta)])
        text = f"{DOCS['weaviate']} ({v})"
        weaviate.seed(
            "Notes",
            [{"text": text, "doc_id": f"wv-{v}", **meta}],
            vectors=[embedder.embed([text])[0].tolist()],
        )
    assert invoke("kb", "ingest", "local_fts", "sqlite.jsonl").exit_code == 0
    assert invoke("kb", "ingest", "local_tantivy", "tantivy.jsonl").exit_code == 0

    result = invoke("search", QUERY, "-k", "30", "--json", "--filter", FILTER)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    reports = {r["source"]: r["status"] for r in data["sources"]}
    assert reports == dict.fromkeys(["local_fts", "local_tantivy", "aws", "pc", "wv"], "ok")
    expr = parse_filter(FILTER)
    assert data["hits"]
    for hit in data["hits"]:
        assert matches(expr, hit["metadata"]), hit
        assert "(keep)" in hit["text"], hit
    provenance = {p["source"] for hit in data["hits"] for p in hit["sources"]}
    assert provenance == {"local_fts", "local_tantivy", "aws", "pc", "wv"}
