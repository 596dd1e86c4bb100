"""Bounds on unpacked bytes and converted text: ZIP bombs and runaway text are skipped
with the reason before (or instead of) being parsed."""

from __future__ import annotations

import io
import json
import struct
import zipfile

import pytest

from kairox.workspace.convert.base import Converted
from kairox.workspace.convert.converters import CONVERSION_FAILED, Converters
from kairox.workspace.convert.limits import ConversionLimits
from kairox.workspace.files import Skipped

from .conftest import make_bomb, make_docx, make_notebook, make_pptx, make_xlsx

#: Low bounds keep the bombs small and the tests fast; the defaults are far higher.
LOW = ConversionLimits(max_unpacked_bytes=1_000_000, max_members=50, max_text_chars=5_000)


@pytest.mark.parametrize(
    ("name", "make", "member"),
    [
        ("bomb.docx", make_docx, "word/document.xml"),
        ("bomb.pptx", make_pptx, "ppt/slides/slide1.xml"),
        ("bomb.xlsx", make_xlsx, "xl/worksheets/sheet1.xml"),
    ],
)
def test_an_office_zip_bomb_is_skipped_before_parsing(write, name, make, member):
    original = make()
    bomb = make_bomb(original, member, padding=3_000_000)
    assert len(bomb) < 60_000  # small on disk, 3 MB unpacked
    converters = Converters.builtin(limits=LOW)
    skipped = converters.read(write(name, bomb))
    assert isinstance(skipped, Skipped) and skipped.reason == CONVERSION_FAILED
    assert "unpacks to" in skipped.detail and "over the limit of 1,000,000" in skipped.detail
    assert "max_unpacked_bytes" in skipped.detail
    # the same file, unpadded, converts under the same bounds
    assert isinstance(converters.read(write(f"fine-{name}", original)), Converted)


def test_a_header_that_understates_the_size_is_refused_too(write):
    # The central directory says 100 bytes; the member really unpacks to 3 MB.
    bomb = bytearray(make_bomb(make_docx(), "word/document.xml", padding=3_000_000))
    directory, start = -1, 0
    while (found := bomb.find(b"PK\x01\x02", start)) != -1:
        name_length = struct.unpack_from("<H", bomb, found + 28)[0]
        if bomb[found + 46 : found + 46 + name_length] == b"word/document.xml":
            directory = found
            break
        start = found + 4
    assert directory != -1
    struct.pack_into("<I", bomb, directory + 24, 100)  # its uncompressed size
    skipped = Converters.builtin(limits=LOW).read(write("liar.docx", bytes(bomb)))
    assert isinstance(skipped, Skipped) and skipped.reason == CONVERSION_FAILED


def test_too_many_members_is_skipped(write):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for number in range(51):
            archive.writestr(f"part{number}.xml", "<a/>")
    skipped = Converters.builtin(limits=LOW).read(write("many.docx", out.getvalue()))
    assert isinstance(skipped, Skipped) and "51 packed files" in skipped.detail


def test_text_over_the_bound_is_skipped_whatever_the_converter(write):
    notebook = json.loads(make_notebook())
    notebook["cells"].append({"cell_type": "markdown", "metadata": {}, "source": "x " * 5_000})
    skipped = Converters.builtin(limits=LOW).read(
        write("long.ipynb", json.dumps(notebook).encode())
    )
    assert isinstance(skipped, Skipped) and skipped.reason == CONVERSION_FAILED
    assert "characters of text, over the limit of 5,000" in skipped.detail
