"""A file whose conversion failed is remembered and not read again until it changes."""

from __future__ import annotations

import os

from kairox.workspace.convert.base import ConversionError, Converted, ConverterSpec
from kairox.workspace.convert.converters import CONVERSION_FAILED, Converters
from kairox.workspace.rag_index import WorkspaceRagIndex


class _Strict:
    """A converter for ``.rec`` files that refuses any that do not start with ``REC``."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, data: bytes, filename: str) -> Converted:
        self.calls.append(filename)
        if not data.startswith(b"REC"):
            raise ConversionError("no REC header")
        return Converted(text=data.decode()[3:], format="rec")


def _run(database, root, embedder, converter):
    spec = ConverterSpec(name="rec", suffixes=(".rec",), convert=converter)
    index = WorkspaceRagIndex(database, root, embedder, converters=Converters([spec]))
    try:
        return index.index()
    finally:
        index.close()


def test_a_failed_file_is_skipped_unread_with_its_reason_until_it_changes(
    database, project, embedder
):
    bad = project / "data" / "broken.rec"
    bad.parent.mkdir()
    bad.write_bytes(b"garbage")
    converter = _Strict()
    expected = ("data/broken.rec", f"{CONVERSION_FAILED} (rec: no REC header)")

    first = _run(database, project, embedder, converter)
    assert expected in first.skipped_details
    assert converter.calls == ["broken.rec"]

    again = _run(database, project, embedder, converter)
    assert converter.calls == ["broken.rec"]  # not read again
    assert expected in again.skipped_details  # still reported, with its reason
    assert again.skipped_reasons[CONVERSION_FAILED] == 1

    # Changed (same size, new mtime): read again; now it converts and is indexed.
    bad.write_bytes(b"RECtide")
    stat = bad.stat()
    os.utime(bad, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    fixed = _run(database, project, embedder, converter)
    assert converter.calls == ["broken.rec", "broken.rec"]
    assert fixed.added == 1 and CONVERSION_FAILED not in fixed.skipped_reasons


def test_a_removed_failure_is_forgotten(database, project, embedder):
    bad = project / "broken.rec"
    bad.write_bytes(b"garbage")
    converter = _Strict()
    _run(database, project, embedder, converter)
    bad.unlink()
    assert CONVERSION_FAILED not in _run(database, project, embedder, converter).skipped_reasons
    bad.write_bytes(b"garbage")  # back, even with the same size: read (and refused) again
    _run(database, project, embedder, converter)
    assert converter.calls == ["broken.rec", "broken.rec"]
