"""Reading files through the converters: claimed, plain, or skipped with the reason."""

from __future__ import annotations

import pytest

from kairox.workspace.convert.base import Converted, ConverterSpec
from kairox.workspace.convert.converters import (
    CONVERSION_FAILED,
    CONVERTER_MISSING,
    Converters,
)
from kairox.workspace.files import Skipped

from .conftest import make_docx, make_pdf


def test_claimed_files_are_converted_and_others_read_as_text(write):
    converters = Converters.builtin()
    pdf = converters.read(write("a.pdf", make_pdf([["Page text here."]])))
    assert isinstance(pdf, Converted) and pdf.text == "Page text here."
    code = converters.read(write("a.py", b"print('hi')\n"))
    assert isinstance(code, Converted) and code.source_lines and code.text == "print('hi')\n"
    blob = converters.read(write("a.bin", b"\x00\x01"))
    assert isinstance(blob, Skipped) and blob.reason == "binary"


@pytest.mark.parametrize(
    ("name", "data", "detail"),
    [
        ("bad.pdf", b"%PDF-1.7 nonsense", "pdf: is not a readable PDF"),
        ("bad.docx", make_docx()[:400], "docx: is not a readable DOCX file"),
        ("bad.ipynb", b"{", "notebook: is not a notebook"),
    ],
)
def test_a_file_its_converter_cannot_read_is_skipped_with_why(write, name, data, detail):
    skipped = Converters.builtin().read(write(name, data))
    assert isinstance(skipped, Skipped)
    assert skipped.reason == CONVERSION_FAILED
    assert skipped.detail.startswith(detail)


def test_a_missing_library_is_a_skip_with_the_install_hint(write):
    from kairox.support.lazy_imports import LazyImport

    missing = LazyImport(
        "kairox_no_such_module", needed_by="the fancy converter", install="pip install fancy"
    )

    def convert(data: bytes, filename: str) -> Converted:
        missing.load()
        raise AssertionError("unreachable")

    converters = Converters([ConverterSpec(name="fancy", suffixes=(".fancy",), convert=convert)])
    skipped = converters.read(write("a.FANCY", b"data"))
    assert isinstance(skipped, Skipped) and skipped.reason == CONVERTER_MISSING
    assert "pip install fancy" in skipped.detail


def test_a_later_claim_on_a_suffix_wins():
    first = ConverterSpec(name="one", suffixes=(".x",), convert=lambda d, f: Converted("1"))
    second = ConverterSpec(name="two", suffixes=(".X",), convert=lambda d, f: Converted("2"))
    assert Converters([first, second]).claiming("file.x") is second
