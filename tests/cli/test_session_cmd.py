"""``kairox session``: import a transcript (all or nothing), list, show, export."""

from __future__ import annotations

import json

import pytest

from kairox.runtime.facade import AppFacade
from kairox.store.messages import read_messages
from tests.conftest import SESSION_PROFILES

TRANSCRIPT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi \x1b[2J there", "name": "Ann", "time": "2023-05-08T13:56:00Z"},
    {"role": "tool", "content": "21 degrees", "name": "weather", "time": "2023-05-08T13:56:05"},
    {"role": "assistant", "content": "It is 21.", "time": "2023-05-08T13:57:00+02:00"},
]


def write(path, lines):
    path.write_text("".join((json.dumps(x) if not isinstance(x, str) else x) + "\n" for x in lines))
    return path


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ("{not json", "line 3: not valid JSON"),
        ({"role": "robot", "content": "x"}, "line 3: unknown role 'robot'"),
        ({"role": "user", "content": "x", "time": "May 8th"}, "line 3: time 'May 8th' is not ISO"),
        ({"role": "user", "content": "x", "speaker": "Ann"}, "line 3: unknown key 'speaker'"),
        ({"role": "user"}, "line 3: missing content"),
    ],
)
def test_a_bad_line_imports_nothing(invoke, workspace, bad, said):
    path = write(workspace / "t.jsonl", [TRANSCRIPT[1], TRANSCRIPT[3], bad, TRANSCRIPT[1]])
    result = invoke("session", "import", str(path), "--session", "s1")
    assert result.exit_code == 2
    assert said in result.output and "nothing was imported" in result.output
    assert read_messages(AppFacade(cwd=workspace).events, "s1") == []


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_a_file_without_messages_is_refused_and_creates_no_session(invoke, workspace, content):
    path = workspace / "empty.jsonl"
    path.write_text(content)
    result = invoke("session", "import", str(path), "--session", "z")
    assert result.exit_code == 2, result.output
    assert "holds no messages" in result.output and "session 'z' was not created" in result.output
    assert invoke("session", "show", "z").exit_code == 1


def test_import_export_round_trip(invoke, workspace):
    path = write(workspace / "t.jsonl", [TRANSCRIPT[0], "", *TRANSCRIPT[1:]])  # a blank line
    imported = invoke("session", "import", str(path), "--session", "s1", "--json")
    assert imported.exit_code == 0, imported.output
    assert json.loads(imported.output)["imported"] == 4

    exported = invoke("session", "export", "s1")
    lines = [json.loads(line) for line in exported.output.splitlines()]
    assert [{k: v for k, v in m.items() if k != "time"} for m in lines] == [
        {k: v for k, v in m.items() if k != "time"} for m in TRANSCRIPT
    ]
    assert [m["time"] for m in lines[1:]] == [
        "2023-05-08T13:56:00+00:00",
        "2023-05-08T13:56:05",
        "2023-05-08T13:57:00+02:00",
    ]
    assert lines[0]["time"]  # none given: when it was recorded
    # What export writes, import reads back to the same transcript.
    again = write(workspace / "again.jsonl", [exported.output.rstrip("\n")])
    assert invoke("session", "import", str(again), "--session", "s2").exit_code == 0
    assert invoke("session", "export", "s2").output == exported.output


def test_list_and_show(invoke, workspace):
    assert invoke("session", "list").output.strip() == "no sessions in this workspace yet"
    invoke("session", "import", str(write(workspace / "t.jsonl", TRANSCRIPT)), "--session", "s1")
    listed = json.loads(invoke("session", "list", "--json").output)
    assert listed == [
        {
            "session": "s1",
            "messages": 4,
            "first": listed[0]["first"],  # the system message: when it was recorded
            "last": "2023-05-08T13:57:00+02:00",
        }
    ]
    shown = invoke("session", "show", "s1")
    assert "user (Ann)" in shown.output and "tool (weather)" in shown.output
    assert "Hi \\x1b[2J there" in shown.output and "\x1b" not in shown.output
    missing = invoke("session", "show", "nope")
    assert missing.exit_code == 1 and "kairox session list" in missing.output


def test_import_compacts_and_proposes_only_when_asked(invoke, workspace):
    (workspace / "kairox.toml").write_text(SESSION_PROFILES)
    said = []
    for i in range(10):
        said.append({"role": "user", "content": f"question {i} " + "about the plan " * 30})
        said.append({"role": "assistant", "content": f"answer {i} " + "the plan holds " * 30})
    said[1]["content"] += '<memory scope="user" key="plan">The plan holds.</memory>'
    path = write(workspace / "t.jsonl", said)
    plain = json.loads(
        invoke(
            "session", "import", str(path), "--session", "a", "--profile", "tiny", "--json"
        ).output
    )
    assert plain["memories"]["pending"] == []
    assert any(c["status"] == "completed" for c in plain["compactions"])
    marked = invoke("session", "import", str(path), "--session", "b", "--markers")
    assert marked.exit_code == 0 and "kairox memory approve" in marked.output
    assert [r.key for r in AppFacade(cwd=workspace).memories(pending=True)] == ["plan"]


def test_import_reads_stdin_and_names_a_line_that_is_not_utf8(invoke, workspace):
    lines = json.dumps(TRANSCRIPT[1]) + "\n" + json.dumps(TRANSCRIPT[3]) + "\n"
    piped = invoke("session", "import", "-", "--session", "piped", input=lines)
    assert piped.exit_code == 0 and "imported 2 messages" in piped.output
    with open(workspace / "latin1.jsonl", "wb") as handle:
        handle.write(lines.encode() + b'{"role": "user", "content": "caf\xe9"}\n')
    bad = invoke("session", "import", str(workspace / "latin1.jsonl"), "--session", "s2")
    assert bad.exit_code == 2 and "line 3: not UTF-8" in bad.output
    assert invoke("session", "import", "missing.jsonl", "--session", "s3").exit_code == 2
    assert [s["session"] for s in json.loads(invoke("session", "list", "--json").output)] == [
        "piped"
    ]
