"""What a ``<memory>`` marker may say, and the reason when it may not.

The records a marker becomes (:class:`MemoryMarker`, :class:`RejectedMarker`), the key rule
(:func:`normalize_key`) and the checks that turn a marker's raw parts into one or the other.
:mod:`kairox.memory.markers` finds the markers in a stream; this module judges them.

Grammar (what counts as a marker)
---------------------------------
* A marker starts at ``<memory`` (tag name in any case, straight after the ``<``) followed by
  whitespace, ``>`` or ``/``, outside code. Whitespace in tags means ASCII whitespace. From there on everything up to the matching ``</memory>`` (any case, whitespace
  allowed before ``>``), or to the end of the text, is the marker's raw text and never reaches the
  visible output, whether the marker is accepted or rejected. A ``<memory`` inside a marker body
  opens a nested level that needs its own ``</memory>``; nesting itself is an error.
* The opening tag ends at its first ``>`` (a ``</memory>`` before any ``>`` ends the whole,
  rejected, marker; ``<memory .../>`` is rejected for having no body). Its attributes are
  ``scope`` (required) and ``key``, names in any case, in any order, each exactly once, values in
  single or double quotes, separated by whitespace, with whitespace allowed around ``=``.
* A bare ``<memory`` at the very end of the stream counts as an unterminated marker; a shorter
  prefix such as ``<mem`` is text.
* ``</memory>`` with no open marker is ordinary visible text.

Normalisation and validation
----------------------------
* ``scope`` is stripped and lower-cased; it must be ``session``, ``user`` or ``workspace``.
  ``user`` and ``workspace`` require a key; ``session`` may carry one.
* Keys (see :func:`normalize_key`): strip surrounding whitespace, lower-case, and turn each
  internal run of whitespace into a single ``.`` (``"Editor Font"`` → ``"editor.font"``, matching
  the dotted style of keys like ``editor.font``). The result must be 1-128 characters of
  ``[a-z0-9._-]``.
* The body is stripped of surrounding whitespace; inner text is kept verbatim. It must not be
  empty.

Anything that breaks a rule becomes a :class:`RejectedMarker` with a human-readable reason. A
bad marker is never downgraded to the auto-accepted session scope.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, NamedTuple

__all__ = [
    "KEY_MAX_LENGTH",
    "SCOPES",
    "SCOPES_WIDEST_FIRST",
    "ExtractionResult",
    "MemoryMarker",
    "RejectedMarker",
    "normalize_key",
]

SCOPES: Final = ("session", "user", "workspace")
#: The scopes from the widest reach to the narrowest: how listings and prompts order them.
SCOPES_WIDEST_FIRST: Final = ("user", "workspace", "session")
KEY_MAX_LENGTH: Final = 128

# XML-style whitespace. Unicode spaces are deliberately not tag syntax: they are likelier to be
# prose than a model's formatting of a tag.
WS: Final = " \t\n\r\f\v"
_WS_RUN: Final = re.compile(r"[ \t\n\r\f\v]+")
_KEY_CHARS: Final = re.compile(r"[a-z0-9._-]+")


@dataclass(frozen=True, slots=True)
class MemoryMarker:
    """A well-formed marker: what the model asked to remember, already normalised."""

    scope: str
    """``"session"``, ``"user"`` or ``"workspace"``."""
    key: str | None
    """The normalised key; always set for user and workspace scope, optional for session."""
    body: str
    """The body with surrounding whitespace stripped."""
    raw: str
    """The marker exactly as the model wrote it, from ``<memory`` to ``</memory>``."""


@dataclass(frozen=True, slots=True)
class RejectedMarker:
    """A marker that was removed from the visible text but is not a valid memory proposal."""

    reason: str
    """Why it was rejected, for logs and the UI."""
    raw: str
    """The marker exactly as the model wrote it (to the end of the text if unterminated)."""


class ExtractionResult(NamedTuple):
    """What :func:`extract_memory_markers` returns; unpacks as ``visible, markers, rejected``."""

    visible: str
    markers: list[MemoryMarker]
    rejected: list[RejectedMarker]


def normalize_key(key: str) -> str:
    """Normalise and validate a memory key.

    Strips surrounding whitespace, lower-cases, and replaces each internal run of whitespace with
    a single ``.``. Raises :class:`ValueError` (with a message fit for a rejection reason) if the
    result is empty, longer than :data:`KEY_MAX_LENGTH`, or has characters outside
    ``[a-z0-9._-]``.
    """
    if not isinstance(key, str):
        raise TypeError(f"memory key must be a string, not {type(key).__name__}")
    normal = _WS_RUN.sub(".", key.strip(WS).lower())
    if not normal:
        raise ValueError("key is empty")
    if len(normal) > KEY_MAX_LENGTH:
        raise ValueError(f"key is {len(normal)} characters long (at most {KEY_MAX_LENGTH})")
    if not _KEY_CHARS.fullmatch(normal):
        bad = sorted({ch for ch in normal if not _KEY_CHARS.fullmatch(ch)})
        shown = ", ".join(repr(ch) for ch in bad)
        raise ValueError(f"key {normal!r} has characters outside [a-z0-9._-]: {shown}")
    return normal


class _MalformedAttributes(ValueError):
    """An opening tag whose attributes do not parse (internal)."""


def _parse_attributes(text: str) -> dict[str, str]:
    """Parse the attribute part of an opening tag (everything after ``<memory``)."""
    attrs: dict[str, str] = {}
    i, n = 0, len(text)
    while True:
        start = i
        while i < n and text[i] in WS:
            i += 1
        if i == n:
            return attrs
        if i == start and attrs:
            raise _MalformedAttributes("attributes must be separated by whitespace")
        name_start = i
        while i < n and (text[i].isascii() and (text[i].isalnum() or text[i] in "_-:.")):
            i += 1
        if i == name_start:
            raise _MalformedAttributes(f"unexpected {text[i]!r} in the opening tag")
        name = text[name_start:i]
        lname = name.lower()
        while i < n and text[i] in WS:
            i += 1
        if i == n or text[i] != "=":
            raise _MalformedAttributes(f"attribute {name!r} has no value")
        i += 1
        while i < n and text[i] in WS:
            i += 1
        if i == n or text[i] not in "\"'":
            raise _MalformedAttributes(f"the value of attribute {name!r} must be quoted")
        quote = text[i]
        end = text.find(quote, i + 1)
        if end < 0:
            raise _MalformedAttributes(f"the value of attribute {name!r} has no closing {quote}")
        if lname not in ("scope", "key"):
            raise _MalformedAttributes(f"unknown attribute {name!r} (expected scope and key)")
        if lname in attrs:
            raise _MalformedAttributes(f"duplicate attribute {lname!r}")
        attrs[lname] = text[i + 1 : end]
        i = end + 1


def classify_marker(
    raw: str,
    attr_text: str,
    body: str,
    *,
    terminated: bool,
    tag_closed: bool,
    self_closing: bool,
    nested: bool,
) -> MemoryMarker | RejectedMarker:
    """Turn one marker's raw parts into a marker or a rejection, first problem wins."""

    def reject(reason: str) -> RejectedMarker:
        return RejectedMarker(reason=reason, raw=raw)

    if not terminated:
        return reject(
            "unterminated <memory> marker: no closing </memory> before the end of the text"
        )
    if not tag_closed:
        return reject("the opening <memory> tag has no '>' before </memory>")
    if self_closing:
        return reject("a self-closing <memory/> marker has no body")
    if nested:
        return reject("nested <memory> marker inside a marker body")
    try:
        attrs = _parse_attributes(attr_text)
    except _MalformedAttributes as exc:
        return reject(f"malformed attributes: {exc}")
    if "scope" not in attrs:
        return reject("malformed attributes: missing required attribute 'scope'")
    scope = attrs["scope"].strip(WS).lower()
    if scope not in SCOPES:
        return reject(f"unknown scope {attrs['scope']!r} (expected session, user or workspace)")
    key = attrs.get("key")
    if key is None and scope != "session":
        return reject(f"a {scope} memory needs a key attribute so later writes overwrite it")
    if key is not None:
        try:
            key = normalize_key(key)
        except ValueError as exc:
            return reject(f"invalid key: {exc}")
    body = body.strip()
    if not body:
        return reject("empty marker body")
    return MemoryMarker(scope=scope, key=key, body=body, raw=raw)
