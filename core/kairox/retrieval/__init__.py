"""Retrieval: the data model, fusion, and the composite retriever."""

from kairox.retrieval.composite import CompositeWorkspaceRetriever, QueryEmbeddingError
from kairox.retrieval.documents import (
    Document,
    IngestableSource,
    QueryError,
    VectorRecord,
    VectorSyncTarget,
)
from kairox.retrieval.fusion import FUSION_METHODS, fuse, text_fingerprint
from kairox.retrieval.model import (
    FAN_OUT,
    FusedHit,
    Hit,
    Provenance,
    Query,
    RetrievalResult,
    ScoreKind,
    Source,
    SourceReport,
    SourceStatus,
    WorkspaceRetriever,
)

__all__ = [
    "FAN_OUT",
    "FUSION_METHODS",
    "CompositeWorkspaceRetriever",
    "Document",
    "FusedHit",
    "Hit",
    "IngestableSource",
    "Provenance",
    "Query",
    "QueryEmbeddingError",
    "QueryError",
    "RetrievalResult",
    "ScoreKind",
    "Source",
    "SourceReport",
    "SourceStatus",
    "VectorRecord",
    "VectorSyncTarget",
    "WorkspaceRetriever",
    "fuse",
    "text_fingerprint",
]
