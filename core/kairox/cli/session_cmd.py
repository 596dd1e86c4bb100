"""``kairox session``: import, list, show and export the conversations Kairox keeps.

A transcript is JSON Lines, one message a line: ``role`` (``user``, ``assistant``,
``system``, ``tool``), ``content``, and optionally ``name`` (the speaker, or the tool) and
``time`` (ISO 8601). ``import`` checks the whole file before it appends anything;
``export`` writes the same format back.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click
from rich.table import Table
from rich.text import Text

from kairox.cli.app import CONFIG_ERROR_EXIT, AppContext, console, console_err, print_json
from kairox.cli.options import json_option
from kairox.store.messages import (
    NoSuchSession,
    TranscriptError,
    read_messages,
    read_transcript,
    session_summaries,
    transcript_line,
)
from kairox.support.terminal import printable

if TYPE_CHECKING:
    from kairox.runtime.session import AppendResult
    from kairox.store.messages import RecordedMessage, SessionMessage

# Bad input (a transcript with bad lines) exits like a bad configuration: 2.
BAD_INPUT_EXIT = CONFIG_ERROR_EXIT


@click.group()
def session() -> None:
    """Conversations: import a transcript, list, show and export sessions."""


@session.command("import")
@click.argument(
    "file", type=click.Path(path_type=Path, exists=True, dir_okay=False, allow_dash=True)
)
@click.option("--session", "session_id", required=True, help="The session to append to.")
@click.option("--profile", help="The profile whose window compaction follows (default profile).")
@click.option(
    "--markers",
    is_flag=True,
    help="Propose the <memory> markers of assistant messages (kept as text otherwise).",
)
@json_option()
@click.pass_context
def import_(
    ctx: click.Context,
    file: Path,
    session_id: str,
    profile: str | None,
    markers: bool,
    as_json: bool,
) -> None:
    """Append the transcript FILE (JSON Lines; - for stdin) to a session as its history.

    \b
    One message a line, e.g.
      {"role": "user", "content": "Hi!", "name": "Ann", "time": "2024-05-08T13:56:00Z"}
    role: user, assistant, system or tool; name (the speaker) and time (ISO 8601) optional.

    Nothing is imported if any line is bad: each bad line is named, and the exit status
    is 2. A file with no messages (empty, or blank lines only) is refused the same way. The history is compacted as a live conversation would have been.
    """
    app: AppContext = ctx.obj
    try:
        messages = _read(file)
    except TranscriptError as exc:
        _refuse(ctx, str(exc))
    if not messages:
        # An empty import creates no session: saying "imported 0" would suggest one exists.
        source = "stdin" if str(file) == "-" else str(file)
        _refuse(
            ctx,
            f"{source} holds no messages (it is empty or only blank lines); nothing was "
            f"imported and session {session_id!r} was not created",
        )
    result = asyncio.run(
        app.facade().append_messages(session_id, messages, profile=profile, markers=markers)
    )
    if as_json:
        print_json(_import_json(session_id, result))
        return
    done = [c for c in result.compactions if c.status == "completed"]
    line = f"imported {len(result.event_ids)} messages into session {session_id}"
    if done:
        line += f"; compacted {len(done)} time{'s' * (len(done) != 1)}"
    console.print(Text(printable(line)))
    for record in result.proposals.pending:
        console.print(
            Text(f"proposed {record.scope} memory #{record.id} ({record.key}): ")
            + Text(printable(record.body))
            + Text(f"  (approve: kairox memory approve {record.id})")
        )


def _refuse(ctx: click.Context, problem: str) -> NoReturn:
    console_err.print("[bold red]error:[/] ", end="")
    console_err.print(printable(problem), markup=False)
    ctx.exit(BAD_INPUT_EXIT)


def _read(file: Path) -> list[SessionMessage]:
    if str(file) == "-":
        return read_transcript(sys.stdin.buffer, "stdin")
    try:
        with open(file, "rb") as handle:
            return read_transcript(handle, str(file))
    except OSError as exc:  # unreadable, or gone since click checked it
        raise click.FileError(str(file), hint=exc.strerror) from None


def _import_json(session_id: str, result: AppendResult) -> dict[str, Any]:
    proposals = result.proposals
    return {
        "session": session_id,
        "imported": len(result.event_ids),
        "compactions": [
            {"status": c.status, "reason": c.reason, "summarizer": c.summarizer}
            for c in result.compactions
        ],
        "memories": {
            "accepted": [r.id for r in proposals.accepted],
            "pending": [r.id for r in proposals.pending],
            "rejected": [reason for _, reason in proposals.rejected],
        },
    }


@session.command("list")
@json_option()
@click.pass_obj
def list_(app: AppContext, as_json: bool) -> None:
    """This workspace's sessions, the most recently active first."""
    facade = app.facade()
    found = session_summaries(facade.events, facade.workspace_id)
    if as_json:
        print_json(
            [
                {"session": s.session_id, "messages": s.messages, "first": s.first, "last": s.last}
                for s in found
            ]
        )
        return
    if not found:
        console.print("no sessions in this workspace yet", markup=False)
        return
    table = Table("session", "messages", "first", "last")
    for s in found:
        table.add_row(Text(printable(s.session_id)), str(s.messages), s.first, s.last)
    console.print(table)


def _messages(app: AppContext, session_id: str) -> list[RecordedMessage]:
    found = read_messages(app.facade().events, session_id)
    if not found:
        raise NoSuchSession(session_id)
    return found


@session.command()
@click.argument("session_id")
@json_option()
@click.pass_obj
def show(app: AppContext, session_id: str, as_json: bool) -> None:
    """The transcript of session SESSION_ID, oldest first."""
    found = _messages(app, session_id)
    if as_json:
        print_json(
            [
                {
                    "event_id": r.event_id,
                    "turn_id": r.turn_id,
                    **r.message.to_dict(),
                    "when": r.when,
                }
                for r in found
            ]
        )
        return
    for r in found:
        speaker = r.message.role + (f" ({r.message.name})" if r.message.name else "")
        console.print(Text(f"[{r.when}] ", style="dim") + Text(printable(speaker), style="bold"))
        console.print(Text(printable(r.message.content)))


@session.command()
@click.argument("session_id")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write to this file instead of standard output.",
)
@click.pass_obj
def export(app: AppContext, session_id: str, output: Path | None) -> None:
    """Session SESSION_ID as a JSON Lines transcript (what `import` reads).

    Each message's time is when it was said, else when Kairox recorded it.
    """
    text = "".join(transcript_line(r) + "\n" for r in _messages(app, session_id))
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
