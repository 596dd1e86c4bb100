"""The built-in document converters, registered through ``kairox_register_converters``
like any plugin's, so an installed plugin can replace one (its claim on a suffix wins).

Markdown and notebooks need nothing extra; HTML, PDF, DOCX, PPTX and XLSX need
``pip install 'kairox[documents]'`` and say so in the skip reason when it is missing.
"""

from __future__ import annotations

from kairox import hookimpl
from kairox.workspace.convert.builtin import BUILTIN_CONVERTERS


@hookimpl
def kairox_register_converters(register):
    for spec in BUILTIN_CONVERTERS:
        register(spec)
