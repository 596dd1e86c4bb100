"""Filling a local knowledge base from files, folders and JSONL records, incrementally.

A file becomes one document whose id is its path (relative to the workspace root when
it lies inside it, so ``docs/`` and ``./docs`` name the same documents); documents
(PDF, HTML, Office, notebooks) are read through the registered converters
(:mod:`kairox.workspace.convert`). A ``.jsonl`` file holds one record per line: ``id``
and ``text`` required, ``title``, ``uri``, ``metadata`` and ``chunk`` optional.

Each document is chunked along its structure (:mod:`kairox.workspace.convert.sections`)
unless the ingest or its record says ``chunk`` false. A document that fits in one chunk
is stored as it is; a longer one as chunks ``<id>#0``, ``<id>#1``..., each naming its
document (``document_id``, its title and uri) and its span (``start``/``end``, the
heading path, the page, ``line_start``/``line_end`` where the lines are the file's).
Only chunks whose fingerprint changed are written, and chunks a document no longer has
are deleted; ``prune`` deletes stored documents this run did not produce. The inputs are
streamed (checked in a first pass, written in batches in a second), so memory does not
grow with the corpus; JSONL records are read by :mod:`kairox.runtime.ingest_records`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kairox.context.tokens import DEFAULT_ENCODING
from kairox.retrieval import Document, IngestableSource
from kairox.retrieval.embedding import load_model, model_loaded, release_model
from kairox.runtime.ingest_ledger import IngestLedger
from kairox.runtime.ingest_records import (
    MAX_METADATA_DEPTH,
    IngestError,
    IngestInput,
    read_jsonl,
    read_records,
)
from kairox.support.run_stats import PATH_WHYS, TALLY, ChangeCounts
from kairox.workspace.convert.base import Converted
from kairox.workspace.convert.converters import Converters
from kairox.workspace.convert.sections import chunk_converted
from kairox.workspace.convert.text import plain
from kairox.workspace.files import (
    DEFAULT_MAX_BYTES,
    Skipped,
    iter_workspace_files,
)

__all__ = [
    "BATCH_SIZE",
    "MAX_METADATA_DEPTH",
    "IngestError",
    "IngestStats",
    "chunk_document",
    "collect_documents",
    "ingest",
    "read_jsonl",
]

BATCH_SIZE = 500
# Ids counted into the ledger at a time in the checking pass.
_CHECK_BATCH = 5_000


@dataclass
class IngestStats(ChangeCounts):
    """What one ingest run did."""

    unchanged: int = 0
    #: Documents stored unchanged whose vectors were embedded again (lost, or never made).
    reembedded: int = 0
    deleted: int = 0
    #: Chunks (or whole documents) written this run.
    chunks_written: int = 0
    skipped_files: list[str] = field(default_factory=list)
    #: ``(path, why)`` per skipped input, ``why`` starting with the reason (``binary``...).
    skipped: list[tuple[str, str]] = field(default_factory=list, metadata=PATH_WHYS)
    #: How many inputs were skipped for each reason.
    skipped_reasons: dict[str, int] = field(default_factory=dict, metadata=TALLY)

    def skip(self, path: str, reason: str, detail: str = "") -> None:
        """Count one skipped input under its reason."""
        self.skipped_files.append(path)
        self.skipped.append((path, f"{reason} ({detail})" if detail else reason))
        self.skipped_reasons[reason] = self.skipped_reasons.get(reason, 0) + 1


def _document_id(path: Path, root: Path) -> str:
    resolved = path.resolve()
    try:
        return resolved.relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(resolved)


def collect_documents(
    paths: Sequence[Path],
    *,
    root: Path,
    stats: IngestStats | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    converters: Converters | None = None,
) -> Iterator[Document]:
    """Documents from files, folders (walked like a workspace) and ``.jsonl`` files,
    whole (before chunking).

    Only regular files are read, up to ``max_bytes`` (the workspace walk's cap); files
    a converter claims are converted, others read as UTF-8 text. Each other input
    (binary, too large, a document its converter cannot read) is counted in ``stats``
    with its reason. A given path that is missing, or a JSONL file that is not a
    regular file, is an :class:`IngestError`.
    """
    for item in _collect(paths, root, stats or IngestStats(), max_bytes, converters):
        yield item.document


def _files(paths: Sequence[Path], stats: IngestStats, max_bytes: int) -> Iterator[Path]:
    """The files of ``paths`` in order, folders walked like a workspace (each file the
    walk skips counted in ``stats``); a missing path is an :class:`IngestError`."""
    for given in paths:
        try:
            is_dir = stat.S_ISDIR(os.stat(given).st_mode)
        except FileNotFoundError:
            raise IngestError(f"{given}: no such file or folder") from None
        except OSError as exc:
            raise IngestError(f"{given}: cannot be read ({exc.strerror or exc})") from None
        if is_dir:

            def skipped(relpath: str, reason: str, folder: Path = given) -> None:
                stats.skip(str(folder / relpath), reason)

            walked = iter_workspace_files(given, max_bytes=max_bytes, on_skip=skipped)
            yield from (f.path for f in walked)
        else:
            yield given


def _read_file(
    path: Path, root: Path, stats: IngestStats, max_bytes: int, converters: Converters
) -> IngestInput | None:
    """A (non-JSONL) file as one document, or ``None`` when it is skipped (counted)."""
    converted = converters.read(path, max_bytes=max_bytes)
    if isinstance(converted, Skipped):
        stats.skip(str(path), converted.reason, converted.detail)
        return None
    doc_id = _document_id(path, root)
    document = Document(
        id=doc_id,
        text=converted.text,
        title=converted.title or path.name,
        uri=str(path.resolve()),
        metadata={"path": doc_id, "ext": path.suffix},
    )
    return IngestInput(document, converted)


def _inputs(
    paths: Sequence[Path],
    root: Path,
    stats: IngestStats,
    max_bytes: int,
    converters: Converters | None,
) -> Iterator[tuple[str, IngestInput | None]]:
    """``(document id, input)`` per document of ``paths`` in order; the input is ``None``
    for a file that was skipped when read."""
    converters = converters if converters is not None else Converters.builtin()
    for path in _files(paths, stats, max_bytes):
        if path.suffix == ".jsonl":
            yield from ((item.document.id, item) for item in read_records(path))
        else:
            yield _document_id(path, root), _read_file(path, root, stats, max_bytes, converters)


def _collect(
    paths: Sequence[Path],
    root: Path,
    stats: IngestStats,
    max_bytes: int,
    converters: Converters | None,
) -> Iterator[IngestInput]:
    for _, item in _inputs(paths, root, stats, max_bytes, converters):
        if item is not None:
            yield item


def _check_inputs(
    paths: Sequence[Path],
    root: Path,
    max_bytes: int,
    ledger: IngestLedger,
    checked: Callable[[int], None] | None,
) -> int:
    """The first pass: every JSONL record parsed and validated (an :class:`IngestError`
    names the first bad one), every document id counted in ``ledger``; other files are
    not read yet (reading them cannot fail, only skip). Returns the documents found."""

    def ids() -> Iterator[str]:
        for path in _files(paths, IngestStats(), max_bytes):
            if path.suffix == ".jsonl":
                yield from (item.document.id for item in read_records(path))
            else:
                yield _document_id(path, root)

    count = 0
    batch: list[str] = []
    for doc_id in ids():
        batch.append(doc_id)
        if len(batch) >= _CHECK_BATCH:
            ledger.add_inputs(batch)
            count += len(batch)
            batch.clear()
            if checked is not None:
                checked(count)
    ledger.add_inputs(batch)
    count += len(batch)
    if checked is not None:
        checked(count)
    return count


def chunk_document(
    document: Document,
    converted: Converted | None = None,
    *,
    chunk_tokens: int = 256,
    chunk_overlap: int = 32,
    encoding: str = DEFAULT_ENCODING,
) -> list[Document]:
    """``document`` as stored: itself when it fits in one chunk, else its chunks
    ``<id>#<n>`` along the structure of ``converted`` (plain text when ``None``)."""
    chunks = chunk_converted(
        converted if converted is not None else plain(document.text),
        max_tokens=chunk_tokens,
        overlap_tokens=chunk_overlap,
        encoding=encoding,
    )
    if len(chunks) <= 1:
        return [document]
    owner = {"document_id": document.id, "document_title": document.title}
    if document.uri is not None:
        owner["document_uri"] = document.uri
    return [
        Document(
            id=f"{document.id}#{chunk.index}",
            text=chunk.text,
            title=document.title,
            uri=document.uri,
            metadata={
                **document.metadata,
                **owner,
                "chunk": chunk.index,
                "chunks": len(chunks),
                "start": chunk.start,
                "end": chunk.end,
                **chunk.metadata,
            },
        )
        for chunk in chunks
    ]


def _owner(stored_id: str) -> str:
    """The document a stored id belongs to: ``a#3`` to ``a``, anything else to itself."""
    base, sep, number = stored_id.rpartition("#")
    return base if sep and number.isdigit() else stored_id


class _Batches:
    """Changed chunks written ``BATCH_SIZE`` at a time, documents counted as they pass."""

    def __init__(
        self,
        target: IngestableSource,
        stats: IngestStats,
        progress: Callable[[int], None] | None,
        ledger: IngestLedger | None,
        embedder: object = None,
        stage: Callable[[str], None] | None = None,
    ) -> None:
        self.target, self.stats, self.progress, self.ledger = target, stats, progress, ledger
        # Before the first write, the target's model is loaded as a step of its own (a
        # one-time export can take a minute), not inside a first batch that seems to hang.
        self.embedder, self.stage = embedder, stage
        self.changed: list[Document] = []
        self.produced: list[str] = []
        self.documents = 0

    def add(self, parts: Sequence[Document], fresh: Sequence[Document]) -> None:
        self.changed.extend(fresh)
        if self.ledger is not None:
            self.produced.extend(p.id for p in parts)
        self.documents += 1
        if len(self.changed) >= BATCH_SIZE or self.documents >= BATCH_SIZE:
            self.flush()

    def skip(self) -> None:
        self.documents += 1

    def flush(self) -> None:
        if self.changed:
            if self.stage is not None:
                if self.embedder is not None:
                    load_model(self.embedder, self.stage)
                self.stage("")
                self.stage = None
            self.target.upsert(self.changed)
            self.stats.chunks_written += len(self.changed)
            self.changed = []
        if self.ledger is not None and self.produced:
            self.ledger.add_produced(self.produced)
            self.produced = []
        if self.progress is not None and self.documents:
            self.progress(self.documents)
        self.documents = 0


def _owned_chunks(stored: Mapping[str, str], ledger: IngestLedger) -> dict[str, set[str]]:
    """``document id -> its stored chunk ids``, for the stored ids that are chunks (an id
    an input holds as a document id is its own owner, whatever its shape)."""
    chunks = [i for i in stored if _owner(i) != i]
    documents = ledger.inputs_among(chunks)
    owned: dict[str, set[str]] = {}
    for stored_id in chunks:
        if stored_id not in documents:
            owned.setdefault(_owner(stored_id), set()).add(stored_id)
    return owned


def ingest(
    target: IngestableSource,
    paths: Sequence[Path],
    *,
    root: Path,
    prune: bool = False,
    progress: Callable[[int], None] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    chunk: bool = True,
    chunk_tokens: int = 256,
    chunk_overlap: int = 32,
    encoding: str = DEFAULT_ENCODING,
    converters: Converters | None = None,
    planned: Callable[[int], None] | None = None,
    checked: Callable[[int], None] | None = None,
    stage: Callable[[str], None] | None = None,
) -> IngestStats:
    """Write the documents of ``paths`` into ``target``; only changed chunks are written.

    The inputs are streamed twice, so memory does not grow with them: a first pass
    parses and validates every JSONL record and counts the document ids (on disk, in an
    :class:`~kairox.runtime.ingest_ledger.IngestLedger`), so a malformed input changes nothing;
    the second reads, chunks and writes ``BATCH_SIZE`` chunks at a time. ``chunk=False``
    stores every document whole (for data that is already passage-sized, such as a BEIR
    corpus); a JSONL record's own ``"chunk": false`` does the same for that record. When
    an id comes more than once, its last copy is the one stored. ``checked(n)`` is called
    during the first pass with the documents checked so far, ``planned(n)`` once with the
    documents to go through, ``progress(n)`` with the documents gone through since its
    last call; ``stage(what)`` with a step before the first write (loading the target's
    model), then with ``""``. Files over ``max_bytes`` are skipped and counted, as by
    ``kairox index``;
    counts are of documents, ``chunks_written`` of what was written.
    """
    stats = IngestStats()

    def pieces(item: IngestInput) -> list[Document]:
        if not (chunk and item.chunk):
            return [item.document]
        return chunk_document(
            item.document,
            item.converted,
            chunk_tokens=chunk_tokens,
            chunk_overlap=chunk_overlap,
            encoding=encoding,
        )

    with IngestLedger() as ledger:
        found = _check_inputs(paths, root, max_bytes, ledger, checked)
        if planned is not None:
            planned(found)
        if stage is not None:
            stage("")  # the check is over (a caller may show it as a stage)
        inputs = _inputs(paths, root, stats, max_bytes, converters)
        return _write(
            target,
            inputs,
            stats,
            ledger,
            prune=prune,
            progress=progress,
            pieces=pieces,
            stage=stage,
        )


def _write(
    target: IngestableSource,
    inputs: Iterator[tuple[str, IngestInput | None]],
    stats: IngestStats,
    ledger: IngestLedger,
    *,
    prune: bool,
    progress: Callable[[int], None] | None,
    pieces: Callable[[IngestInput], list[Document]],
    stage: Callable[[str], None] | None = None,
) -> IngestStats:
    """The second pass of :func:`ingest`: what changed written, what went deleted."""
    # As a workspace index run does: a model this run loads is released before the
    # target's end-of-run work (sqlite-fts packs its vectors), a warm one stays.
    embedder = getattr(target, "embedder", None)
    release_after = embedder is not None and not model_loaded(embedder)
    # Stored documents without the target's vectors (an optional hook): written again,
    # counted apart.
    split = getattr(target, "fingerprints_by_vectors", None)
    stored, again = split() if callable(split) else (target.fingerprints(), {})
    stored = {**stored, **again}
    owned = _owned_chunks(stored, ledger) if stored else {}
    # Produced ids matter only against what is stored (a first ingest has nothing stale).
    batches = _Batches(target, stats, progress, ledger if stored else None, embedder, stage)
    repeated = ledger.repeated()
    stale: list[str] = []
    begin = getattr(target, "begin_run", None)
    if callable(begin):
        begin()  # the run ends in finish(): sqlite-fts leaves FTS5's merging until then
    for doc_id, item in inputs:
        if doc_id in repeated:
            repeated[doc_id] -= 1
            if repeated[doc_id]:  # a later copy of this id wins, as it would on disk
                batches.skip()
                continue
        if item is None:
            ledger.forget_input(doc_id)
            batches.skip()
            continue
        parts = pieces(item)
        before = owned.pop(doc_id, set())
        if doc_id in stored:
            before.add(doc_id)
        # A fingerprint is a hash of everything stored: made only to compare (the store
        # makes it again when writing).
        fresh = [
            p for p in parts if p.id not in stored or stored[p.id] != p.fingerprint or p.id in again
        ]
        # A stored chunk this document no longer has (unless another input produced
        # it: checked once every input has been through).
        lost = before.difference(p.id for p in parts)
        stale.extend(lost)
        if not fresh and not lost:
            stats.unchanged += 1
        elif not lost and all(again.get(p.id) == p.fingerprint for p in fresh):
            stats.reembedded += 1
        elif before:
            stats.updated += 1
        else:
            stats.added += 1
        batches.add(parts, fresh)
    batches.flush()
    if stale:
        stale = sorted(set(stale) - ledger.produced_among(stale))
    if stale:
        target.delete(stale)
    gone: list[str] = []
    if prune and stored:
        left = sorted(set(stored) - set(stale))
        gone = sorted(set(left) - ledger.produced_among(left))
        if gone:
            target.delete(gone)
        owners = sorted({_owner(g) for g in gone})
        stats.deleted = len(set(owners) - ledger.inputs_among(owners))
    if release_after:
        release_model(embedder)
    finish = getattr(target, "finish", None)
    # A target may also have work left from an earlier run (sqlite-fts: vectors of a run
    # cut short, or of a knowledge base written before its pack was the store).
    unfinished = getattr(target, "unfinished", None)
    if callable(finish) and (
        stats.chunks_written or stale or gone or (callable(unfinished) and unfinished())
    ):
        finish()  # the target's end-of-run work (sqlite-fts packs its vectors)
    return stats
