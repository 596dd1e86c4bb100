"""Helpers for the context tests: an independent recount, the records, a sized assembler.

Every budget check recounts the assembled messages *independently* with tiktoken (see
:func:`recount`) instead of trusting the assembler's own numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

from kairox.context.assembler import (
    Assembly,
    AssemblyInput,
    ContextAssembler,
    HistoryTurn,
    SourceAccount,
)
from kairox.context.tokens import get_encoding
from kairox.memory.store import MemoryRecord
from kairox.retrieval.model import FusedHit, Provenance
from kairox.support.models import ChatMessage

ENCODINGS = ["o200k_base", "cl100k_base"]
BIG = 100_000


def recount(messages: Sequence[ChatMessage], encoding: str) -> int:
    """OpenAI chat accounting, written out here on purpose rather than imported.

    3 tokens of framing per message, plus role, content and (name + 1); 3 tokens of reply
    priming once per request.
    """
    enc = get_encoding(encoding)

    def n(text: str) -> int:
        return len(enc.encode(text, disallowed_special=()))

    total = 3
    for message in messages:
        total += 3 + n(message.role) + n(message.content)
        if message.name:
            total += 1 + n(message.name)
    return total


def base_cost(system_prompt: str, prompt: str, encoding: str, instructions: str | None) -> int:
    """What the budget guard checks: the bare system message (if any) and the prompt."""
    base = "\n\n".join(p for p in (system_prompt, instructions) if p)
    messages = [ChatMessage("system", base)] if base else []
    return recount([*messages, ChatMessage("user", prompt)], encoding)


def memory(
    id: int,
    body: str,
    *,
    scope: str = "user",
    key: str | None = "note",
    updated_at: str = "2024-01-01T00:00:00+00:00",
    status: str = "approved",
) -> MemoryRecord:
    return MemoryRecord(
        id=id,
        scope=scope,
        key=key,
        body=body,
        status=status,
        workspace_id="ws" if scope != "user" else None,
        session_id="s1" if scope == "session" else None,
        created_at=updated_at,
        updated_at=updated_at,
        approved_at=updated_at if scope != "session" else None,
    )


def hit(id: str, text: str, *, uri: str | None = None, source: str = "fts") -> FusedHit:
    return FusedHit(id, text, 1.0, uri, {}, (Provenance(source, 1, 1.0),))


def turn(i: int, words: int = 5, *, tool: bool = False) -> HistoryTurn:
    messages = [
        ChatMessage("user", f"question {i} " * words),
        ChatMessage("assistant", f"answer {i} " * words),
    ]
    if tool:
        messages.append(ChatMessage("tool", f"tool output {i}", name="grep"))
    return HistoryTurn(tuple(messages), (10 * i, 10 * i + 1), had_tool_output=tool)


def assembler(budget: int, encoding: str = "o200k_base", **kwargs) -> ContextAssembler:
    headroom = kwargs.pop("headroom", 7)
    return ContextAssembler(
        encoding=encoding, context_window=budget + headroom, headroom=headroom, **kwargs
    )


def account(result: Assembly, source: str) -> SourceAccount:
    return next(a for a in result.sources if a.source == source)


def history_part(result: Assembly) -> list[ChatMessage]:
    """The messages between the system message (if any) and the prompt."""
    start = 1 if result.messages[0].role == "system" else 0
    return result.messages[start:-1]


def check_budget(result: Assembly, encoding: str = "o200k_base") -> None:
    exact = recount(result.messages, encoding)
    assert result.used_tokens == exact
    assert exact <= result.budget
    assert sum(a.tokens for a in result.sources) == result.used_tokens


def fits_exactly(data: AssemblyInput, encoding: str = "o200k_base") -> int:
    """The independent cost of ``data`` assembled with room to spare for everything."""
    result = assembler(BIG, encoding).assemble(data)
    assert all(a.dropped == 0 for a in result.sources)
    return recount(result.messages, encoding)


def every_source(kb: str) -> list[str]:
    """Every source an assembly accounts for, in the trace's order, with knowledge base ``kb``."""
    return [
        "system",
        "memory:user",
        "memory:workspace",
        "memory:session",
        "compaction_summary",
        "workspace_retrieval",
        f"knowledge_base:{kb}",
        "recall",
        "history",
        "prompt",
    ]
