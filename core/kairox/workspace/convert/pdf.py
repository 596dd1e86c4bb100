"""PDF: the text layer of each page (pypdf), a ``page`` region per page.

An encrypted PDF is opened with the empty password (many are "encrypted" only against
editing); one that needs a real password, a corrupt one, and one with no text layer at
all (a scan) are refused with the reason.
"""

from __future__ import annotations

import io
import logging

from kairox.support.lazy_imports import LazyImport
from kairox.workspace.convert.base import ConversionError, Converted
from kairox.workspace.convert.blocks import Blocks
from kairox.workspace.convert.html import DOCUMENTS_EXTRA, documents_converter

PYPDF = LazyImport("pypdf", needed_by="the PDF converter", install=DOCUMENTS_EXTRA)


def convert_pdf(data: bytes, filename: str) -> Converted:
    pypdf = PYPDF.load()
    # pypdf logs what it repairs ("EOF marker not found") straight to stderr; a file it
    # cannot read is reported once, by name, as a skipped file instead.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ConversionError("is encrypted with a password; save a decrypted copy")
        pages = [page.extract_text() or "" for page in reader.pages]
    except ConversionError:
        raise
    except Exception as exc:  # pypdf raises many types for broken files
        raise ConversionError(f"is not a readable PDF ({type(exc).__name__}: {exc})") from exc
    blocks = Blocks()
    for number, page in enumerate(pages, start=1):
        page = page.strip()
        if page:
            blocks.add(page, region=str(number))
    if not blocks.parts:
        raise ConversionError("has no text layer (a scan?); run OCR on it first")
    return Converted(text=blocks.text, regions={"page": tuple(blocks.regions)}, format="pdf")


PDF = documents_converter(
    "pdf", (".pdf",), convert_pdf, "PDF text layer (pypdf); page numbers in hits.", PYPDF
)
