"""``kairox context`` and ``kairox chat`` (line mode, scripted backend, inline approval)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from kairox.memory.approvals import Proposer
from kairox.runtime.facade import AppFacade
from kairox.testing.processes import shell_process


def test_context_json_has_messages_budget_and_sources(invoke, workspace):
    (workspace / "kairox.toml").write_text(
        '[profiles.default]\ncontext_window = 4000\nheadroom = 500\nsystem_prompt = "Be brief."\n'
    )
    AppFacade(cwd=workspace).memory.set(
        "user", "tone", "terse answers", workspace_id=str(workspace)
    )
    result = invoke("context", "what is our tone?", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert set(data) >= {"messages", "budget", "used_tokens", "sources"}
    assert data["budget"] == 3500 and 0 < data["used_tokens"] <= 3500
    assert data["messages"][-1] == {"role": "user", "content": "what is our tone?"}
    assert "terse answers" in data["messages"][0]["content"]
    names = {s["source"] for s in data["sources"]}
    assert {"system", "memory:user", "prompt"} <= names
    table = invoke("context", "what is our tone?")
    assert table.exit_code == 0 and "memory:user" in table.output


def test_context_json_says_what_the_last_compaction_kept_and_dropped(invoke, workspace):
    from kairox.default_plugins.scripted_model import ScriptedModel
    from kairox.runtime.session import open_session
    from kairox.testing import run

    (workspace / "kairox.toml").write_text(
        "[profiles.default]\ncontext_window = 900\nheadroom = 100\n"
    )
    filler = "We went through the rollout notes again and nothing new came up. " * 5
    prompts = ["The API listens on port 8080.", "Move it to port 8081."]
    prompts += [f"Filler {i}: {filler}" for i in range(6)]

    async def go():
        model = ScriptedModel(["Noted. " + filler] * len(prompts))
        async with open_session(AppFacade(cwd=workspace), backend=model) as session:
            for prompt in prompts:
                await session.turn(prompt)
            return session.session_id

    session_id = run(go())
    result = invoke("context", "next", "--session", session_id, "--json")
    assert result.exit_code == 0, result.output
    compaction = json.loads(result.output)["compaction"]
    assert compaction["summarizer"] == "extractive"
    assert any("8081" in line for line in compaction["kept"])
    assert not any("8080" in line for line in compaction["kept"])
    # The compaction that saw the correction recorded what it superseded, and why.
    stored = AppFacade(cwd=workspace).events.list(
        session_id=session_id, types=["CompactionSummary"]
    )
    dropped = [d for event in stored for d in event.payload["dropped"]]
    assert any("8080" in d["fact"] and d["why"].startswith("superseded") for d in dropped)
    assert compaction["summary_event_id"] == stored[-1].id
    plain = invoke("context", "next", "--json")
    assert "compaction" not in json.loads(plain.output)


def test_context_refuses_a_prompt_over_budget(invoke, workspace):
    (workspace / "kairox.toml").write_text(
        "[profiles.default]\ncontext_window = 300\nheadroom = 100\n"
    )
    result = invoke("context", "word " * 500)
    assert result.exit_code == 1
    assert "budget" in result.output and "larger context window" in result.output


def test_chat_line_mode_with_inline_approval(invoke, workspace, tmp_path):
    script = tmp_path / "replies.jsonl"
    script.write_text(
        json.dumps(
            {
                "reply": 'Noted! <memory scope="workspace" key="deploy.day">Fridays are frozen.</memory>'
            }
        )
        + "\n"
        + json.dumps({"reply": "Second answer."})
        + "\n"
    )
    (workspace / "kairox.toml").write_text(
        "[profiles.default]\n[profiles.small]\ncontext_window = 4000\n"
    )
    lines = "\n".join(
        [
            "we never deploy on Fridays",
            "a",
            "/trace",
            "and then?",
            "/compact",
            "/profile small",
            "/nope",
            "/quit",
        ]
    )
    result = invoke("chat", "--script", str(script), input=lines + "\n")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Noted!" in out and "<memory" not in out
    assert "remember this? [workspace] deploy.day" in out
    assert "approved workspace memory deploy.day" in out
    assert "tokens used" in out  # the /trace accounting
    assert "Second answer." in out
    assert "compaction skipped" in out
    assert "switched to small" in out
    assert "unknown command /nope" in out
    facade = AppFacade(cwd=workspace)
    assert (
        facade.memory.find("deploy.day", workspace_id=facade.workspace_id).body
        == "Fridays are frozen."
    )


def test_chat_reports_a_backend_error_and_goes_on(invoke, workspace, tmp_path):
    script = tmp_path / "replies.jsonl"
    script.write_text(
        json.dumps({"error": "model overloaded"}) + "\n" + json.dumps({"reply": "ok now"}) + "\n"
    )
    result = invoke("chat", "--script", str(script), input="first\nsecond\n/quit\n")
    assert result.exit_code == 0, result.output
    assert "model overloaded" in result.output and "ok now" in result.output


def test_a_key_echoed_in_an_error_body_is_masked(invoke, workspace, monkeypatch):
    from kairox.testing.openai_server import OpenAITestServer

    key = "sk-live-0123456789abcdef"
    monkeypatch.setenv("CHAT_TEST_KEY", key)
    with OpenAITestServer(["never"], api_key=key) as server:
        (workspace / "kairox.toml").write_text(
            f'[profiles.default]\nbase_url = "{server.base_url}"\napi_key_env = "CHAT_TEST_KEY"\n'
        )
        # A server that echoes the request headers in its error body, as some proxies do.
        server.fail(400, message=f"bad request; headers: Authorization: Bearer {key}")
        result = invoke("chat", input="hello\n/quit\n")
    assert result.exit_code == 0, result.output
    assert "bad request; headers: Authorization: Bearer ***" in result.output
    assert key not in result.output


def test_context_takes_knowledge_base_chunks_not_whole_documents(invoke, workspace):
    """A 15k-character runbook in a knowledge base reaches an 8k prompt as chunks."""
    (workspace / "ops").mkdir()
    steps = [
        f"## Step {n}\n\n"
        + " ".join(f"Retry failed uploads from queue {n} after check {m}." for m in range(22))
        for n in range(14)
    ]
    runbook = "# Upload runbook\n\n" + "\n\n".join(steps) + "\n"
    assert len(runbook) > 15_000
    (workspace / "ops" / "runbook.md").write_text(runbook)
    (workspace / "kairox.toml").write_text(
        "[profiles.default]\ncontext_window = 8192\nheadroom = 1000\n"
        '[knowledge_bases.ops]\nkind = "sqlite-fts"\npath = "state/ops.db"\n'
        "chunk_tokens = 200\nchunk_overlap = 20\n"
    )
    ingested = invoke("kb", "ingest", "ops", "ops", "--json")
    assert ingested.exit_code == 0, ingested.output
    assert json.loads(ingested.output)["chunks_written"] > 10

    result = invoke("context", "how do I retry failed uploads from queue 9?", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    hits = [h for h in data["hits"] if h["source"] == "ops" and h["included"]]
    assert hits
    from kairox.context.tokens import TokenCounter

    label_cost = TokenCounter("o200k_base").count(f"### {hits[0]['label']} (ops)\n")
    for hit in hits:
        assert hit["document"] == "ops/runbook.md"  # the trace names the chunk's document
        assert hit["id"].startswith("ops/runbook.md#")
        assert hit["tokens"] <= 200 + label_cost + 2  # the chunk plus its heading line
    [account] = [s for s in data["sources"] if s["source"] == "knowledge_base:ops"]
    assert account["tokens"] < len(hits) * (200 + label_cost + 8)
    table = invoke("context", "how do I retry failed uploads from queue 9?")
    assert "ops/runbook.md#" in table.output


def test_chat_says_why_a_marker_was_not_kept_and_what_it_restated(invoke, workspace, tmp_path):
    (workspace / "kairox.toml").write_text("[memory]\nmax_body_chars = 40\n")
    AppFacade(cwd=workspace).memory.set(
        "workspace", "deploy.day", "Fridays are frozen.", workspace_id=str(workspace)
    )
    replies = [
        'Noted.<memory scope="session">' + "x" * 2_000_000 + "</memory>",
        'Sure.<memory scope="workspace" key="deploy.day">fridays are FROZEN</memory>',
    ]
    script = tmp_path / "replies.jsonl"
    script.write_text("".join(json.dumps({"reply": r}) + "\n" for r in replies))
    result = invoke("chat", "--script", str(script), input="one\ntwo\n/quit\n")
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())  # the console wraps long lines
    assert (
        "a memory proposal was not kept: the body is 2000000 characters long "
        "(at most 40, [memory] max_body_chars)" in out
    )
    assert "already remembered: workspace memory deploy.day" in out and "not queued again" in out
    assert "remember this?" not in out
    facade = AppFacade(cwd=workspace)
    assert facade.memories(scope="session") == [] and facade.memories(pending=True) == []


def test_superseded_memories_never_reach_the_prompt(invoke, workspace):
    facade = AppFacade(cwd=workspace)
    ws = facade.workspace_id
    facade.memory.set("user", "editor.font", "JetBrains Mono 14px.", workspace_id=ws)
    facade.memory.set("user", "editor.font", "Fira Code 13px.", workspace_id=ws)
    proposal = facade.memory.propose(
        "workspace",
        "Deploy on Tuesdays.",
        key="deploy.day",
        by=Proposer("chat-1", ws, "api"),
    ).pending[0]
    facade.memory.set("workspace", "deploy.day", "Deploy on Mondays.", workspace_id=ws)
    facade.memory.approve(proposal.id)  # supersedes Mondays
    facade.memory.edit("deploy.day", "Deploy on Wednesdays.", workspace_id=ws)
    assert len(facade.memory.history("deploy.day", workspace_id=ws)) == 3

    result = invoke("context", "which font and which deploy day?", "--json")
    assert result.exit_code == 0, result.output
    prompt = json.dumps(json.loads(result.output)["messages"])
    assert "Fira Code 13px." in prompt and "Deploy on Wednesdays." in prompt
    for old in ("JetBrains Mono", "Mondays", "Tuesdays"):
        assert old not in prompt


def test_the_documented_chat_script_example_runs_as_written(workspace):
    # docs/sessions-and-memory.md documents the --script file format with a runnable
    # example: run it.
    guide = Path(__file__).resolve().parents[2] / "docs" / "sessions-and-memory.md"
    text = guide.read_text(encoding="utf-8")
    section = text[text.index("`--script FILE` (in `kairox chat`") :]
    block = section[section.index("```bash\n") + len("```bash\n") : section.index("\n```\n")]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    ran = shell_process(block, cwd=workspace, env=env)
    assert ran.returncode == 0, ran.stderr
    assert "You edit in Vim, as you told me." in ran.stdout
    facade = AppFacade(cwd=workspace)
    try:
        [memory] = facade.memories()
    finally:
        facade.close()
    assert (memory.key, memory.body) == ("editor", "The user edits in Vim.")
