"""Retrieval: the data model, fusion, and the composite retriever."""

from typing import TYPE_CHECKING, Any

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
    deprecated_name,
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


if TYPE_CHECKING:
    from kairox.retrieval.model import WorkspaceRetriever


def __getattr__(name: str) -> Any:
    # WorkspaceRetriever, Source's old name: still answered, with a DeprecationWarning.
    return deprecated_name(__name__, name)
