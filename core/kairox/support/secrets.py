"""Secrets: named in configuration, never written there, and kept out of errors and logs.

A ``*_env`` key names the environment variable holding a secret, never the secret itself.
The config loader checks every ``*_env`` key of every table with this rule before a
plugin's schema sees it; a plugin's schema declares such a key as :data:`EnvVarName` so a
model validated on its own (in a plugin's tests, or from code) applies the same rule.

Loading a config also records every such variable name (every ``*_env`` key of every
table, defaults included); a plugin that reads a secret some other way can add its
variable with :func:`register_env`. :func:`scrub` replaces the *current* values of those
variables with ``***`` wherever Kairox formats an error or a log line: a server that echoes
the request's ``Authorization`` header in its error body must not print the key. Only
names are remembered, never values: a value is read from the environment each time, so
nothing secret is copied and an unset variable scrubs nothing.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, StrictStr

__all__ = [
    "ENV_NAME_RE",
    "MASK",
    "EnvVarName",
    "check_env_name",
    "install_log_scrubbing",
    "register_env",
    "register_env_keys",
    "scrub",
]

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


# -- keeping secret values out of errors and logs -----------------------------------------

MASK = "***"
#: Shorter values are not scrubbed: they would mask ordinary words (no real key is this short).
MIN_SECRET_LENGTH = 6

_lock = threading.Lock()
_names: set[str] = set()


def register_env(name: str) -> None:
    """Treat the value of environment variable ``name`` as a secret from now on."""
    with _lock:
        _names.add(name)


def register_env_keys(settings: Mapping[str, Any]) -> None:
    """Register the variables named by every ``*_env`` key of ``settings`` (nested too)."""
    for key, value in settings.items():
        if isinstance(value, Mapping):
            register_env_keys(value)
        elif key.lower().endswith("_env") and isinstance(value, str) and value:
            register_env(value)


def _secret_values() -> list[str]:
    with _lock:
        names = list(_names)
    values = {os.environ.get(name, "").strip() for name in names}
    # Longest first, so a secret containing another is masked whole.
    return sorted((v for v in values if len(v) >= MIN_SECRET_LENGTH), key=len, reverse=True)


def scrub(text: str) -> str:
    """``text`` with the value of every registered secret variable replaced by ``***``."""
    for value in _secret_values():
        if value in text:
            text = text.replace(value, MASK)
    return text


def _scrub_record(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a malformed call; logging reports it itself when formatting
        return
    cleaned = scrub(message)
    if cleaned != message:
        record.msg, record.args = cleaned, None
    if record.exc_info and not record.exc_text and _secret_values():
        record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))


_installed = False


def install_log_scrubbing() -> None:
    """Scrub every log record of this process as it is made (any logger, any handler).

    Idempotent. Wraps the log record factory rather than adding a handler filter, because
    Kairox configures no handlers of its own: whoever formats the record sees it clean.
    """
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
        make = logging.getLogRecordFactory()

        def scrubbed_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = make(*args, **kwargs)
            _scrub_record(record)
            return record

        logging.setLogRecordFactory(scrubbed_record)
