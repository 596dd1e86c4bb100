"""Hits: pagination up to k, every location type, ids, metadata and content kinds, all
through real boto3 parsing the loopback server's responses."""

from __future__ import annotations

import json

import pytest
from kairox_bedrock import LOCATION_FIELDS, location_uri, result_to_hit
from kairox_bedrock.testing import (
    BedrockDocument,
    BedrockTestServer,
    corpus_documents,
    make_location,
)

from kairox.retrieval import Query, QueryError
from kairox.testing import CORPUS, run

EVERYTHING = "saturn hole plants mitochondria sourdough espresso python sql café"


def page_sizes(server) -> list[int]:
    return [
        r.json["retrievalConfiguration"]["vectorSearchConfiguration"]["numberOfResults"]
        for r in server.requests
    ]


# -- pagination ----------------------------------------------------------------------------------


def test_pages_are_followed_until_k_hits(make_source):
    with BedrockTestServer(corpus_documents(), page_size=2) as server:
        source = make_source(server)
        hits = run(source.retrieve(Query(EVERYTHING, k=5)))
        assert len(hits) == 5 and len({h.id for h in hits}) == 5
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert server.count() == 3
        assert page_sizes(server) == [5, 3, 1]  # asks only for what is still missing
        tokens = [r.json.get("nextToken") for r in server.requests]
        assert tokens[0] is None and all(tokens[1:])
        assert len(set(tokens[1:])) == 2


def test_pages_stop_when_there_is_no_next_token(make_source):
    with BedrockTestServer(corpus_documents(), page_size=2) as server:
        source = make_source(server)
        hits = run(source.retrieve(Query(EVERYTHING, k=50)))
        assert {h.id for h in hits} == {d.id for d in CORPUS}
        assert server.count() == 5  # 9 documents, 2 a page


def test_number_of_results_is_the_size_of_each_request(make_source):
    with BedrockTestServer(corpus_documents()) as server:
        source = make_source(server, number_of_results=3)
        hits = run(source.retrieve(Query(EVERYTHING, k=7)))
        assert len(hits) == 7
        assert page_sizes(server) == [3, 3, 1]


def test_one_request_when_the_first_page_is_enough(make_source):
    with BedrockTestServer(corpus_documents(), page_size=2) as server:
        source = make_source(server)
        assert len(run(source.retrieve(Query(EVERYTHING, k=2)))) == 2
        assert server.count() == 1


def test_a_retry_mid_pagination_resends_the_same_page(make_source):
    with BedrockTestServer(corpus_documents(), page_size=2) as server:
        source = make_source(server, timeout_ms=5000)
        server.fail("ThrottlingException", after=1)  # the second request is throttled
        hits = run(source.retrieve(Query(EVERYTHING, k=5)))
        assert len(hits) == 5
        statuses = [r.status for r in server.requests]
        assert statuses == [200, 429, 200, 200]
        tokens = [r.json.get("nextToken") for r in server.requests]
        assert tokens[1] == tokens[2] is not None


def test_a_next_token_the_service_refuses_is_a_query_error(make_source):
    with BedrockTestServer(corpus_documents()) as server:
        server.malformed(
            body=json.dumps(
                {"retrievalResults": [{"content": {"text": "x"}}], "nextToken": "forged-token"}
            )
        )
        with pytest.raises(QueryError, match="nextToken"):
            run(make_source(server).retrieve(Query(EVERYTHING, k=4)))
        assert server.count() == 2


# -- locations --------------------------------------------------------------------------------------

URIS = {
    "S3": "s3://bucket/docs/a.pdf",
    "WEB": "https://example.com/page",
    "CONFLUENCE": "https://acme.atlassian.net/wiki/spaces/X/pages/1",
    "SALESFORCE": "https://acme.my.salesforce.com/kA0",
    "SHAREPOINT": "https://acme.sharepoint.com/sites/x/doc.docx",
    "CUSTOM": "custom-doc-42",
    "KENDRA": "https://kendra.example/doc/7",
    "SQL": "SELECT name FROM products WHERE id = 7",
    "ONEDRIVE": "https://onedrive.live.com/doc",
    "GOOGLEDRIVE": "https://drive.google.com/file/d/1",
}


def test_every_location_type_gives_a_uri(make_source):
    assert set(URIS) == set(LOCATION_FIELDS)
    documents = [
        BedrockDocument(f"widget manual {kind.lower()}", make_location(kind, uri))
        for kind, uri in URIS.items()
    ]
    with BedrockTestServer(documents) as server:
        hits = run(make_source(server).retrieve(Query("widget", k=20)))
    assert {h.metadata["location_type"]: h.uri for h in hits} == URIS


