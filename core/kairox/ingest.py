"""Filling a local knowledge base from files, folders and JSONL records, incrementally.

A text file becomes one document whose id is its path (relative to the workspace root
when it lies inside it, so ``docs/`` and ``./docs`` name the same documents). A
``.jsonl`` file holds one record per line: ``id`` and ``text`` required, ``title``,
``uri`` and ``metadata`` optional. Only documents whose fingerprint changed are
written; ``prune`` deletes stored documents this run did not produce.
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

from kairox.errors import KairoxError
from kairox.retrieval import Document, IngestableSource
from kairox.workspace.files import (
    DEFAULT_MAX_BYTES,
    NOT_REGULAR,
    Skipped,
    iter_workspace_files,
    read_file_text,
)

BATCH_SIZE = 500
#: How deeply a record's metadata may nest (deeper is refused, not a RecursionError).
MAX_METADATA_DEPTH = 32


class IngestError(KairoxError, ValueError):
    """An input cannot be ingested; the message names the file (and line) and the fix."""


@dataclass
class IngestStats:
    """What one ingest run did."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    skipped_files: list[str] = field(default_factory=list)
    #: ``(path, why)`` per skipped input, ``why`` starting with the reason (``binary``...).
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: How many inputs were skipped for each reason.
    skipped_reasons: dict[str, int] = field(default_factory=dict)

    def skip(self, path: str, reason: str, detail: str = "") -> None:
        """Count one skipped input under its reason."""
        self.skipped_files.append(path)
        self.skipped.append((path, f"{reason} ({detail})" if detail else reason))
        self.skipped_reasons[reason] = self.skipped_reasons.get(reason, 0) + 1

    def as_json(self) -> dict[str, Any]:
        return {
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "deleted": self.deleted,
            "skipped_files": self.skipped_files,
            "skipped": [{"path": path, "why": why} for path, why in self.skipped],
            "skipped_reasons": dict(sorted(self.skipped_reasons.items())),
        }


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


def _record(line: bytes, where: str) -> Document | None:
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
    return Document(
        id=fields["id"] or "",
        text=fields["text"] or "",
        title=fields["title"] or "",
        uri=fields["uri"],
        metadata=metadata,
    )


def _open_regular(path: Path) -> int:
    """A descriptor of ``path`` if it is a regular file; never blocks on a FIFO."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise IngestError(f"{path}: {NOT_REGULAR}; give a file, a folder or a .jsonl file")
    return fd


def read_jsonl(path: Path) -> Iterator[Document]:
    """The records of a JSONL file; a bad line raises :class:`IngestError` naming it."""
    try:
        fd = _open_regular(path)
    except OSError as exc:
        raise IngestError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    with open(fd, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            document = _record(line, f"{path}:{number}")
            if document is not None:
                yield document


def collect_documents(
    paths: Sequence[Path],
    *,
    root: Path,
    stats: IngestStats | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Iterator[Document]:
    """Documents from files, folders (walked like a workspace) and ``.jsonl`` files.

    Only regular files are read, text files up to ``max_bytes`` (the workspace walk's
    cap); each other input is counted in ``stats`` with its reason. A given path that is
    missing, or a JSONL file that is not a regular file, is an :class:`IngestError`.
    """
    stats = stats if stats is not None else IngestStats()
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
                yield from read_jsonl(path)
                continue
            text = read_file_text(path, max_bytes=max_bytes)
            if isinstance(text, Skipped):
                stats.skip(str(path), text.reason, text.detail)
                continue
            doc_id = _document_id(path, root)
            yield Document(
                id=doc_id,
                text=text,
                title=path.name,
                uri=str(path.resolve()),
                metadata={"path": doc_id, "ext": path.suffix},
            )


def ingest(
    target: IngestableSource,
    paths: Sequence[Path],
    *,
    root: Path,
    prune: bool = False,
    progress: Callable[[int], None] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> IngestStats:
    """Write the documents of ``paths`` into ``target``; only changed ones are written.

    Everything is read and validated before the first write, so a malformed input
    changes nothing. ``progress(n)`` is called with the number of documents written.
    Text files over ``max_bytes`` are skipped and counted, as by ``kairox index``.
    """
    stats = IngestStats()
    documents: dict[str, Document] = {}
    for doc in collect_documents(paths, root=root, stats=stats, max_bytes=max_bytes):
        documents[doc.id] = doc  # a later copy of an id wins, as it would on disk
    stored = target.fingerprints()
    changed = [d for d in documents.values() if stored.get(d.id) != d.fingerprint]
    stats.unchanged = len(documents) - len(changed)
    stats.added = sum(1 for d in changed if d.id not in stored)
    stats.updated = len(changed) - stats.added
    for start in range(0, len(changed), BATCH_SIZE):
        part = changed[start : start + BATCH_SIZE]
        target.upsert(part)
        if progress is not None:
            progress(len(part))
    if prune:
        gone = sorted(set(stored) - set(documents))
        if gone:
            target.delete(gone)
        stats.deleted = len(gone)
    return stats
