"""Reading ``kairox kb ingest``'s JSONL records: one per line, each checked before use.

A record holds ``id`` and ``text`` (required), ``title``, ``uri``, ``metadata`` and
``chunk`` (optional). What cannot be stored faithfully (invalid UTF-8 or JSON, lone
surrogates, non-finite numbers, metadata nested too deeply, wrong types) is an
:class:`IngestError` naming the file and line and saying how to fix it.

A line is parsed by orjson first (a third of :mod:`json`'s time, and every line is parsed
twice: checked, then written); whatever orjson refuses or could read differently from
:mod:`json` (an integer beyond 64 bits becomes a float in orjson, it nests deeper than
:mod:`json` can, it refuses NaN and lone surrogates :mod:`json` reads) is read again by
:mod:`json`, so what is accepted, what is stored and every error are :mod:`json`'s.
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

import orjson

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


class _ReadAgain(Exception):
    """A value orjson may have read differently from :mod:`json` (a float: maybe an
    integer beyond 64 bits): the line is read again by :mod:`json`."""


def _check_value(value: Any, where: str, name: str, depth: int = 0, *, floats: bool = True) -> None:
    """Refuse what cannot be stored faithfully: lone surrogates, deep nesting, non-finite
    numbers (the recursion is bounded by :data:`MAX_METADATA_DEPTH`); with ``floats``
    false, a float raises :class:`_ReadAgain`."""
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
    elif isinstance(value, float):
        if not floats:
            raise _ReadAgain
        if not math.isfinite(value):
            raise IngestError(f"{where}: {name!r} holds {value}, which JSON cannot hold")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_value(key, where, name, depth + 1, floats=floats)
            _check_value(item, where, name, depth + 1, floats=floats)
    elif isinstance(value, list):
        for item in value:
            _check_value(item, where, name, depth + 1, floats=floats)


# One decoder for every line (json.loads with an option builds a new one per call).
_DECODER = json.JSONDecoder(parse_constant=_no_constant)

# orjson nests up to 1024 levels, json up to the recursion limit less the stack: a line
# with more brackets than this (a bound on its depth) is left to json.
_ORJSON_MAX_BRACKETS = 256


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
    if line.count(b"[") + line.count(b"{") <= _ORJSON_MAX_BRACKETS:
        try:
            return _from_orjson(orjson.loads(line), where)
        except (orjson.JSONDecodeError, IngestError, _ReadAgain):
            pass  # json reads it again: its acceptance, its values, its error messages
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
        # json's message for a control character ends in "at", its position given apart.
        problem = exc.msg.removesuffix(" at")
        raise IngestError(f"{where}: not valid JSON ({problem} at column {exc.colno})") from exc
    except ValueError as exc:  # NaN / Infinity, from _no_constant
        raise IngestError(f"{where}: {exc}") from None
    except RecursionError:
        raise IngestError(
            f"{where}: nested too deeply to read (at most {MAX_METADATA_DEPTH} levels)"
        ) from None
    return _from_json(record, where)


def _from_orjson(record: Any, where: str) -> IngestInput:
    """The common record as orjson read it, its strings already valid (orjson refuses lone
    surrogates); anything unusual raises :class:`_ReadAgain`, for :func:`_from_json`'s
    checks and messages."""
    if type(record) is not dict:
        raise _ReadAgain
    doc_id, text = record.get("id"), record.get("text")
    title, uri = record.get("title"), record.get("uri")
    metadata, chunk = record.get("metadata") or {}, record.get("chunk", True)
    if type(doc_id) is int:  # within 64 bits: orjson reads a larger one as a float
        doc_id = str(doc_id)
    if (
        type(doc_id) is not str
        or type(text) is not str
        or (title is not None and type(title) is not str)
        or (uri is not None and type(uri) is not str)
        or type(metadata) is not dict
        or type(chunk) is not bool
    ):
        raise _ReadAgain
    if metadata:
        _check_value(metadata, where, "metadata", floats=False)
    document = Document(id=doc_id, text=text, title=title or "", uri=uri, metadata=metadata)
    return IngestInput(document, chunk=chunk)


def _from_json(record: Any, where: str) -> IngestInput:
    """The input a parsed line holds, every value checked."""
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
