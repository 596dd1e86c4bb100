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
are deleted; ``prune`` deletes stored documents this run did not produce.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kairox.context.tokens import DEFAULT_ENCODING
from kairox.embedding import load_model, model_loaded, release_model
from kairox.errors import KairoxError
from kairox.retrieval import Document, IngestableSource
from kairox.run_stats import PATH_WHYS, TALLY, ChangeCounts
from kairox.workspace.convert.base import Converted
from kairox.workspace.convert.converters import Converters
from kairox.workspace.convert.sections import chunk_converted
from kairox.workspace.convert.text import plain
from kairox.workspace.files import (
    DEFAULT_MAX_BYTES,
    NOT_REGULAR,
    Skipped,
    iter_workspace_files,
)

BATCH_SIZE = 500
#: How deeply a record's metadata may nest (deeper is refused, not a RecursionError).
MAX_METADATA_DEPTH = 32


class IngestError(KairoxError, ValueError):
    """An input cannot be ingested; the message names the file (and line) and the fix."""


@dataclass
class IngestStats(ChangeCounts):
    """What one ingest run did."""

    unchanged: int = 0
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


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON; write null or a string instead")


def _check_value(value: Any, where: str, name: str, depth: int = 0) -> None:
    """Refuse what cannot be stored faithfully: lone surrogates, deep nesting, non-finite
    numbers (the recursion is bounded by :data:`MAX_METADATA_DEPTH`)."""
    if depth > MAX_METADATA_DEPTH:
        raise IngestError(
            f"{where}: {name!r} nests deeper than {MAX_METADATA_DEPTH} levels; flatten it"
        )
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            code = ord(value[exc.start])
            raise IngestError(
                f"{where}: {name!r} holds a lone surrogate (\\u{code:04x}) at character "
                f"{exc.start}, which is not text; fix the escape in the file"
            ) from None
    elif isinstance(value, float) and not math.isfinite(value):
        raise IngestError(f"{where}: {name!r} holds {value}, which JSON cannot hold")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_value(key, where, name, depth + 1)
            _check_value(item, where, name, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_value(item, where, name, depth + 1)


def _text_field(record: dict[str, Any], key: str, where: str, *, required: bool) -> str | None:
    value = record.get(key)
    if value is None and not required:
        return None
    if key == "id" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        wanted = "a string or a whole number" if key == "id" else "a string"
        got = "null" if value is None else type(value).__name__
        raise IngestError(f"{where}: {key!r} must be {wanted}, got {got}")
    return value


@dataclass(frozen=True)
class _Input:
    """One document read, with its structure and whether it is to be chunked."""

    document: Document
    converted: Converted | None = None
    chunk: bool = True


def _record(line: bytes, where: str) -> _Input | None:
    try:
        decoded = line.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise IngestError(
            f"{where}: not valid UTF-8 (byte 0x{line[exc.start]:02x} at column {exc.start + 1}); "
            "save the file as UTF-8"
        ) from None
    if not decoded.strip():
        return None
    try:
        record = json.loads(decoded, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise IngestError(f"{where}: not valid JSON ({exc.msg})") from exc
    except ValueError as exc:  # NaN / Infinity, from _no_constant
        raise IngestError(f"{where}: {exc}") from None
    except RecursionError:
        raise IngestError(
            f"{where}: nested too deeply to read (at most {MAX_METADATA_DEPTH} levels)"
        ) from None
    if not isinstance(record, dict):
        raise IngestError(f"{where}: expected a JSON object, got {type(record).__name__}")
    missing = [key for key in ("id", "text") if key not in record]
    if missing:
        raise IngestError(
            f"{where}: missing {', '.join(missing)}; every record needs 'id' and 'text'"
        )
    metadata = record.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise IngestError(f"{where}: 'metadata' must be an object")
    fields = {
        key: _text_field(record, key, where, required=key in ("id", "text"))
        for key in ("id", "text", "title", "uri")
    }
    for key, value in (*fields.items(), ("metadata", metadata)):
        _check_value(value, where, key)
    chunk = record.get("chunk", True)
    if not isinstance(chunk, bool):
        raise IngestError(f"{where}: 'chunk' must be true or false, got {type(chunk).__name__}")
    document = Document(
        id=fields["id"] or "",
        text=fields["text"] or "",
        title=fields["title"] or "",
        uri=fields["uri"],
        metadata=metadata,
    )
    return _Input(document, chunk=chunk)


def _open_regular(path: Path) -> int:
    """A descriptor of ``path`` if it is a regular file; never blocks on a FIFO."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise IngestError(f"{path}: {NOT_REGULAR}; give a file, a folder or a .jsonl file")
    return fd


def read_jsonl(path: Path) -> Iterator[Document]:
    """The records of a JSONL file; a bad line raises :class:`IngestError` naming it."""
    for item in _read_records(path):
        yield item.document


def _read_records(path: Path) -> Iterator[_Input]:
    try:
        fd = _open_regular(path)
    except OSError as exc:
        raise IngestError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    with open(fd, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            item = _record(line, f"{path}:{number}")
            if item is not None:
                yield item


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


def _collect(
    paths: Sequence[Path],
    root: Path,
    stats: IngestStats,
    max_bytes: int,
    converters: Converters | None,
) -> Iterator[_Input]:
    converters = converters if converters is not None else Converters.builtin()
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
            files = [f.path for f in walked]
        else:
            files = [given]
        for path in files:
            if path.suffix == ".jsonl":
                yield from _read_records(path)
                continue
            converted = converters.read(path, max_bytes=max_bytes)
            if isinstance(converted, Skipped):
                stats.skip(str(path), converted.reason, converted.detail)
                continue
            doc_id = _document_id(path, root)
            document = Document(
                id=doc_id,
                text=converted.text,
                title=converted.title or path.name,
                uri=str(path.resolve()),
                metadata={"path": doc_id, "ext": path.suffix},
            )
            yield _Input(document, converted)


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
    stage: Callable[[str], None] | None = None,
) -> IngestStats:
    """Write the documents of ``paths`` into ``target``; only changed chunks are written.

    Everything is read, validated and chunked before the first write, so a malformed
    input changes nothing. ``chunk=False`` stores every document whole (for data that is
    already passage-sized, such as a BEIR corpus); a JSONL record's own ``"chunk":
    false`` does the same for that record. ``planned(n)`` is called once with the number
    of chunks to write, ``progress(n)`` with the number of chunks written, and
    ``stage(what)`` with a step before the first write (loading the target's model), then
    with ``""``. Files over ``max_bytes`` are skipped and counted, as by ``kairox index``;
    counts are of documents, ``chunks_written`` of what was written.
    """
    stats = IngestStats()
    # As a workspace index run does: a model this run loads is released before the
    # target's end-of-run work (sqlite-fts packs its vectors), a warm one stays.
    embedder = getattr(target, "embedder", None)
    release_after = embedder is not None and not model_loaded(embedder)
    inputs: dict[str, _Input] = {}
    for item in _collect(paths, root, stats, max_bytes, converters):
        inputs[item.document.id] = item  # a later copy of an id wins, as it would on disk
    pieces = {
        doc_id: (
            chunk_document(
                item.document,
                item.converted,
                chunk_tokens=chunk_tokens,
                chunk_overlap=chunk_overlap,
                encoding=encoding,
            )
            if chunk and item.chunk
            else [item.document]
        )
        for doc_id, item in inputs.items()
    }
    produced = {piece.id for parts in pieces.values() for piece in parts}
    stored = target.fingerprints()
    owned: dict[str, set[str]] = {}
    for stored_id in stored:
        owner = stored_id if stored_id in inputs else _owner(stored_id)
        owned.setdefault(owner, set()).add(stored_id)
    changed: list[Document] = []
    stale: list[str] = []
    for doc_id, parts in pieces.items():
        before = owned.get(doc_id, set())
        fresh = [p for p in parts if stored.get(p.id) != p.fingerprint]
        # A stored chunk this document no longer has, unless another input produced it.
        gone = sorted(before - produced)
        changed.extend(fresh)
        stale.extend(gone)
        if not fresh and not gone:
            stats.unchanged += 1
        elif before:
            stats.updated += 1
        else:
            stats.added += 1
    if planned is not None:
        planned(len(changed))
    if stage is not None:
        if embedder is not None and changed:
            load_model(embedder, stage)  # a step of its own, not a first batch that hangs
        stage("")
    for start in range(0, len(changed), BATCH_SIZE):
        part = changed[start : start + BATCH_SIZE]
        target.upsert(part)
        stats.chunks_written += len(part)
        if progress is not None:
            progress(len(part))
    if stale:
        target.delete(stale)
    gone: list[str] = []
    if prune:
        gone = sorted(set(stored) - produced - set(stale))
        if gone:
            target.delete(gone)
        stats.deleted = len({_owner(g) for g in gone} - set(inputs))
    if release_after:
        release_model(embedder)
    finish = getattr(target, "finish", None)
    if callable(finish) and (changed or stale or gone):
        finish()  # the target's end-of-run work (sqlite-fts packs its vectors)
    return stats
