"""``kairox context``: the prompt a turn would send, and what each context source cost."""

from __future__ import annotations

import asyncio
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from kairox.cli.app import AppContext, console, fold_long_values, print_json
from kairox.cli.options import json_option, profile_option
from kairox.support.terminal import printable


def assembly_json(assembly: Any) -> dict[str, Any]:
    return {
        "messages": [
            {"role": m.role, "content": m.content, **({"name": m.name} if m.name else {})}
            for m in assembly.messages
        ],
        "budget": assembly.budget,
        "used_tokens": assembly.used_tokens,
        "sources": assembly.trace()["sources"],
        "hits": assembly.trace()["hits"],
        "stages": assembly.stages,
    }


def latest_compaction(app: AppContext, session_id: str) -> dict[str, Any] | None:
    """The session's newest summary: its range, summariser, kept and dropped facts."""
    stored = app.facade().events.list(session_id=session_id, types=["CompactionSummary"])
    if not stored:
        return None
    payload = stored[-1].payload
    return {
        "summary_event_id": stored[-1].id,
        "first_event_id": payload["first_event_id"],
        "last_event_id": payload["last_event_id"],
        "summarizer": payload["summarizer"],
        "fallback": payload.get("fallback", False),
        "kept": payload.get("kept", []),
        "dropped": payload.get("dropped", []),
    }


def print_accounting(assembly: Any) -> None:
    table = Table("source", "tokens", "included", "dropped", "why dropped")
    fold_long_values(table)
    for source in assembly.sources:
        table.add_row(
            Text(source.source),
            str(source.tokens),
            str(source.included),
            str(source.dropped),
            Text("; ".join(source.reasons)),
        )
    console.print(table)
    hits = [hit for hit in assembly.hits if hit["included"]]
    if hits:
        found = Table("rank", "source", "hit", "document", "tokens")
        fold_long_values(found)
        for hit in hits:
            found.add_row(
                str(hit["rank"]),
                Text(hit["source"]),
                Text(hit["id"]),
                Text(str(hit["document"])),
                str(hit["tokens"]),
            )
        console.print(found)
    for stage in assembly.stages:
        line = f"{stage['stage']}: {stage['status']} · {stage['latency_ms']:.0f} ms"
        if stage["error"]:
            line += f" · {stage['error']}"
        console.print(Text(printable(line)))
    console.print(f"{assembly.used_tokens} of {assembly.budget} tokens used", markup=False)


@click.command()
@click.argument("prompt")
@profile_option()
@click.option("--session", "session_id", default=None, help="Include this session's history.")
@json_option("Print JSON (messages, budget, sources).")
@click.pass_obj
def context(
    app: AppContext, prompt: str, profile: str | None, session_id: str | None, as_json: bool
) -> None:
    """Show the messages a turn with PROMPT would send, and the token accounting."""
    from kairox.runtime.session import open_session

    async def build() -> Any:
        async with open_session(app.facade(), session_id, profile=profile) as session:
            return await session.assemble(prompt)

    assembly = asyncio.run(build())
    if as_json:
        data = assembly_json(assembly)
        if session_id is not None:
            data["compaction"] = latest_compaction(app, session_id)
        print_json(data)
        return
    for message in assembly.messages:
        console.print(Text(f"── {message.role} ──", style="bold"))
        console.print(Text(printable(message.content)))
    print_accounting(assembly)
