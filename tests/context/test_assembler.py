"""ContextAssembler: priority, whole turns, the budget guard, history, summaries, caching.

Helpers (and the independent recount every budget check uses) are in ``conftest.py``.
"""

from __future__ import annotations

import pytest

from kairox.config.schema import ProfileConfig
from kairox.context import tokens
from kairox.context.assembler import (
    DROP_BUDGET,
    DROP_OLDER_HISTORY,
    AssemblyInput,
    BudgetExceeded,
    CompactionSummaryItem,
    ContextAssembler,
    HistoryTurn,
)
from kairox.context.tokens import TokenCounter
from kairox.support.errors import KairoxError
from kairox.support.models import ChatMessage

from .conftest import (
    BIG,
    ENCODINGS,
    account,
    assembler,
    base_cost,
    check_budget,
    every_source,
    fits_exactly,
    history_part,
    hit,
    memory,
    recount,
    turn,
)

# -- layout and priority ----------------------------------------------------------------------


def test_layout_puts_every_source_in_priority_order():
    data = AssemblyInput(
        system_prompt="You are Kairox.",
        instructions="Answer in English.",
        prompt="What now?",
        memories=[
            memory(1, "likes tea", scope="session", key=None),
            memory(2, "repo uses uv", scope="workspace", key="tooling"),
            memory(3, "name is Ada", key="name"),
        ],
        summaries=[CompactionSummaryItem("the user set up the repo", 1, 9)],
        workspace_hits=[hit("w1", "def main(): ...", uri="src/main.py")],
        knowledge_base_hits={"docs": [hit("d1", "Install with pip.", source="docs-fts")]},
        history=[turn(1), turn(2)],
    )
    result = assembler(BIG).assemble(data)
    system = result.messages[0]
    assert system.role == "system"
    order = [
        "You are Kairox.",
        "Answer in English.",
        "## Memory (user)\n- name: name is Ada\n",
        "## Memory (workspace)\n- tooling: repo uses uv\n",
        "## Memory (session)\n- likes tea\n",
        "## Summary of earlier conversation\n[events 1-9]\nthe user set up the repo\n",
        "## Context from the workspace\n### src/main.py (fts)\ndef main(): ...\n",
        "## Context from docs\n### d1 (docs-fts)\nInstall with pip.\n",
    ]
    positions = [system.content.index(part) for part in order]
    assert positions == sorted(positions)
    assert system.content.startswith("You are Kairox.\n\nAnswer in English.\n\n")
    assert history_part(result) == [*turn(1).messages, *turn(2).messages]
    assert result.messages[-1] == ChatMessage("user", "What now?")
    assert [a.source for a in result.sources] == every_source("docs")
    check_budget(result)


def test_bare_system_prompt_is_sent_verbatim():
    result = assembler(BIG).assemble(AssemblyInput("  Be terse.  ", "hi"))
    assert result.messages == [ChatMessage("system", "  Be terse.  "), ChatMessage("user", "hi")]
    check_budget(result)


def test_no_system_message_without_system_text():
    result = assembler(BIG).assemble(AssemblyInput("", "hi"))
    assert result.messages == [ChatMessage("user", "hi")]
    with_memory = assembler(BIG).assemble(AssemblyInput("", "hi", memories=[memory(1, "x y")]))
    assert with_memory.messages[0].content == "## Memory (user)\n- note: x y\n"
    check_budget(result)
    check_budget(with_memory)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_prompt_is_verbatim_and_last(encoding):
    prompt = "  <|endoftext|> naïve 日本語 😀\n\ttrailing  \n"
    data = AssemblyInput("sys", prompt, history=[turn(1)], memories=[memory(1, "m")])
    result = assembler(BIG, encoding).assemble(data)
    assert result.messages[-1] == ChatMessage("user", prompt)
    check_budget(result, encoding)


