"""The loopback Bedrock Agent Runtime server (see :mod:`kairox_bedrock.testing`)."""

from __future__ import annotations

import hashlib
import json
import math
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote, urlsplit

from kairox.testing import loopback
from kairox.testing.loopback import LoopbackHTTPServer, Reply
from kairox_bedrock.source import CHUNK_ID_KEY, LOCATION_FIELDS, SOURCE_URI_KEY
from kairox_bedrock.testing.checks import (
    ServiceError,
    _check_filter,
    _make_token,
    _read_token,
    _require_text,
    _signature_ok,
    evaluate_filter,
    json_object,
)
from kairox_bedrock.testing.rerank import RERANK_PATH, answer_rerank

DEFAULT_KNOWLEDGE_BASE_ID = "KAIROXTEST"
DATA_SOURCE_KEY = "x-amz-bedrock-kb-data-source-id"

#: HTTP status of each error code the server can send (the service model's, plus the
#: front-door auth errors every AWS service shares).
ERROR_STATUS: dict[str, int] = {
    "ValidationException": 400,
    "SerializationException": 400,
    "ServiceQuotaExceededException": 400,
    "IncompleteSignatureException": 403,
    "AccessDeniedException": 403,
    "UnrecognizedClientException": 403,
    "InvalidSignatureException": 403,
    "ExpiredTokenException": 403,
    "MissingAuthenticationTokenException": 403,
    "ResourceNotFoundException": 404,
    "UnknownOperationException": 404,
    "ConflictException": 409,
    "DependencyFailedException": 424,
    "ThrottlingException": 429,
    "InternalServerException": 500,
    "BadGatewayException": 502,
    "ServiceUnavailableException": 503,
}

_DEFAULT_MESSAGES: dict[str, str] = {
    "ThrottlingException": "Rate exceeded",
    "InternalServerException": "Internal server error",
    "ServiceUnavailableException": "Service Unavailable",
    "BadGatewayException": "Bad gateway",
    "DependencyFailedException": "The vector store did not answer",
    "AccessDeniedException": (
        "User: arn:aws:iam::123456789012:user/kairox is not authorized to perform: "
        "bedrock:Retrieve on resource: knowledge base"
    ),
    "UnrecognizedClientException": "The security token included in the request is invalid.",
    "InvalidSignatureException": (
        "The request signature we calculated does not match the signature you provided. "
        "Check your AWS Secret Access Key and signing method. Consult the service "
        "documentation for details."
    ),
    "ExpiredTokenException": "The security token included in the request is expired",
    "MissingAuthenticationTokenException": "Missing Authentication Token",
    "ValidationException": "1 validation error detected",
    "ResourceNotFoundException": "The specified resource was not found",
    "ServiceQuotaExceededException": "Service quota exceeded",
    "ConflictException": "Conflict",
}

# Errors raised by the AWS front door rather than the service: AWS sends their type with
# a coral namespace suffix, which botocore strips.
_FRONT_DOOR = frozenset(
    {
        "IncompleteSignatureException",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "ExpiredTokenException",
        "MissingAuthenticationTokenException",
    }
)

_PATH = re.compile(r"/knowledgebases/(?P<kb>[^/]+)/retrieve")
_KB_ID = re.compile(r"[0-9a-zA-Z]{10}")
_KB_ARN = re.compile(
    r"arn:aws(-[^:]+)?:bedrock:[a-z0-9-]{1,20}:[0-9]{12}:knowledge-base/(?P<id>[0-9a-zA-Z]{10})"
)
_AUTH = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<akid>[^/,\s]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
    r"(?P<service>[^/]+)/aws4_request,\s*SignedHeaders=(?P<signed>[^,\s]+),\s*"
    r"Signature=(?P<signature>[0-9a-f]{64})"
)
_WORD = re.compile(r"\w+")
_MAX_RESULTS = 100
_DEFAULT_RESULTS = 5


# -- documents ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BedrockDocument:
    """One chunk the server holds.

    :param text: the chunk text (``content.text``), also what the lexical score reads.
    :param location: a ``RetrievalResultLocation`` of any type, e.g. from
        :func:`make_location`; ``None`` sends no location.
    :param metadata: the chunk's metadata attributes, filterable.
    :param chunk_id: sent as metadata ``x-amz-bedrock-kb-chunk-id`` when given.
    """

    text: str
    location: Mapping[str, Any] | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    chunk_id: str | None = None


