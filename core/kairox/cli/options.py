"""Options many ``kairox`` commands share, declared once so they read and behave alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

__all__ = ["json_option", "profile_option"]


def json_option(help: str = "Print JSON.") -> Callable[[Any], Any]:
    """``--json`` (the ``as_json`` parameter): print JSON instead of text for people."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def profile_option(help: str = "Profile name or alias.") -> Callable[[Any], Any]:
    """``-p/--profile NAME`` (default: none, so the command falls back to the default profile)."""
    return click.option("-p", "--profile", default=None, help=help)