# -- the budget guard -------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_budget_guard_refuses_when_system_and_prompt_do_not_fit(encoding):
    system_prompt, prompt = "You are a careful assistant.", "Summarise the design. " * 5
    needed = base_cost(system_prompt, prompt, encoding, "Be brief.")
    data = AssemblyInput(system_prompt, prompt, instructions="Be brief.", history=[turn(1)])

    exact = assembler(needed, encoding, headroom=100).assemble(data)
    assert exact.used_tokens == needed == recount(exact.messages, encoding)
    assert history_part(exact) == []

    with pytest.raises(BudgetExceeded) as info:
        assembler(needed - 1, encoding, headroom=100).assemble(data)
    error = info.value
    assert isinstance(error, KairoxError)
    assert isinstance(error, ValueError)
    assert (error.needed, error.budget) == (needed, needed - 1)
    message = str(error)
    assert f"need {needed} tokens" in message
    assert f"budget is {needed - 1} (context_window {needed + 99} - headroom 100)" in message
    assert "shorten the prompt or pick a profile with a larger context window" in message


# -- history ----------------------------------------------------------------------------------


def test_history_is_whole_turns_newest_first_without_gaps():
    history = [turn(0, 2), turn(1, 30), turn(2, 3), turn(3, 3)]
    costs = [recount(t.messages, "o200k_base") - 3 for t in history]
    fixed = base_cost("sys", "go", "o200k_base", None)
    # Room for the two newest turns plus most of turn 1, and easily for the small turn 0.
    budget = fixed + costs[3] + costs[2] + costs[1] - 1
    assert costs[0] < costs[1] - 1
    result = assembler(budget).assemble(AssemblyInput("sys", "go", history=history))
    assert history_part(result) == [*history[2].messages, *history[3].messages]
    hist = account(result, "history")
    assert (hist.included, hist.dropped) == (2, 2)
    assert hist.reasons == (DROP_OLDER_HISTORY,)
    assert hist.dropped_items == ("events 0-11 (2 turns)",)  # one range, however long
    assert hist.tokens == costs[2] + costs[3]
    check_budget(result)


def test_a_turn_is_never_split():
    big = HistoryTurn(
        (ChatMessage("user", "short"), ChatMessage("assistant", "long answer " * 50)), (1, 2)
    )
    fixed = base_cost("sys", "go", "o200k_base", None)
    result = assembler(fixed + 20).assemble(AssemblyInput("sys", "go", history=[big]))
    assert history_part(result) == []
    assert account(result, "history").dropped == 1


def test_had_tool_output_reflects_the_kept_history():
    data = AssemblyInput("sys", "go", history=[turn(1, tool=True), turn(2)])
    assert assembler(BIG).assemble(data).had_tool_output
    fixed = base_cost("sys", "go", "o200k_base", None)
    only_newest = fixed + recount(turn(2).messages, "o200k_base") - 3
    result = assembler(only_newest).assemble(data)
    assert history_part(result) == list(turn(2).messages)
    assert not result.had_tool_output
    assert result.trace()["had_tool_output"] is False


def test_a_long_dropped_history_is_one_range_in_the_trace():
    history = [turn(i, 20) for i in range(2_000)]
    budget = fits_exactly(AssemblyInput("sys", "go", history=history[-3:]))
    result = assembler(budget).assemble(AssemblyInput("sys", "go", history=history))
    hist = account(result, "history")
    assert (hist.included, hist.dropped) == (3, 1_997)
    assert hist.dropped_items == (f"events 0-{10 * 1_996 + 1} (1997 turns)",)


def test_a_dropped_history_without_event_ids_is_a_range_of_turns():
    history = [HistoryTurn(t.messages) for t in (turn(i, 20) for i in range(5))]
    budget = fits_exactly(AssemblyInput("sys", "go", history=history[-1:]))
    result = assembler(budget).assemble(AssemblyInput("sys", "go", history=history))
    assert account(result, "history").dropped_items == ("turns 0-3 (4 turns)",)


# -- summaries --------------------------------------------------------------------------------


def test_summaries_are_kept_before_old_history():
    summary = CompactionSummaryItem("Goal: ship v1. Decided: SQLite.", 1, 40)
    history = [turn(i) for i in range(5)]
    with_summary = fits_exactly(AssemblyInput("sys", "go", summaries=[summary]))
    result = assembler(with_summary).assemble(
        AssemblyInput("sys", "go", summaries=[summary], history=history)
    )
    assert "Goal: ship v1. Decided: SQLite." in result.messages[0].content
    assert history_part(result) == []
    assert account(result, "history").dropped == 5
    check_budget(result)


