"""Field types a knowledge-base schema declares instead of writing the same validator again.

:func:`matching` makes a strict string that must match a pattern whole; a value that does
not is refused with the schema's own message, which :mod:`kairox.config.problems` shows
with the table and key it came from.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, StrictStr

__all__ = ["matching"]


def matching(pattern: re.Pattern[str], problem: str) -> Any:
    """A ``StrictStr`` that must match ``pattern`` whole.

    :param problem: the error for a value that does not, saying what to write instead;
        ``{value!r}`` in it stands for the value given.
    """

    def check(value: str) -> str:
        if not pattern.fullmatch(value):
            raise ValueError(problem.format(value=value))
        return value

    return Annotated[StrictStr, AfterValidator(check)]
