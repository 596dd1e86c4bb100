"""``BedrockSource``: a Bedrock knowledge base as a Kairox retriever (``Retrieve`` API).

boto3 is imported on first use (:func:`load_boto3`), never when this module is imported.
Calls run in a worker thread; throttling, 5xx and dropped connections are retried with
:func:`kairox.support.retry.call_with_retries` inside the knowledge base's ``timeout_ms``;
botocore's own retries are switched off so the budget is Kairox's alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import threading
import time
from collections.abc import Mapping
from typing import Any

from kairox import Hit, LazyImport, Query, ScoreKind
from kairox.retrieval.filters import all_of, parse_filter
from kairox.support.retry import RetryPolicy, call_with_retries
from kairox_bedrock.config import BedrockConfig
from kairox_bedrock.errors import BedrockAuthError, BedrockError, BedrockResponseError
from kairox_bedrock.explain import explain, is_botocore_error, is_retryable, retry_after
from kairox_bedrock.filters import SUPPORT, compile_filter

__all__ = [
    "CHUNK_ID_KEY",
    "INSTALL_HINT",
    "LOCATION_FIELDS",
    "MAX_QUERY_CHARS",
    "SOURCE_URI_KEY",
    "BedrockSource",
    "load_boto3",
    "location_uri",
    "result_to_hit",
]

INSTALL_HINT = "pip install kairox-bedrock (or pip install 'boto3>=1.34')"

#: Location ``type`` -> (member of ``RetrievalResultLocation``, field holding the uri).
LOCATION_FIELDS: dict[str, tuple[str, str]] = {
    "S3": ("s3Location", "uri"),
    "WEB": ("webLocation", "url"),
    "CONFLUENCE": ("confluenceLocation", "url"),
    "SALESFORCE": ("salesforceLocation", "url"),
    "SHAREPOINT": ("sharePointLocation", "url"),
    "CUSTOM": ("customDocumentLocation", "id"),
    "KENDRA": ("kendraDocumentLocation", "uri"),
    "SQL": ("sqlLocation", "query"),
    "ONEDRIVE": ("oneDriveLocation", "url"),
    "GOOGLEDRIVE": ("googleDriveLocation", "url"),
}

#: Metadata keys Bedrock adds to every chunk.
CHUNK_ID_KEY = "x-amz-bedrock-kb-chunk-id"
SOURCE_URI_KEY = "x-amz-bedrock-kb-source-uri"

#: ``retrievalQuery.text`` is at most 20,000 characters; longer text is cut there.
MAX_QUERY_CHARS = 20_000

# The most pages one query follows, whatever nextToken says (a loop guard).
_MAX_PAGES = 100

BOTO3 = LazyImport("boto3", needed_by="the bedrock knowledge-base kind", install=INSTALL_HINT)


def load_boto3() -> Any:
    """Import boto3, or raise an ``ImportError`` that says what to install."""
    return BOTO3.load()


def location_uri(location: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """``(uri, location type)`` of a result's ``location``, for every location type.

    S3 ``s3Location.uri``, WEB/CONFLUENCE/SALESFORCE/SHAREPOINT/ONEDRIVE/GOOGLEDRIVE
    ``...Location.url``, CUSTOM ``customDocumentLocation.id``, KENDRA
    ``kendraDocumentLocation.uri``, SQL ``sqlLocation.query``. An unknown type gives
    ``(None, type)``; no location gives ``(None, None)``.
    """
    if not isinstance(location, Mapping):
        return None, None
    kind = location.get("type")
    kind = kind if isinstance(kind, str) else None
    if kind in LOCATION_FIELDS:
        member, field = LOCATION_FIELDS[kind]
        detail = location.get(member)
        value = detail.get(field) if isinstance(detail, Mapping) else None
        return (value if isinstance(value, str) and value else None), kind
    return None, kind


def _content_text(content: Mapping[str, Any]) -> str:
    """The text of a result: ``text``, else a table row, an audio transcript or a video
    summary; ``""`` for content with no text (an image)."""
    text = content.get("text")
    if isinstance(text, str) and text.strip():
        return text
    row = content.get("row")
    if isinstance(row, list) and row:
        cells = [
            f"{cell.get('columnName', '')}: {cell.get('columnValue', '')}"
            for cell in row
            if isinstance(cell, Mapping)
        ]
        return "\n".join(cells)
    for member, field in (("audio", "transcription"), ("video", "summary")):
        detail = content.get(member)
        value = detail.get(field) if isinstance(detail, Mapping) else None
        if isinstance(value, str) and value.strip():
            return value
    return ""


def result_to_hit(result: Any, source: str) -> Hit | None:
    """One ``retrievalResults`` entry as a :class:`Hit`; ``None`` when it holds no text.

    ``id`` is the chunk id Bedrock puts in the metadata (``x-amz-bedrock-kb-chunk-id``)
    when there is one, else the uri (or location type) plus a hash of the text. ``uri``
    comes from the location (any type), else from ``x-amz-bedrock-kb-source-uri``.
    ``metadata`` is the result's metadata plus ``location_type``.

    :raises BedrockResponseError: the entry is not a result (no ``content``).
    """
    if not isinstance(result, Mapping) or not isinstance(result.get("content"), Mapping):
        raise BedrockResponseError(
            f"knowledge base {source!r}: Bedrock sent a result without `content`: {result!r:.200}"
        )
    text = _content_text(result["content"])
    if not text:
        return None
    raw_metadata = result.get("metadata")
    metadata: dict[str, Any] = dict(raw_metadata) if isinstance(raw_metadata, Mapping) else {}
    uri, kind = location_uri(result.get("location"))
    if uri is None and isinstance(metadata.get(SOURCE_URI_KEY), str):
        uri = metadata[SOURCE_URI_KEY]
    metadata["location_type"] = kind
    chunk_id = metadata.get(CHUNK_ID_KEY)
    if isinstance(chunk_id, str) and chunk_id:
        hit_id = chunk_id
    else:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        hit_id = f"{uri or kind or 'bedrock'}#{digest}"
    score = result.get("score")
    return Hit(
        id=hit_id,
        text=text,
        score=float(score) if isinstance(score, int | float) else 0.0,
        source=source,
        uri=uri,
        metadata=metadata,
    )


class BedrockSource:
    """A Bedrock knowledge base, searched with ``bedrock-agent-runtime`` ``Retrieve``.

    ``score_kind`` is ``COSINE``: Bedrock's scores are relevance in [0, 1] derived from
    vector similarity (blended with keyword relevance for ``HYBRID``), not calibrated
    probabilities, so fusion normalises them per query like other similarity scores.

    :param name: the knowledge base's Kairox id (the ``kb_id`` of its table).
    :param config: the validated table.
    :param retry_policy: overrides the default ``RetryPolicy.within(config.timeout_ms)``.
    """

    score_kind = ScoreKind.COSINE
    filter_support = SUPPORT

    def __init__(
        self, name: str, config: BedrockConfig, *, retry_policy: RetryPolicy | None = None
    ) -> None:
        self.name = name
        self.config = config
        self.retry_policy = retry_policy or RetryPolicy.within(config.timeout_ms)
        self._client: Any = None
        self._client_lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"BedrockSource({self.name!r}, knowledge_base_id={self.config.knowledge_base_id!r}, "
            f"region={self.config.region!r})"
        )

    # -- the public face ------------------------------------------------------------------

    async def retrieve(self, query: Query) -> list[Hit]:
        """At most ``query.k`` hits, best first; no call at all for an empty query."""
        if not query.text.strip():
            return []  # Bedrock rejects empty query text
        plan = compile_filter(self.name, all_of(parse_filter(self.config.filter), query.filter))
        if plan.matches_nothing:
            return []
        return await asyncio.to_thread(self._search, query, plan.expression)

    def request(
        self, text: str, count: int, expression: dict[str, Any] | None, token: str | None = None
    ) -> dict[str, Any]:
        """The keyword arguments of one ``client.retrieve`` call."""
        search: dict[str, Any] = {"numberOfResults": count}
        if self.config.search_type is not None:
            search["overrideSearchType"] = self.config.search_type
        if expression is not None:
            search["filter"] = expression
        request: dict[str, Any] = {
            "knowledgeBaseId": self.config.knowledge_base_id,
            "retrievalQuery": {"text": text[:MAX_QUERY_CHARS]},
            "retrievalConfiguration": {"vectorSearchConfiguration": search},
        }
        if token is not None:
            request["nextToken"] = token
        return request

    # -- the work, in a thread --------------------------------------------------------------

    def _search(self, query: Query, expression: dict[str, Any] | None) -> list[Hit]:
        client = self._get_client()
        deadline = time.monotonic() + self.retry_policy.budget
        hits: dict[str, Hit] = {}
        token: str | None = None
        for _ in range(_MAX_PAGES):
            remaining = deadline - time.monotonic()
            if hits and remaining <= 0:
                break  # keep what arrived in time rather than lose it all
            count = min(self.config.number_of_results, query.k - len(hits))
            policy = dataclasses.replace(self.retry_policy, budget=max(remaining, 0.0))
            request = self.request(query.text, count, expression, token)
            response = self._call(client, request, policy)
            results = response.get("retrievalResults")
            if not isinstance(results, list):
                raise BedrockResponseError(
                    f"knowledge base {self.name!r}: the response from "
                    f"{self._endpoint(client)} has no `retrievalResults` list; it is not a "
                    f"Bedrock Retrieve response{self._endpoint_hint()}"
                )
            for result in results:
                hit = result_to_hit(result, self.name)
                if hit is not None and hit.id not in hits:
                    hits[hit.id] = hit
            next_token = response.get("nextToken")
            if not results or not next_token or next_token == token or len(hits) >= query.k:
                break
            token = next_token
        ranked = sorted(hits.values(), key=lambda hit: -hit.score)  # stable: service order
        return ranked[: query.k]

    def _get_client(self) -> Any:
        with self._client_lock:
            if self._client is None:
                self._client = self._make_client()
            return self._client

    def _make_client(self) -> Any:
        boto3 = load_boto3()
        from botocore.config import Config
        from botocore.exceptions import BotoCoreError, ProfileNotFound

        seconds = self.config.timeout_ms / 1000
        try:
            session = boto3.Session(
                profile_name=self.config.aws_profile, region_name=self.config.region
            )
            return session.client(
                "bedrock-agent-runtime",
                region_name=self.config.region,
                endpoint_url=self.config.endpoint_url,
                config=Config(
                    connect_timeout=seconds,
                    read_timeout=seconds,
                    retries={"mode": "standard", "total_max_attempts": 1},
                    user_agent_extra="kairox-bedrock",
                ),
            )
        except ProfileNotFound as exc:
            raise BedrockAuthError(
                f"knowledge base {self.name!r}: AWS profile {self.config.aws_profile!r} "
                f"(aws_profile) is not defined ({exc}). Fix: add it to ~/.aws/config "
                "(e.g. `aws configure --profile NAME`, or `aws configure sso`), correct "
                "`aws_profile`, or remove it to use the default credential chain",
                code="ProfileNotFound",
            ) from exc
        except BotoCoreError as exc:
            raise BedrockError(
                f"knowledge base {self.name!r}: cannot set up the Bedrock client: {exc}"
            ) from exc

    def _call(self, client: Any, request: dict[str, Any], policy: RetryPolicy) -> dict[str, Any]:
        attempts = 0

        def once() -> dict[str, Any]:
            nonlocal attempts
            attempts += 1
            try:
                return client.retrieve(**request)
            except Exception as exc:
                if is_botocore_error(exc):
                    raise
                # botocore's parser choking on the body (a list that is a string, a score
                # that is not a number...): the endpoint did not speak Bedrock.
                raise BedrockResponseError(
                    f"knowledge base {self.name!r}: could not read the response from "
                    f"{self._endpoint(client)} ({type(exc).__name__}: {exc}); it is not a "
                    f"valid Bedrock Retrieve response{self._endpoint_hint()}"
                ) from exc

        try:
            return call_with_retries(
                once,
                retryable=is_retryable,
                policy=policy,
                retry_after=retry_after,
            )
        except BedrockError:
            raise
        except Exception as exc:
            raise self._explain(exc, client, attempts) from exc

    # -- errors ----------------------------------------------------------------------------

    def _endpoint_hint(self) -> str:
        return " (check endpoint_url)" if self.config.endpoint_url else ""

    def _endpoint(self, client: Any) -> str:
        return str(getattr(getattr(client, "meta", None), "endpoint_url", "the endpoint"))

    def _explain(self, exc: Exception, client: Any, attempts: int) -> Exception:
        """A :class:`BedrockError` (or ``QueryError``) saying what went wrong and the fix."""
        return explain(exc, self.name, self.config, self._endpoint(client), attempts)