def test_newest_summary_wins_when_tight_and_they_render_oldest_first():
    old = CompactionSummaryItem("old summary " * 3, 1, 10)
    new = CompactionSummaryItem("new summary " * 3, 11, 20)
    room_for_one = fits_exactly(AssemblyInput("sys", "go", summaries=[old]))
    result = assembler(room_for_one).assemble(AssemblyInput("sys", "go", summaries=[old, new]))
    assert "new summary" in result.messages[0].content
    assert "old summary" not in result.messages[0].content
    summaries = account(result, "compaction_summary")
    assert (summaries.dropped_items, summaries.reasons) == (("events 1-10",), (DROP_BUDGET,))
    both = assembler(BIG).assemble(AssemblyInput("sys", "go", summaries=[old, new]))
    content = both.messages[0].content
    assert content.index("old summary") < content.index("new summary")


# -- caching and the safety net ---------------------------------------------------------------


def test_growing_history_counts_only_the_new_turn(monkeypatch):
    counter = TokenCounter("o200k_base")
    assemble = ContextAssembler(
        encoding="o200k_base", context_window=BIG, headroom=0, counter=counter
    ).assemble
    history = [turn(i, 20) for i in range(6)]

    def data(turns: int) -> AssemblyInput:
        return AssemblyInput(
            "sys", "go", memories=[memory(1, "m")], history=history[:turns], summaries=()
        )

    assemble(data(5))
    encoded: list[str] = []
    real = tokens.count_tokens

    def spy(text: str, encoding: str = "o200k_base") -> int:
        encoded.append(text)
        return real(text, encoding)

    monkeypatch.setattr(tokens, "count_tokens", spy)
    misses = counter.misses
    result = assemble(data(6))
    new_turn = history[5].messages
    assert counter.misses - misses == len(new_turn)
    assert encoded == [text for m in new_turn for text in (m.role, m.content)]
    assert account(result, "history").included == 6

    misses = counter.misses
    assemble(data(6))
    assert counter.misses == misses


def test_safety_net_keeps_the_budget_if_pieces_ever_stop_adding_up():
    class Underestimating(TokenCounter):
        """Claims memory lines are free, as a broken tokenizer assumption would."""

        def count(self, text, key=None):
            return 0 if text.startswith("- ") else super().count(text, key)

    memories = [memory(i, f"memory body number {i} " * 5, key=f"k{i}") for i in range(10)]
    budget = fits_exactly(AssemblyInput("sys", "go", memories=memories[:3]))
    result = ContextAssembler(
        encoding="o200k_base",
        context_window=budget + 1,
        headroom=1,
        counter=Underestimating("o200k_base"),
    ).assemble(AssemblyInput("sys", "go", memories=memories))
    assert recount(result.messages, "o200k_base") == result.used_tokens <= budget
    user = account(result, "memory:user")
    assert 0 < user.included < 10
    assert DROP_BUDGET in user.reasons


# -- construction -----------------------------------------------------------------------------


def test_for_profile_uses_the_profile_numbers():
    profile = ProfileConfig(encoding="cl100k_base", context_window=8000, headroom=1000)
    built = ContextAssembler.for_profile(profile)
    assert (built.encoding, built.budget, built.counter.encoding) == (
        "cl100k_base",
        7000,
        "cl100k_base",
    )
    shared = TokenCounter("cl100k_base")
    assert ContextAssembler.for_profile(profile, shared).counter is shared


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"context_window": 100, "headroom": 100}, "headroom"),
        ({"context_window": 100, "headroom": -1}, "headroom"),
        ({"context_window": 0, "headroom": 0}, "context_window"),
        ({"max_hits_tokens_share": 1.5}, "max_hits_tokens_share"),
        ({"counter": TokenCounter("cl100k_base")}, "cl100k_base"),
    ],
)
def test_bad_settings_are_refused(kwargs, match):
    settings_ = {"encoding": "o200k_base", "context_window": 100, "headroom": 10, **kwargs}
    with pytest.raises(ValueError, match=match):
        ContextAssembler(**settings_)
