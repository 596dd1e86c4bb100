"""Secrets in configuration: a ``*_env`` key names the environment variable holding a
secret, never the secret itself.

The config loader checks every ``*_env`` key of every table with this rule before a
plugin's schema sees it; a plugin's schema declares such a key as :data:`EnvVarName` so a
model validated on its own (in a plugin's tests, or from code) applies the same rule.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, StrictStr

__all__ = ["ENV_NAME_RE", "EnvVarName", "check_env_name"]

#: What an environment variable's name looks like (POSIX portable names).
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_env_name(value: str) -> str:
    """Return ``value`` if it is an environment variable's name, else raise ``ValueError``."""
    if not ENV_NAME_RE.fullmatch(value):
        raise ValueError(
            f"{value!r} is not an environment variable name (letters, digits and '_', not "
            "starting with a digit); give the variable's name, never the secret itself"
        )
    return value


#: A config key naming an environment variable (``api_key_env = "PINECONE_API_KEY"``).
EnvVarName = Annotated[StrictStr, AfterValidator(check_env_name)]
