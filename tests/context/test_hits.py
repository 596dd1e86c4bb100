"""kairox.context.hits: retrieval hits in the prompt, per group or in fusion's order, capped."""

from __future__ import annotations

from kairox.context.assembler import DROP_BUDGET, DROP_HITS_CAP, AssemblyInput

from .conftest import BIG, account, assembler, check_budget, fits_exactly, hit, turn


def test_knowledge_base_hits_come_only_from_what_is_given():
    data = AssemblyInput(
        "sys",
        "go",
        workspace_hits=[hit("w1", "workspace text", uri="a.py")],
        knowledge_base_hits={
            "manual": [hit("m1", "first manual hit"), hit("m2", "second manual hit")],
            "wiki": [],
        },
    )
    result = assembler(BIG).assemble(data)
    content = result.messages[0].content
    assert "## Context from manual\n" in content
    assert "## Context from wiki" not in content  # no hits, no empty section
    assert content.index("workspace text") < content.index("first manual hit")
    assert content.index("first manual hit") < content.index("second manual hit")
    kb_sources = [a.source for a in result.sources if a.source.startswith("knowledge_base:")]
    assert kb_sources == ["knowledge_base:manual", "knowledge_base:wiki"]
    assert account(result, "knowledge_base:manual").included == 2
    assert account(result, "knowledge_base:wiki").tokens == 0
    check_budget(result)


def test_a_hit_that_does_not_fit_is_dropped_for_budget():
    small, huge = hit("s", "small hit"), hit("h", "huge hit " * 200, uri="big.md")
    room = fits_exactly(AssemblyInput("sys", "go", workspace_hits=[small])) + 5
    result = assembler(room).assemble(AssemblyInput("sys", "go", workspace_hits=[huge, small]))
    assert "small hit" in result.messages[0].content
    ws = account(result, "workspace_retrieval")
    assert (ws.included, ws.dropped_items, ws.reasons) == (1, ("big.md",), (DROP_BUDGET,))
    check_budget(result)


def test_hits_are_capped_when_history_wants_the_space():
    hits = [hit(f"h{i}", f"retrieved passage number {i} " * 10) for i in range(10)]
    history = [turn(i, 10) for i in range(30)]
    budget = 1000
    no_history = assembler(budget).assemble(AssemblyInput("sys", "go", workspace_hits=hits))
    assert account(no_history, "workspace_retrieval").included == 10  # no pressure, no cap

    data = AssemblyInput("sys", "go", workspace_hits=hits, history=history)
    result = assembler(budget).assemble(data)
    ws = account(result, "workspace_retrieval")
    assert 0 < ws.included < 10
    assert ws.tokens <= 0.25 * budget
    assert ws.reasons == (DROP_HITS_CAP,)
    assert account(result, "history").included > 0
    check_budget(result)

    half = assembler(budget, max_hits_tokens_share=0.5).assemble(data)
    assert account(half, "workspace_retrieval").included > ws.included
    check_budget(half)


def test_the_fused_ranking_is_kept_across_groups_within_the_budget():
    # Fusion ranked a knowledge-base hit first, then the workspace, then the kb again.
    ranked = [
        hit("k1", "kb first " * 20, source="wiki"),
        hit("w1", "workspace second " * 20, uri="a.py", source="workspace"),
        hit("k2", "kb third " * 20, source="wiki"),
        hit("w2", "workspace fourth " * 20, uri="b.py", source="workspace-fts"),
    ]
    groups = {"wiki": "knowledge_base", "workspace": "workspace", "workspace-fts": "workspace"}
    full = assembler(BIG).assemble(AssemblyInput("sys", "go", hits=ranked, groups=groups))
    content = full.messages[0].content
    # Sections in the order of their best hit; hits in fusion's order inside each.
    assert content.index("## Context from wiki") < content.index("## Context from the workspace")
    assert content.index("kb first") < content.index("kb third")
    assert [h["source"] for h in full.trace()["hits"]] == [
        "wiki",
        "workspace",
        "wiki",
        "workspace-fts",
    ]
    # With room for two hits, the two best of the fused ranking stay, whatever the group.
    two = fits_exactly(AssemblyInput("sys", "go", hits=ranked[:2], groups=groups))
    tight = assembler(two).assemble(AssemblyInput("sys", "go", hits=ranked, groups=groups))
    kept = [h["label"] for h in tight.trace()["hits"] if h["included"]]
    assert kept == ["k1", "a.py"]
    assert account(tight, "knowledge_base:wiki").dropped_items == ("k2",)
    assert account(tight, "workspace_retrieval").dropped_items == ("b.py",)
    assert tight.tainted_by == ["knowledge_base:wiki", "workspace:workspace"]
    check_budget(tight)
