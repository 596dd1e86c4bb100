"""Retrieval: the data model, fusion, and the composite retriever."""

from kairox.retrieval.model import (
    Hit,
    Query,
    RetrievalResult,
    ScoreKind,
    SourceReport,
    SourceStatus,
    WorkspaceRetriever,
)

__all__ = [
    "Hit",
    "Query",
    "RetrievalResult",
    "ScoreKind",
    "SourceReport",
    "SourceStatus",
    "WorkspaceRetriever",
]
