"""ContextAssembler properties: the budget guard or a prompt within budget, memory over history."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kairox.context.assembler import (
    DROP_NOT_APPROVED,
    AssemblyInput,
    BudgetExceeded,
    CompactionSummaryItem,
    ContextAssembler,
    HistoryTurn,
)
from kairox.memory.store import MemoryRecord
from kairox.support.models import ChatMessage

from .conftest import (
    ENCODINGS,
    account,
    base_cost,
    fits_exactly,
    history_part,
    hit,
    memory,
    recount,
)

words = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)
edgy = st.text(st.sampled_from(" \n\r\t./#-[]'sé😀09!日<|>"), max_size=40)
texts = words | edgy
keys = st.none() | st.sampled_from(["name", "deploy.target", "editor", "shell-kind", "a.b"])
timestamps = st.sampled_from(
    ["2020-01-01T00:00:00+00:00", "2023-05-05T12:00:00+00:00", "2024-12-31T23:59:59+00:00"]
)


@st.composite
def memories(draw: st.DrawFn) -> MemoryRecord:
    scope = draw(st.sampled_from(["user", "workspace", "session"]))
    return memory(
        draw(st.integers(1, 10_000)),
        draw(texts),
        scope=scope,
        key=draw(keys) if scope == "session" else draw(keys.filter(bool)),
        updated_at=draw(timestamps),
        status=draw(st.sampled_from(["approved"] * 4 + ["pending"])),
    )


hits = st.builds(
    hit, st.text("abcdef", min_size=1, max_size=5), texts, uri=st.none() | st.just("docs/x.md")
)


messages = st.builds(
    ChatMessage,
    st.sampled_from(["user", "assistant", "tool"]),
    texts,
    st.none() | st.just("search"),
)


@st.composite
def histories(draw: st.DrawFn, min_size: int = 0) -> list[HistoryTurn]:
    """Turns oldest first; event ids are unique per turn, as the event store guarantees."""
    size = draw(st.integers(min_size, 6))
    return [
        HistoryTurn(
            tuple(draw(st.lists(messages, min_size=1, max_size=4))),
            (2 * i, 2 * i + 1) if draw(st.booleans()) else (),
            draw(st.booleans()),
        )
        for i in range(size)
    ]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    encoding=st.sampled_from(ENCODINGS),
    system_prompt=texts,
    instructions=st.none() | texts,
    prompt=texts,
    mems=st.lists(memories(), max_size=5),
    summaries=st.lists(
        st.builds(CompactionSummaryItem, texts, st.integers(0, 99), st.integers(100, 199)),
        max_size=3,
    ),
    workspace_hits=st.lists(hits, max_size=4),
    kb_hits=st.dictionaries(st.sampled_from(["docs", "wiki"]), st.lists(hits, max_size=3)),
    history=histories(),
    context_window=st.integers(1, 1500),
    headroom_fraction=st.floats(0, 0.9),
    share=st.floats(0, 1),
)
def test_property_budget_guard_or_a_prompt_within_budget(
    encoding,
    system_prompt,
    instructions,
    prompt,
    mems,
    summaries,
    workspace_hits,
    kb_hits,
    history,
    context_window,
    headroom_fraction,
    share,
):
    headroom = int(context_window * headroom_fraction)
    built = ContextAssembler(
        encoding=encoding,
        context_window=context_window,
        headroom=headroom,
        max_hits_tokens_share=share,
    )
    data = AssemblyInput(
        system_prompt=system_prompt,
        prompt=prompt,
        memories=mems,
        summaries=summaries,
        workspace_hits=workspace_hits,
        knowledge_base_hits=kb_hits,
        history=history,
        instructions=instructions,
    )
    budget = context_window - headroom
    if base_cost(system_prompt, prompt, encoding, instructions) > budget:
        with pytest.raises(BudgetExceeded):
            built.assemble(data)
        return
    result = built.assemble(data)
    exact = recount(result.messages, encoding)
    assert exact <= budget == result.budget
    assert exact == result.used_tokens == sum(a.tokens for a in result.sources)
    assert result.messages[-1] == ChatMessage("user", prompt)
    # History is whole turns, a contiguous newest suffix, in chronological order.
    kept = account(result, "history").included
    newest = [m for t in history[len(history) - kept :] for m in t.messages]
    assert history_part(result) == newest
    # Every memory is accounted for, and pending ones are dropped as not approved.
    for scope in ("user", "workspace", "session"):
        of_scope = [m for m in mems if m.scope == scope]
        mem_account = account(result, f"memory:{scope}")
        assert mem_account.included + mem_account.dropped == len(of_scope)
        pending = [m for m in of_scope if m.status != "approved"]
        assert (DROP_NOT_APPROVED in mem_account.reasons) == bool(pending)
        assert mem_account.included <= len(of_scope) - len(pending)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    encoding=st.sampled_from(ENCODINGS),
    system_prompt=texts,
    prompt=texts,
    body=texts.filter(lambda b: b.strip()),
    history=histories(min_size=1),
    extra_fraction=st.floats(0, 1, exclude_max=True),
    headroom=st.integers(0, 500),
)
def test_property_an_approved_user_memory_beats_the_oldest_history(
    encoding, system_prompt, prompt, body, history, extra_fraction, headroom
):
    mem = memory(1, body, key="fact", updated_at="2024-01-01T00:00:00+00:00")
    # What the memory needs, counted independently on an assembly with no history at all.
    with_memory = fits_exactly(AssemblyInput(system_prompt, prompt, memories=[mem]), encoding)
    all_history = sum(recount(t.messages, encoding) - 3 for t in history)
    # Leave room for some of the history but never all of it: the oldest turn must go.
    budget = with_memory + int(extra_fraction * all_history)
    result = ContextAssembler(
        encoding=encoding, context_window=budget + headroom, headroom=headroom
    ).assemble(AssemblyInput(system_prompt, prompt, memories=[mem], history=history))
    assert f"- fact: {body}\n" in result.messages[0].content
    assert account(result, "memory:user").included == 1
    hist = account(result, "history")
    assert hist.dropped >= 1
    assert history_part(result) == [
        m for t in history[len(history) - hist.included :] for m in t.messages
    ]
    assert recount(result.messages, encoding) == result.used_tokens <= budget
    assert result.messages[-1] == ChatMessage("user", prompt)
