"""The converters Kairox ships (registered by :mod:`kairox.default_plugins.converters`)."""

from __future__ import annotations

from kairox.workspace.convert.html import HTML
from kairox.workspace.convert.markdown import MARKDOWN
from kairox.workspace.convert.notebook import NOTEBOOK
from kairox.workspace.convert.office import DOCX_CONVERTER, PPTX_CONVERTER, XLSX_CONVERTER
from kairox.workspace.convert.pdf import PDF

BUILTIN_CONVERTERS = (MARKDOWN, HTML, PDF, DOCX_CONVERTER, PPTX_CONVERTER, XLSX_CONVERTER, NOTEBOOK)