def make_location(kind: str, value: str) -> dict[str, Any]:
    """A ``RetrievalResultLocation`` of type ``kind`` (``S3``, ``WEB``, ``CONFLUENCE``,
    ``SALESFORCE``, ``SHAREPOINT``, ``CUSTOM``, ``KENDRA``, ``SQL``, ``ONEDRIVE``,
    ``GOOGLEDRIVE``) whose uri field holds ``value``."""
    member, key = LOCATION_FIELDS[kind]
    return {"type": kind, member: {key: value}}


def s3_location(uri: str) -> dict[str, Any]:
    """``{"type": "S3", "s3Location": {"uri": uri}}``."""
    return make_location("S3", uri)


def corpus_documents(corpus: Iterable[Any] | None = None) -> list[BedrockDocument]:
    """Kairox's conformance corpus (``kairox.testing.CORPUS`` by default) as documents.

    Text is ``title + "\\n" + text``, the chunk id is the corpus id (so hits keep the
    corpus ids), the location is ``s3://kairox-corpus/<id>.txt``, metadata as given.
    """
    if corpus is None:
        from kairox.testing.corpus import CORPUS  # needs pytest; only when asked for

        corpus = CORPUS
    return [
        BedrockDocument(
            f"{doc.title}\n{doc.text}" if doc.title else doc.text,
            s3_location(f"s3://kairox-corpus/{doc.id}.txt"),
            dict(doc.metadata),
            chunk_id=doc.id,
        )
        for doc in corpus
    ]


@dataclass(slots=True)
class RecordedRequest(loopback.RecordedRequest):
    """One request the server received, and what it answered.

    Beyond :class:`kairox.testing.loopback.RecordedRequest`: ``access_key``, ``region``
    and ``service`` come from the SigV4 credential scope of the ``Authorization`` header
    (``None`` when absent or malformed); ``error_code`` is the error it was answered with.
    """

    access_key: str | None = None
    region: str | None = None
    service: str | None = None
    error_code: str | None = None


@dataclass(frozen=True, slots=True)
class _Reply:
    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    error_code: str | None = None
    drop: bool = False


def _error_reply(
    code: str, message: str | None = None, *, status: int | None = None, retry_after=None
) -> _Reply:
    text = message if message is not None else _DEFAULT_MESSAGES.get(code, code)
    error_type = code
    if code in _FRONT_DOOR:
        error_type += ":http://internal.amazon.com/coral/com.amazon.coral.service/"
    headers = [("x-amzn-ErrorType", error_type)]
    if retry_after is not None:
        headers.append(("Retry-After", str(retry_after)))
    return _Reply(
        status if status is not None else ERROR_STATUS.get(code, 400),
        json.dumps({"message": text}).encode(),
        tuple(headers),
        code,
    )


# -- the server ------------------------------------------------------------------------------


