"""Plain text: what every file no converter claims is read as."""

from __future__ import annotations

from kairox.workspace.convert.base import ConversionError, Converted


def decode_text(data: bytes, filename: str) -> str:
    """``data`` as UTF-8 (a leading BOM dropped); :class:`ConversionError` if it is not."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConversionError(
            f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "save it as UTF-8"
        ) from None


def plain(text: str) -> Converted:
    """Text whose lines are the file's lines, with no other structure."""
    return Converted(text=text, source_lines=True)
