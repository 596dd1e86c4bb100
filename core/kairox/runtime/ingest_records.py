"""Reading ``kairox kb ingest``'s JSONL records: one per line, each checked before use.

A record holds ``id`` and ``text`` (required), ``title``, ``uri``, ``metadata`` and
``chunk`` (optional). What cannot be stored faithfully (invalid UTF-8 or JSON, lone
surrogates, non-finite numbers, metadata nested too deeply, wrong types) is an
:class:`IngestError` naming the file and line and saying how to fix it.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kairox.retrieval import Document
from kairox.support.errors import KairoxError
from kairox.workspace.convert.base import Converted
from kairox.workspace.files import NOT_REGULAR

#: How deeply a record's metadata may nest (deeper is refused, not a RecursionError).
MAX_METADATA_DEPTH = 32


class IngestError(KairoxError, ValueError):
    """An input cannot be ingested; the message names the file (and line) and the fix."""


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


# One decoder for every line (json.loads with an option builds a new one per call).
_DECODER = json.JSONDecoder(parse_constant=_no_constant)


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
class IngestInput:
    """One document read, with its structure and whether it is to be chunked."""

    document: Document
    converted: Converted | None = None
    chunk: bool = True


def _record(line: bytes, where: str) -> IngestInput | None:
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
        record = _DECODER.decode(decoded)
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
    return IngestInput(document, chunk=chunk)


def _open_regular(path: Path) -> int:
    """A descriptor of ``path`` if it is a regular file; never blocks on a FIFO."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise IngestError(f"{path}: {NOT_REGULAR}; give a file, a folder or a .jsonl file")
    return fd


def read_jsonl(path: Path) -> Iterator[Document]:
    """The records of a JSONL file; a bad line raises :class:`IngestError` naming it."""
    for item in read_records(path):
        yield item.document


def read_records(path: Path) -> Iterator[IngestInput]:
    """The records of a JSONL file as inputs (with their ``chunk`` flag)."""
    try:
        fd = _open_regular(path)
    except OSError as exc:
        raise IngestError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    with open(fd, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            item = _record(line, f"{path}:{number}")
            if item is not None:
                yield item
