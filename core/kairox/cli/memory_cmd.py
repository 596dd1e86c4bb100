"""``kairox memory``: see, approve, reject, write, edit and forget memories."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from kairox.cli.app import AppContext, console, fold_long_values, print_json
from kairox.cli.options import json_option
from kairox.memory.approvals import MemoryInputError
from kairox.memory.store import MemoryRecord
from kairox.support.terminal import printable

SCOPES = click.Choice(["user", "workspace", "session"])


def record_json(record: MemoryRecord) -> dict[str, Any]:
    return record.as_json()


def _show(record: MemoryRecord, verb: str) -> None:
    console.print(
        Text(f"{verb} {record.scope} memory {record.key or record.id} (#{record.id}): ")
        + Text(printable(record.body))
    )


def print_records(records: list[MemoryRecord], *, pending: bool = False) -> None:
    """The records as a table, flagging proposals made after tool output."""
    if not records:
        console.print("no pending proposals" if pending else "no memories yet", markup=False)
        return
    table = Table("id", "scope", "key", "body", "status", "updated")
    fold_long_values(table)
    for r in records:
        status = Text(r.status)
        if r.injection_warning:
            status.append(f" ⚠ proposed after {printable(', '.join(r.tainted_by))}", style="yellow")
        key, body = Text(printable(r.key or "-")), Text(printable(r.body))
        table.add_row(str(r.id), r.scope, key, body, status, r.updated_at)
    console.print(table)


def print_record(record: MemoryRecord) -> None:
    """Every field of one record, one line each."""
    for name, value in record_json(record).items():
        console.print(Text(f"{name}: ", style="bold") + Text(printable(str(value))))


@contextmanager
def _input_checked() -> Iterator[None]:
    """A key or body the person typed that is not valid: exit 2, like any bad option."""
    try:
        yield
    except MemoryInputError as exc:
        raise click.UsageError(printable(str(exc))) from None


@click.group()
def memory() -> None:
    """Memories the model proposed and you approved (or wrote yourself)."""


@memory.command("list")
@click.option("--scope", type=SCOPES, help="Only this scope.")
@click.option("--pending", is_flag=True, help="Proposals waiting for your decision.")
@json_option()
@click.pass_obj
def list_(app: AppContext, scope: str | None, pending: bool, as_json: bool) -> None:
    """List the memories this workspace sees (user + workspace), or pending proposals."""
    records = app.facade().memories(scope=scope, pending=pending)
    if as_json:
        print_json([record_json(r) for r in records])
        return
    print_records(records, pending=pending)


@memory.command()
@click.argument("memory_id", type=int)
@json_option()
@click.pass_obj
def show(app: AppContext, memory_id: int, as_json: bool) -> None:
    """Show one memory or proposal with its provenance."""
    from kairox.memory.approvals import MemoryNotFound

    record = app.facade().memory.get(memory_id)
    if record is None:
        raise MemoryNotFound(f"no memory #{memory_id}; `kairox memory list` shows the ids")
    if as_json:
        print_json(record_json(record))
        return
    print_record(record)


@memory.command()
@click.argument("memory_id", type=int)
@click.pass_obj
def approve(app: AppContext, memory_id: int) -> None:
    """Approve pending proposal MEMORY_ID (it overwrites the memory under its key)."""
    _show(app.facade().memory.approve(memory_id, actor="cli"), "approved")


@memory.command()
@click.argument("memory_id", type=int)
@click.option("--reason", default="rejected by the user", show_default=True)
@click.pass_obj
def reject(app: AppContext, memory_id: int, reason: str) -> None:
    """Reject pending proposal MEMORY_ID (kept as history, never used)."""
    _show(app.facade().memory.reject(memory_id, reason, actor="cli"), "rejected")


@memory.command("set")
@click.option("--scope", type=click.Choice(["user", "workspace"]), required=True)
@click.option("--key", required=True, help="A stable key; writing it again overwrites.")
@click.argument("body")
@click.pass_obj
def set_(app: AppContext, scope: str, key: str, body: str) -> None:
    """Write a memory yourself (no approval needed: you are the approver)."""
    facade = app.facade()
    with _input_checked():
        same = facade.memory.unchanged(scope, key, body, workspace_id=facade.workspace_id)
        if same is not None:
            _show(same, "unchanged")
            return
        record = facade.memory.set(scope, key, body, workspace_id=facade.workspace_id, actor="cli")
    _show(record, "saved")


@memory.command()
@click.argument("key")
@click.argument("body", required=False)
@click.option(
    "--scope", type=click.Choice(["user", "workspace"]), help="Default: workspace, then user."
)
@click.pass_obj
def edit(app: AppContext, key: str, body: str | None, scope: str | None) -> None:
    """Replace the body under KEY (opens $EDITOR when BODY is not given)."""
    facade = app.facade()
    with _input_checked():
        current = facade.memory.find(key, workspace_id=facade.workspace_id, scope=scope)
    if body is None:
        edited = click.edit(current.body)
        if edited is None or not edited.strip():
            raise click.ClickException("nothing changed: the editor was closed without a body")
        body = edited.strip()
    with _input_checked():
        edited_record = facade.memory.edit(
            key, body, workspace_id=facade.workspace_id, scope=scope, actor="cli"
        )
    _show(edited_record, "edited")


@memory.command()
@click.argument("key")
@click.option(
    "--scope", type=click.Choice(["user", "workspace"]), help="Default: workspace, then user."
)
@json_option()
@click.pass_obj
def history(app: AppContext, key: str, scope: str | None, as_json: bool) -> None:
    """The values KEY has had: earlier ones with when they were valid, the current one last."""
    facade = app.facade()
    records = facade.memory.history(key, workspace_id=facade.workspace_id, scope=scope)
    if as_json:
        print_json([record_json(r) for r in records])
        return
    table = Table("id", "body", "valid from", "valid to")
    fold_long_values(table)
    for r in records:
        until = Text("current", style="bold") if r.valid_to is None else Text(r.valid_to)
        table.add_row(str(r.id), Text(printable(r.body)), r.valid_from or "-", until)
    console.print(Text(f"{records[-1].scope} memory {printable(records[-1].key or '')}"))
    console.print(table)


@memory.command()
@click.argument("key")
@click.option(
    "--scope", type=click.Choice(["user", "workspace"]), help="Default: workspace, then user."
)
@click.option(
    "--yes", is_flag=True, help="Do not ask for confirmation (needed without a terminal)."
)
@click.pass_obj
def forget(app: AppContext, key: str, scope: str | None, yes: bool) -> None:
    """Delete the memory under KEY, and its history, for good."""
    facade = app.facade()
    record = facade.memory.find(key, workspace_id=facade.workspace_id, scope=scope)
    if not yes and not (sys.stdin is not None and sys.stdin.isatty()):
        # No one can answer the prompt: say how to confirm instead of aborting at it.
        raise click.UsageError(
            f"forgetting {record.scope} memory {printable(repr(record.key))} needs confirmation "
            "and there is no terminal to ask at; add --yes to confirm"
        )
    if not yes:
        click.confirm(
            printable(f"forget {record.scope} memory {record.key!r}: {record.body!r}?"), abort=True
        )
    forgotten = facade.memory.forget(
        key, workspace_id=facade.workspace_id, scope=scope, actor="cli"
    )
    _show(forgotten, "forgot")