class BedrockTestServer(LoopbackHTTPServer):
    """A loopback ``bedrock-agent-runtime`` that serves ``Retrieve`` over ``documents``.

    :param documents: the chunks of the knowledge base.
    :param knowledge_base_id: the one id that exists (10 letters or digits; its ARN works
        too); any other id is a 404 ``ResourceNotFoundException``.
    :param page_size: the most results in one response; more matches come with a
        ``nextToken``. ``None``: a page holds ``numberOfResults`` (default 5).
    :param access_key: when set, requests signed with another access key id get 403
        ``UnrecognizedClientException``.
    :param secret_key: when set (with ``access_key``), the SigV4 signature is verified;
        a wrong secret gets 403 ``InvalidSignatureException``.
    :param region: when set, a request signed for another region gets 403.
    :param data_source_id: sent as metadata ``x-amz-bedrock-kb-data-source-id``.

    Use it as a context manager (or call :meth:`start` and :meth:`stop`). After
    :meth:`stop`, :attr:`url` (boto3's ``endpoint_url``) names a port where nothing
    listens. Faults (:meth:`fail` with a Bedrock error code, :meth:`throttle`,
    :meth:`delay`, :meth:`malformed` with the exact payload to send, :meth:`disconnect`)
    apply to authenticated requests, except :meth:`delay`, which holds every reply.
    """

    THROTTLE_ERROR = "ThrottlingException"

    def __init__(
        self,
        documents: Sequence[BedrockDocument] = (),
        *,
        knowledge_base_id: str = DEFAULT_KNOWLEDGE_BASE_ID,
        page_size: int | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        region: str | None = None,
        data_source_id: str = "KAIROXDS01",
    ) -> None:
        if not _KB_ID.fullmatch(knowledge_base_id):
            raise ValueError(
                f"knowledge_base_id must be 10 letters or digits: {knowledge_base_id!r}"
            )
        if page_size is not None and page_size < 1:
            raise ValueError(f"page_size must be at least 1, got {page_size}")
        super().__init__()
        self.documents: list[BedrockDocument] = list(documents)
        self.knowledge_base_id = knowledge_base_id
        self.page_size = page_size
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = region
        self.data_source_id = data_source_id
        #: Exceptions the server raised while handling a request (a bug in the server).
        self.errors: list[BaseException] = []

    # -- answering ------------------------------------------------------------------------

    def _check_error(self, error: int | str, target: str | None) -> int | str:
        if not isinstance(error, str):
            raise ValueError(
                f"give a Bedrock error code (e.g. 'ThrottlingException'), got {error!r}"
            )
        return error

    def _handle(self, request: loopback.RecordedRequest, handler: BaseHTTPRequestHandler) -> Reply:
        method, target, headers, body = (
            request.method,
            request.raw_path,
            request.headers,
            request.body,
        )
        scope = _AUTH.match(headers.get("authorization", ""))
        try:
            reply = self._answer(request, scope)
        except Exception as exc:  # a bug in the server: say so rather than hang the client
            self.errors.append(exc)
            reply = _error_reply("InternalServerException", f"test server bug: {exc!r}")
        record = RecordedRequest(
            method=method,
            path=target,
            headers=dict(headers),
            body=body,
            json=request.json,
            query=request.query,
            raw_path=target,
            status=reply.status,
            access_key=scope["akid"] if scope else None,
            region=scope["region"] if scope else None,
            service=scope["service"] if scope else None,
            error_code=reply.error_code,
        )
        self._record(record)
        delay = self.faults.take("delay", record)
        if delay is not None and self._pause(delay.seconds):
            return Reply(reply.status, drop=True)
        if reply.drop:
            return Reply(reply.status, drop=True)
        return Reply(
            reply.status,
            reply.body,
            {"x-amzn-RequestId": str(uuid.uuid4()), **dict(reply.headers)},
        )

    def _answer(self, request: loopback.RecordedRequest, scope: re.Match[str] | None) -> _Reply:
        method, target, body = request.method, request.raw_path, request.body
        denied = self._authenticate(request, scope)
        if denied is not None:
            return denied
        if self.faults.take("disconnect", request) is not None:
            return _Reply(0, b"", drop=True)
        failure = self.faults.take("fail", request)
        if failure is not None:
            return _error_reply(
                str(failure.error),
                failure.message,
                status=failure.details.get("status"),
                retry_after=failure.retry_after,
            )
        bad = self.faults.take("malformed", request)
        if bad is not None:
            extra = (
                ("Content-Type", bad.details.get("content_type", "application/json")),
                *(bad.details.get("headers") or {}).items(),
            )
            payload = bad.body if bad.body is not None else b'{"retrievalResults": [{"con'
            return _Reply(bad.details.get("status", 200), payload, extra)
        path = urlsplit(target).path
        if method == "POST" and path == RERANK_PATH:
            try:
                answer = answer_rerank(body)
            except ServiceError as exc:
                return _error_reply(exc.code, exc.message)
            return _Reply(200, json.dumps(answer).encode(), (("Content-Type", "application/json"),))
        route = _PATH.fullmatch(path)
        if method != "POST" or route is None:
            return _error_reply("UnknownOperationException", f"No operation at {method} {path}")
        try:
            return self._retrieve(unquote(route["kb"]), body)
        except ServiceError as exc:
            return _error_reply(exc.code, exc.message)

    def _authenticate(
        self, request: loopback.RecordedRequest, scope: re.Match[str] | None
    ) -> _Reply | None:
        headers = request.headers
        if "authorization" not in headers:
            return _error_reply("MissingAuthenticationTokenException")
        if scope is None:
            return _error_reply(
                "IncompleteSignatureException",
                "Authorization header requires 'Credential', 'SignedHeaders' and "
                "'Signature' parameters for AWS4-HMAC-SHA256.",
            )
        if scope["service"] != "bedrock":
            return _error_reply(
                "InvalidSignatureException",
                "Credential should be scoped to correct service: 'bedrock'.",
            )
        if self.region is not None and scope["region"] != self.region:
            return _error_reply(
                "InvalidSignatureException", "Credential should be scoped to a valid region."
            )
        if self.access_key is not None and scope["akid"] != self.access_key:
            return _error_reply("UnrecognizedClientException")
        if self.secret_key is not None and not _signature_ok(
            self.secret_key, request.method, request.raw_path, headers, request.body, scope
        ):
            return _error_reply("InvalidSignatureException")
        return None

    def _retrieve(self, kb_path: str, body: bytes) -> _Reply:
        kb_id = self._check_kb_id(kb_path)
        payload = json_object(body, "a JSON object")
        text = _require_text(payload)
        config = payload.get("retrievalConfiguration") or {}
        if not isinstance(config, dict):
            raise ServiceError("SerializationException", "retrievalConfiguration must be an object")
        search = config.get("vectorSearchConfiguration") or {}
        if not isinstance(search, dict):
            raise ServiceError(
                "SerializationException", "vectorSearchConfiguration must be an object"
            )
        count = search.get("numberOfResults", _DEFAULT_RESULTS)
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= _MAX_RESULTS:
            raise ServiceError(
                "ValidationException",
                f"1 validation error detected: Value '{count}' at "
                "'retrievalConfiguration.vectorSearchConfiguration.numberOfResults' failed to "
                f"satisfy constraint: Member must have value between 1 and {_MAX_RESULTS}",
            )
        search_type = search.get("overrideSearchType")
        if search_type is not None and search_type not in ("HYBRID", "SEMANTIC"):
            raise ServiceError(
                "ValidationException",
                f"1 validation error detected: Value '{search_type}' at "
                "'retrievalConfiguration.vectorSearchConfiguration.overrideSearchType' failed "
                "to satisfy constraint: Member must satisfy enum value set: [HYBRID, SEMANTIC]",
            )
        expression = search.get("filter")
        if expression is not None:
            _check_filter(expression, "retrievalConfiguration.vectorSearchConfiguration.filter")

        ranked = self._rank(kb_id, text, expression)
        fingerprint = hashlib.sha256(
            json.dumps([kb_id, text, expression, search_type], sort_keys=True).encode()
        ).hexdigest()[:16]
        offset = _read_token(payload.get("nextToken"), fingerprint)
        size = count if self.page_size is None else min(count, self.page_size)
        page = ranked[offset : offset + size]
        response: dict[str, Any] = {"retrievalResults": page}
        if offset + size < len(ranked):
            response["nextToken"] = _make_token(offset + size, fingerprint)
        return _Reply(200, json.dumps(response).encode(), (("Content-Type", "application/json"),))

    def _check_kb_id(self, kb_path: str) -> str:
        arn = _KB_ARN.fullmatch(kb_path)
        kb_id = arn["id"] if arn else kb_path
        if not _KB_ID.fullmatch(kb_id):
            raise ServiceError(
                "ValidationException",
                f"1 validation error detected: Value '{kb_path}' at 'knowledgeBaseId' failed to "
                "satisfy constraint: Member must satisfy regular expression pattern: "
                "[0-9a-zA-Z]{10}",
            )
        if kb_id != self.knowledge_base_id:
            raise ServiceError(
                "ResourceNotFoundException", f"Knowledge base with id {kb_id} does not exist"
            )
        return kb_id

    def _rank(self, kb_id: str, text: str, expression: Any) -> list[dict[str, Any]]:
        terms = set(_WORD.findall(text.casefold()))
        scored: list[tuple[float, int, dict[str, Any]]] = []
        for index, doc in enumerate(self.documents):
            metadata = self._metadata(doc)
            if expression is not None and not evaluate_filter(expression, metadata):
                continue
            words = set(_WORD.findall(doc.text.casefold()))
            shared = len(terms & words)
            if not shared:
                continue
            score = shared / math.sqrt(len(terms) * len(words))
            result: dict[str, Any] = {"content": {"text": doc.text, "type": "TEXT"}, "score": score}
            if doc.location is not None:
                result["location"] = dict(doc.location)
            if metadata:
                result["metadata"] = metadata
            scored.append((score, index, result))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [result for _, _, result in scored]

    def _metadata(self, doc: BedrockDocument) -> dict[str, Any]:
        metadata = dict(doc.metadata)
        if doc.chunk_id is not None:
            metadata[CHUNK_ID_KEY] = doc.chunk_id
        location = doc.location or {}
        if location.get("type") == "S3":
            uri = (location.get("s3Location") or {}).get("uri")
            if uri:
                metadata[SOURCE_URI_KEY] = uri
        metadata[DATA_SOURCE_KEY] = self.data_source_id
        return metadata


# -- request checks ------------------------------------------------------------------------


# -- pagination tokens ----------------------------------------------------------------------


# -- SigV4 ------------------------------------------------------------------------------------
