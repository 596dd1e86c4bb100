"""``kairox chat``: a line-mode chat with inline memory approval and compaction."""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.text import Text

from kairox.cli.app import AppContext, console, console_err
from kairox.cli.context_cmd import print_accounting
from kairox.cli.options import profile_option
from kairox.support.terminal import printable

if TYPE_CHECKING:
    from kairox.runtime.facade import AppFacade
    from kairox.support.models import ModelBackend

HELP = (
    "commands: /compact (summarise old history), /profile NAME, /trace (last prompt's "
    "accounting), /pending, /quit"
)


async def _ask(question: str) -> str | None:
    try:
        return await asyncio.to_thread(input, question)
    except EOFError:
        return None


async def _review(session: Any, pending: list[Any]) -> None:
    """Inline approval: a / r / s for each pending proposal of the turn."""
    for record in pending:
        warning = (
            f" ⚠ proposed after {printable(', '.join(record.tainted_by))} was in the prompt: "
            "could be prompt injection"
            if record.injection_warning
            else ""
        )
        console.print(
            Text(f"remember this? [{record.scope}] {record.key or '(no key)'}: ", style="bold")
            + Text(printable(record.body))
            + Text(warning, style="yellow")
        )
        while True:
            answer = await _ask("  (a)pprove / (r)eject / (s)kip: ")
            choice = (answer or "s").strip().lower()[:1]
            if choice == "a":
                session.facade.memory.approve(record.id, actor="cli")
                console.print(f"  approved {record.scope} memory {record.key}", markup=False)
            elif choice == "r":
                session.facade.memory.reject(record.id, actor="cli")
                console.print("  rejected", markup=False)
            elif choice == "s":
                console.print("  left pending (kairox memory list --pending)", markup=False)
            else:
                continue
            break


async def chat_loop(session: Any) -> None:
    last = None
    console.print(
        f"kairox chat · profile {session.profile_name} · session {session.session_id}", markup=False
    )
    console.print(HELP, markup=False)
    while True:
        line = await _ask("you> ")
        if line is None:
            break
        line = line.strip()
        if not line:
            continue
        if line in ("/quit", "/exit"):
            break
        if line == "/compact":
            result = await session.compact()
            console.print(
                f"compaction {result.status}"
                + (f": {result.reason}" if result.reason else "")
                + (
                    f" ({result.tokens_before} → {result.tokens_after} tokens)"
                    if result.status == "completed"
                    else ""
                ),
                markup=False,
            )
            continue
        if line.startswith("/profile"):
            name = line.partition(" ")[2].strip()
            if not name:
                console.print(f"profile: {session.profile_name}", markup=False)
                continue
            console.print(f"switched to {await session.switch_profile(name)}", markup=False)
            continue
        if line == "/trace":
            if last is None:
                console.print("no turn yet", markup=False)
            else:
                print_accounting(last.assembly)
            continue
        if line == "/pending":
            await _review(session, session.facade.memory.pending(session.facade.workspace_id))
            continue
        if line.startswith("/"):
            console.print(f"unknown command {line.split()[0]}; {HELP}", markup=False)
            continue
        sys.stdout.write("kairox> ")
        try:
            last = await session.turn(
                line, on_text=lambda text: (sys.stdout.write(printable(text)), sys.stdout.flush())
            )
        except Exception as exc:
            sys.stdout.write("\n")
            console_err.print(f"error: {type(exc).__name__}: {exc}", markup=False)
            continue
        sys.stdout.write("\n")
        if last.compaction is not None and last.compaction.status != "skipped":
            console.print(f"(history compacted: {last.compaction.status})", markup=False)
        _report(last.proposals)
        await _review(session, last.proposals.pending)


def _report(proposals: Any) -> None:
    """Why a memory marker of the turn was not kept, and which ones restated a memory."""
    for _raw, reason in proposals.rejected:
        console.print(
            Text("a memory proposal was not kept: ", style="yellow") + Text(printable(reason))
        )
    for record in proposals.merged:
        console.print(
            Text(
                f"already {'remembered' if record.status == 'approved' else 'proposed'}: "
                f"{record.scope} memory {printable(record.key or '')} (#{record.id}), "
                "not queued again"
            )
        )


@dataclass(frozen=True)
class ChatOptions:
    """What ``--profile``, ``--backend``, ``--script`` and ``--session`` asked for."""

    profile: str | None = None
    backend: str | None = None
    script: Path | None = None
    session_id: str | None = None

    def resolved(self, facade: AppFacade) -> tuple[str, ModelBackend | None]:
        """The profile's name and the backend asked for (``None`` keeps the profile's)."""
        name = facade.resolve_profile(self.profile)
        return name, chosen_backend(facade, name, self.backend, self.script)


def chat_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options ``kairox chat`` and ``kairox tui`` share, given as one :class:`ChatOptions`."""

    @functools.wraps(command)
    def with_options(
        *args: Any,
        profile: str | None,
        backend: str | None,
        script: Path | None,
        session_id: str | None,
        **kwargs: Any,
    ) -> Any:
        return command(*args, ChatOptions(profile, backend, script, session_id), **kwargs)

    for option in reversed(
        [
            profile_option(),
            click.option("--backend", default=None, help="Model backend (default: the profile's)."),
            click.option(
                "--script",
                type=click.Path(exists=True, dir_okay=False, path_type=Path),
                help="Replies for the scripted backend (JSONL or '---'-separated text).",
            ),
            click.option("--session", "session_id", default=None, help="Continue this session."),
        ]
    ):
        with_options = option(with_options)
    return with_options


def chosen_backend(
    facade: AppFacade, profile: str, backend: str | None, script: Path | None
) -> ModelBackend | None:
    """The backend ``--backend``/``--script`` ask for; ``None`` keeps the profile's."""
    if backend is None and script is None:
        return None
    chosen = facade.config.profiles[profile].model_copy(update={"backend": backend or "scripted"})
    return facade.model_backend(chosen, **({"script": script} if script else {}))


@click.command()
@chat_options
@click.pass_obj
def chat(app: AppContext, options: ChatOptions) -> None:
    """Chat with the profile's model; approve proposed memories inline with a / r."""
    from kairox.runtime.session import open_session

    facade = app.facade()
    name, model = options.resolved(facade)

    async def run() -> None:
        async with open_session(facade, options.session_id, profile=name, backend=model) as session:
            await chat_loop(session)

    asyncio.run(run())
