"""Bounds on what one file may unpack into, checked before any converter parses it.

A DOCX, PPTX or XLSX is a ZIP of XML parts, and a ZIP member can expand a thousandfold:
a 750 KB file whose ``word/document.xml`` unpacks to 300 MB held ``kairox index`` for
minutes. Before a converter sees a ZIP container, :func:`check_unpacked` adds up its
members' declared sizes, then unpacks them (discarding the bytes) to confirm the actual
sizes stay within the same bound; after conversion, the text itself is bounded. A file
over either bound is skipped by name with the reason, like any file a converter cannot
read, and the run goes on.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from dataclasses import dataclass

from kairox.workspace.convert.base import ConversionError

__all__ = [
    "DEFAULT_MAX_MEMBERS",
    "DEFAULT_MAX_TEXT_CHARS",
    "DEFAULT_MAX_UNPACKED_BYTES",
    "ConversionLimits",
    "TooLargeUnpacked",
    "check_text",
    "check_unpacked",
]

#: What a ZIP container's members may unpack to, in total (``[workspace]
#: max_unpacked_bytes``). Office files of a few MB unpack to tens of MB at most.
DEFAULT_MAX_UNPACKED_BYTES = 64 * 1024 * 1024
#: Members one container may hold (a DOCX has tens; a million empty members is an attack).
DEFAULT_MAX_MEMBERS = 10_000
#: Characters of text one file may convert to (a 4,000-page book is about 8 million).
DEFAULT_MAX_TEXT_CHARS = 8_000_000

_ZIP_MAGIC = b"PK\x03\x04"
_BLOCK = 1 << 20


class TooLargeUnpacked(ConversionError):
    """A file that would unpack (or convert) into more than its bound; says by how much."""


@dataclass(frozen=True, slots=True)
class ConversionLimits:
    """The bounds :class:`~kairox.workspace.convert.converters.Converters` applies."""

    max_unpacked_bytes: int = DEFAULT_MAX_UNPACKED_BYTES
    max_members: int = DEFAULT_MAX_MEMBERS
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS


def check_unpacked(data: bytes, limits: ConversionLimits) -> None:
    """Raise :class:`TooLargeUnpacked` when ``data`` is a ZIP container whose members
    declare, or actually unpack to, more than ``limits`` allow. Anything else (not a ZIP,
    a broken one) is left to the converter, which says what is wrong with it."""
    if not data.startswith(_ZIP_MAGIC):
        return
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        return
    bound = limits.max_unpacked_bytes
    fix = "raise [workspace] max_unpacked_bytes if the file is genuine"
    with archive:
        members = archive.infolist()
        if len(members) > limits.max_members:
            raise TooLargeUnpacked(
                f"holds {len(members):,} packed files, over the limit of {limits.max_members:,}"
            )
        declared = sum(member.file_size for member in members)
        if declared > bound:
            raise TooLargeUnpacked(
                f"unpacks to {declared:,} bytes (from {len(data):,}), over the limit of "
                f"{bound:,}; {fix}"
            )
        # The sizes a header declares can lie: unpack for real, counting, within the bound.
        left = bound
        for member in members:
            try:
                with archive.open(member) as stream:
                    while block := stream.read(min(_BLOCK, left + 1)):
                        left -= len(block)
                        if left < 0:
                            raise TooLargeUnpacked(
                                f"unpacks to more than {bound:,} bytes (from {len(data):,}), "
                                f"over the limit; {fix}"
                            )
            except (zipfile.BadZipFile, RuntimeError, NotImplementedError, OSError, EOFError):
                return  # encrypted, corrupt or an unknown method: the converter says so
            except zlib.error:
                return


def check_text(text: str, limits: ConversionLimits) -> None:
    """Raise :class:`TooLargeUnpacked` when converted text is longer than ``limits`` allow."""
    if len(text) > limits.max_text_chars:
        raise TooLargeUnpacked(
            f"converts to {len(text):,} characters of text, over the limit of "
            f"{limits.max_text_chars:,}"
        )
