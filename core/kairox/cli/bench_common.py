"""What the ``kairox bench`` commands share: the ``--out``/``--json``/``--work`` options, parsing of
comma-separated lists, running a benchmark under progress bars, and writing or printing
its JSON report."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from kairox.cli import options
from kairox.cli.app import console, progress_bars

__all__ = [
    "finish",
    "folder_option",
    "int_list",
    "json_option",
    "names",
    "names_option",
    "numbers_option",
    "option",
    "out_option",
    "profile_option",
    "run",
    "show",
    "work_option",
    "wrote",
]


def out_option(help: str = "Write JSON here.") -> Callable[[Any], Any]:
    """``--out FILE``: where the JSON report is written."""
    return click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help=help)


def json_option(help: str = "Print the JSON report.") -> Callable[[Any], Any]:
    """``--json``: print the JSON report instead of the table."""
    return options.json_option(help)


def folder_option(flag: str, help: str, *decls: str, **extra: Any) -> Any:
    """``flag DIR``: a folder that must exist (more names or the parameter's in ``decls``)."""
    path = click.Path(exists=True, file_okay=False, path_type=Path)
    return click.option(flag, *decls, type=path, help=help, **extra)


def work_option(help: str) -> Any:
    """``--work DIR`` (required): the benchmark's scratch folder, ``help`` saying what it holds."""
    path = click.Path(file_okay=False, path_type=Path)
    return click.option("--work", required=True, type=path, help=f"Scratch folder: {help}")


def option(flag: str, default: Any, help: str | None = None, *decls: str, **extra: Any) -> Any:
    """``flag`` (more names or the parameter's in ``decls``) with a default ``--help`` shows."""
    return click.option(flag, *decls, default=default, show_default=True, help=help, **extra)


def names_option(
    flag: str, default: str, help: str, *decls: str, empty: str = "give at least one name"
) -> Any:
    """A comma-separated list of names, given to the command as ``list[str]``."""
    return option(flag, default, help, *decls, callback=lambda _c, _p, v: names(v, flag, empty))


def numbers_option(flag: str, default: str, help: str, *decls: str) -> Any:
    """A comma-separated list of whole numbers, given to the command as ``list[int]``."""
    return option(flag, default, help, *decls, callback=lambda _c, _p, v: int_list(v, flag))


def profile_option(help: str) -> Any:
    """``--profile NAME`` (no default: each command says what it takes from the profile)."""
    return click.option("--profile", default=None, help=help)


def int_list(value: str, hint: str) -> list[int]:
    """``"1,2,4"`` as ``[1, 2, 4]``; a clear usage error otherwise."""
    try:
        numbers = [int(part.replace("_", "")) for part in value.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(
            f"expected comma-separated whole numbers, got {value!r}", param_hint=hint
        ) from None
    if not numbers:
        raise click.BadParameter("give at least one number", param_hint=hint)
    return numbers


def names(value: str, hint: str, empty: str = "give at least one name") -> list[str]:
    """``"a, b"`` as ``["a", "b"]``; ``empty`` as the usage error when none is given."""
    found = [part.strip() for part in value.split(",") if part.strip()]
    if not found:
        raise click.BadParameter(empty, param_hint=hint)
    return found


def run(
    benchmark: Callable[..., dict[str, Any]],
    *args: Any,
    errors: tuple[type[Exception], ...] = (ValueError,),
    param_hint: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """``benchmark(*args, progress=..., **kwargs)`` under progress bars on stderr; one of
    ``errors`` (bad settings the benchmark found) becomes a usage error (exit 2), blamed
    on the option ``param_hint`` when given."""
    try:
        with progress_bars() as progress:
            return benchmark(*args, progress=progress, **kwargs)
    except errors as exc:
        if param_hint is not None:
            raise click.BadParameter(str(exc), param_hint=param_hint) from None
        raise click.UsageError(str(exc)) from None


def finish(report: dict[str, Any], out: Path | None, as_json: bool) -> bool:
    """Write and/or print the JSON; ``True`` when the table should be printed too."""
    if out is not None:
        from kairox.bench.report import write_report

        write_report(report, out)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return False
    return True


def wrote(out: Path | None) -> None:
    """Say where the report went (after the table)."""
    if out is not None:
        console.print(f"wrote {out}", markup=False)


def show(
    report: dict[str, Any],
    out: Path | None,
    as_json: bool,
    table: Callable[[dict[str, Any]], None],
) -> None:
    """Write and/or print the JSON report, or print it with ``table``; then say where it went."""
    if finish(report, out, as_json):
        table(report)
        wrote(out)
