"""``BedrockTestServer``: a loopback Bedrock Agent Runtime for tests, no AWS needed.

A real HTTP server (stdlib ``ThreadingHTTPServer`` on ``127.0.0.1``, a random port, a
background thread) that speaks the ``Retrieve`` operation of ``bedrock-agent-runtime``
exactly as boto3 sends it: ``POST /knowledgebases/{knowledgeBaseId}/retrieve`` with a
JSON body, a JSON answer ``{"retrievalResults": [...], "nextToken": ...}``, and errors the
way AWS sends them for REST/JSON services (status code, ``x-amzn-ErrorType`` header, body
``{"message": ...}``), so botocore raises ``ClientError`` with the right
``Error.Code``. Point a real boto3 client (or a ``bedrock`` knowledge base) at it with
``endpoint_url``::

    from kairox_bedrock.testing import BedrockDocument, BedrockTestServer, s3_location

    docs = [BedrockDocument("Saturn's rings are ice.", s3_location("s3://b/saturn.txt"),
                            {"topic": "astronomy", "year": 2021})]
    with BedrockTestServer(docs, page_size=2) as server:
        client = boto3.client("bedrock-agent-runtime", region_name="us-east-1",
                              endpoint_url=server.url)
        client.retrieve(knowledgeBaseId=server.knowledge_base_id,
                        retrievalQuery={"text": "saturn rings"})
        server.fail("ThrottlingException", times=2)   # the next two requests get 429
        server.requests                                # every request, recorded

It behaves like the service where a client can tell: a deterministic lexical score in
[0, 1] (term overlap, so results are reproducible), numberOfResults (default 5) and
opaque ``nextToken`` pagination (``page_size`` caps a page), every filter operator of
``RetrievalFilter`` evaluated on document metadata, ``ValidationException`` (400) for a
malformed request or filter (``in`` with a scalar, ``andAll`` with one member, empty
query text), ``ResourceNotFoundException`` (404) for an unknown knowledge base id, and
SigV4 checks on the ``Authorization`` header: service scope ``bedrock``, optionally the
region, the access key id (``UnrecognizedClientException``, 403) and the signature
itself (``InvalidSignatureException``, 403). Failures and slow replies are switched on
per test with the loopback vocabulary of :mod:`kairox.testing.loopback`:
:meth:`~BedrockTestServer.fail`, :meth:`~BedrockTestServer.throttle`,
:meth:`~BedrockTestServer.malformed` (exactly the payload given),
:meth:`~BedrockTestServer.delay`, :meth:`~BedrockTestServer.disconnect`.

The server is :mod:`.server`; the request checks, filter evaluation, pagination tokens
and SigV4 are :mod:`.checks`. Only the standard library and Kairox are used (boto3 is the
client's business).
"""

from __future__ import annotations

from kairox_bedrock.testing.checks import evaluate_filter
from kairox_bedrock.testing.server import (
    DEFAULT_KNOWLEDGE_BASE_ID,
    ERROR_STATUS,
    BedrockDocument,
    BedrockTestServer,
    RecordedRequest,
    corpus_documents,
    make_location,
    s3_location,
)

__all__ = [
    "DEFAULT_KNOWLEDGE_BASE_ID",
    "ERROR_STATUS",
    "BedrockDocument",
    "BedrockTestServer",
    "RecordedRequest",
    "corpus_documents",
    "evaluate_filter",
    "make_location",
    "s3_location",
]
