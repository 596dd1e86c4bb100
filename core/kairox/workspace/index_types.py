"""The workspace index's errors, run statistics and the records its parts pass around."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from kairox.support.errors import KairoxError
from kairox.support.run_stats import HIDDEN, PATH_WHYS, TALLY, ChangeCounts

NOT_INDEXED = "this workspace is not indexed yet: run `kairox index`"


class WorkspaceIndexError(KairoxError, RuntimeError):
    """The workspace index cannot be used as asked."""


class IndexBusyError(WorkspaceIndexError):
    """Another process is indexing this workspace right now."""


@dataclass
class IndexStats(ChangeCounts):
    """What one ``index()`` run did (``as_json``: every field but ``skipped_files``)."""

    removed: int = 0
    unchanged: int = 0
    skipped: int = 0
    #: How many files were skipped for each reason (``binary``, ``too large``, ...).
    skipped_reasons: dict[str, int] = field(default_factory=dict, metadata=TALLY)
    #: ``(relpath, why)`` of the skipped files whose reason has a detail (a document
    #: its converter could not read says which converter and why).
    skipped_details: list[tuple[str, str]] = field(default_factory=list, metadata=PATH_WHYS)
    chunks_embedded: int = 0
    chunks_total: int = 0
    sentences_embedded: int = 0
    #: size of the vector pack this run wrote (None: the one there was still fits, or
    #: packs are off or could not be written).
    pack_bytes: int | None = None
    skipped_files: list[str] = field(default_factory=list, metadata=HIDDEN)

    def skip(self, relpath: str, reason: str, detail: str = "") -> None:
        """Count one skipped file under its reason."""
        self.skipped += 1
        self.skipped_files.append(relpath)
        self.skipped_reasons[reason] = self.skipped_reasons.get(reason, 0) + 1
        if detail:
            self.skipped_details.append((relpath, f"{reason} ({detail})"))


@dataclass(frozen=True)
class ChunkVector:
    """One stored chunk and its vector (see :meth:`WorkspaceRagIndex.iter_chunk_vectors`)."""

    relpath: str
    chunk_index: int
    start: int
    end: int
    text: str
    text_hash: str
    vector: np.ndarray


@dataclass
class _Embedded:
    chunks: int = 0
    sentences: int = 0


@dataclass(frozen=True)
class _Sentence:
    index: int
    start: int  # character offsets into the chunk's text
    end: int
    text_hash: str
    text: str


@dataclass(frozen=True)
class _Chunk:
    index: int
    start: int
    end: int
    token_count: int
    text_hash: str
    text: str
    sentences: tuple[_Sentence, ...] = ()
    line_start: int = 0
    line_end: int = 0
    symbol: str | None = None
    language: str | None = None
    context: str = ""
    labels: str = ""  # JSON: a converted document's page, heading...


@dataclass(frozen=True)
class _PendingFile:
    relpath: str
    content_hash: str
    size: int
    mtime_ns: int
    chunks: list[_Chunk]
    chunker: str = "lines"


#: What the embedder sees of a ``rag_chunks c`` row: its context (when it has one) and text.
EMBED_TEXT_SQL = "CASE WHEN c.context = '' THEN c.text ELSE c.context || char(10) || c.text END"


def embed_text(context: str, text: str) -> str:
    """What the embedder sees of a chunk (as :data:`EMBED_TEXT_SQL` in SQL)."""
    return f"{context}\n{text}" if context else text


def _text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
