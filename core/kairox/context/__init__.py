"""Context assembly: token accounting with offline tiktoken encodings (see :mod:`.tokens`).

The package root offers what :mod:`kairox.context.tokens` exports, under the same names
(its ``__all__`` is the one list of them); the assembler lives in
:mod:`kairox.context.assembler`.
"""

from kairox.context import tokens as _tokens
from kairox.context.tokens import *  # noqa: F403  (re-exported: the token accounting API)

__all__: list[str] = []
__all__ += _tokens.__all__  # the form type checkers follow