def test_an_unknown_location_type_is_kept_with_no_uri(make_source):
    documents = [
        BedrockDocument(
            "widget hologram", {"type": "HOLOGRAM", "hologramLocation": {"uri": "holo://1"}}
        ),
        BedrockDocument("widget nowhere"),
    ]
    with BedrockTestServer(documents) as server:
        hits = {h.text: h for h in run(make_source(server).retrieve(Query("widget", k=5)))}
    assert hits["widget hologram"].uri is None
    assert hits["widget hologram"].metadata["location_type"] == "HOLOGRAM"
    assert hits["widget nowhere"].uri is None
    assert hits["widget nowhere"].metadata["location_type"] is None


def test_location_uri_reads_raw_locations():
    for kind, uri in URIS.items():
        assert location_uri(make_location(kind, uri)) == (uri, kind)
    assert location_uri({"type": "S3"}) == (None, "S3")
    assert location_uri({"type": "S3", "s3Location": {"uri": ""}}) == (None, "S3")
    assert location_uri({"type": "NEW"}) == (None, "NEW")
    assert location_uri(None) == (None, None)
    assert location_uri({"type": 7}) == (None, None)


# -- ids, metadata, text -------------------------------------------------------------------------------


def test_the_chunk_id_is_the_hit_id(corpus_server, make_source):
    hits = run(make_source(corpus_server).retrieve(Query("saturn rings", k=1)))
    assert hits[0].id == "astro-1"
    assert hits[0].uri == "s3://kairox-corpus/astro-1.txt"
    assert hits[0].metadata["topic"] == "astronomy" and hits[0].metadata["year"] == 2021
    assert hits[0].metadata["location_type"] == "S3"
    assert hits[0].source == "papers"


def test_without_a_chunk_id_the_id_is_the_uri_and_a_content_hash(make_source):
    documents = [
        BedrockDocument("widget one", make_location("WEB", "https://x/p")),
        BedrockDocument("widget two", make_location("WEB", "https://x/p")),
        BedrockDocument("widget three"),
    ]
    with BedrockTestServer(documents) as server:
        source = make_source(server)
        hits = run(source.retrieve(Query("widget", k=5)))
        again = run(source.retrieve(Query("widget", k=5)))
    assert len({h.id for h in hits}) == 3
    assert [h.id for h in hits] == [h.id for h in again]  # stable across queries
    web = sorted(h.id for h in hits if h.uri)
    assert all(i.startswith("https://x/p#") for i in web)
    (bare,) = [h.id for h in hits if h.uri is None]
    assert bare.startswith("bedrock#")


def test_duplicate_chunks_across_pages_are_dropped(make_source):
    payload = {
        "retrievalResults": [
            {
                "content": {"text": "a"},
                "metadata": {"x-amz-bedrock-kb-chunk-id": "c1"},
                "score": 0.9,
            },
            {
                "content": {"text": "a"},
                "metadata": {"x-amz-bedrock-kb-chunk-id": "c1"},
                "score": 0.8,
            },
            {
                "content": {"text": "b"},
                "metadata": {"x-amz-bedrock-kb-chunk-id": "c2"},
                "score": 0.7,
            },
        ]
    }
    with BedrockTestServer() as server:
        server.malformed(body=json.dumps(payload))
        hits = run(make_source(server).retrieve(Query("anything", k=5)))
    assert [(h.id, h.score) for h in hits] == [("c1", 0.9), ("c2", 0.7)]


def test_content_without_plain_text(make_source):
    payload = {
        "retrievalResults": [
            {
                "content": {
                    "type": "ROW",
                    "row": [
                        {"columnName": "name", "columnValue": "widget", "type": "STRING"},
                        {"columnName": "price", "columnValue": "9.5", "type": "DOUBLE"},
                    ],
                },
                "location": make_location("SQL", "SELECT name, price FROM products"),
                "score": 0.9,
            },
            {
                "content": {
                    "type": "AUDIO",
                    "audio": {"s3Uri": "s3://b/a.mp3", "transcription": "hello"},
                },
                "score": 0.8,
            },
            {
                "content": {"type": "IMAGE", "byteContent": "data:image/png;base64,AAAA"},
                "score": 0.7,
            },
        ]
    }
    with BedrockTestServer() as server:
        server.malformed(body=json.dumps(payload))
        hits = run(make_source(server).retrieve(Query("widget", k=5)))
    assert [h.text for h in hits] == ["name: widget\nprice: 9.5", "hello"]  # images are skipped
    assert hits[0].uri == "SELECT name, price FROM products"
    assert hits[0].metadata["location_type"] == "SQL"


def test_result_to_hit_falls_back_to_the_source_uri_metadata():
    hit = result_to_hit(
        {
            "content": {"text": "t"},
            "location": {"type": "NEWTYPE"},
            "metadata": {"x-amz-bedrock-kb-source-uri": "s3://b/k"},
        },
        "kb",
    )
    assert hit is not None and hit.uri == "s3://b/k" and hit.score == 0.0
    assert result_to_hit({"content": {"text": "  "}}, "kb") is None
