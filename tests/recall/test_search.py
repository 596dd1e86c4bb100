"""Recall's ranking and scope: whose messages, which neighbours, what a turn's prompt holds."""

from __future__ import annotations

import pytest

from kairox.config.errors import ConfigError
from kairox.default_plugins.scripted_model import ScriptedModel
from kairox.recall import recall_for
from kairox.runtime.facade import AppFacade
from kairox.runtime.session import open_session
from kairox.testing import run
from tests.recall.conftest import record, said, write_config

EARLIER = [
    said("Ann", "Are you going to Lisbon this summer?", "2023-05-01T10:00:00"),
    said("Bob", "Yes, in June!", "2023-05-01T10:01:00", role="assistant"),
    said("Ann", "My zeppelin model needs new struts.", "2023-05-01T10:02:00"),
]


@pytest.mark.parametrize(
    ("scope", "found"), [("workspace", ["earlier"]), ("own", []), ("none", [])]
)
def test_the_scope_says_whose_messages_a_session_may_recall(workspace, scope, found):
    write_config(workspace, f'\n[recall]\nsessions = "{scope}"\n')
    with AppFacade(cwd=workspace) as facade:
        record(facade, "earlier", EARLIER)
        record(facade, "now", [said("Ann", "Good morning!")])
        recalled = facade.recall("zeppelin struts", session_id="now")
        assert sorted({t.messages[0].session_id for t in recalled}) == found
        # Its own session is always in scope, except with recall off.
        own = facade.recall("zeppelin struts", session_id="earlier")
        assert bool(own) is (scope != "none")


def test_a_bad_scope_is_refused_with_the_fix(workspace):
    write_config(workspace, '\n[recall]\nsesions = "own"\nshare = 2\n')
    with pytest.raises(ConfigError) as raised:
        AppFacade(cwd=workspace).config  # noqa: B018 - loading is the test
    assert "[recall] sesions: unknown key 'sesions'; did you mean 'sessions'?" in str(raised.value)
    assert "[recall] share: Input should be less than or equal to 1" in str(raised.value)
    write_config(workspace, '\n[recall]\nsessions = "everyone"\n')
    with pytest.raises(ConfigError, match="'own', 'workspace' or 'none'"):
        AppFacade(cwd=workspace).config  # noqa: B018


def test_a_short_reply_comes_with_what_it_answers_and_a_question_with_its_answer(facade):
    record(facade, "s1", EARLIER)
    archive = facade.archive()
    by_hit = {t.messages[0].text: t for t in recall_for(archive, "Lisbon June", session_id="s1")}
    question = by_hit["Are you going to Lisbon this summer?"]
    assert [m.text for m in question.messages] == [EARLIER[0]["content"], "Yes, in June!"]
    reply = next(t for t in recall_for(archive, "June", session_id="s1") if t.score)
    assert [m.who for m in reply.messages] == ["Ann", "Bob"]  # the question, then the reply


def test_a_turn_recalls_an_earlier_session_with_speaker_and_time_and_traces_it(facade):
    record(facade, "earlier", EARLIER)

    async def go():
        async with open_session(facade, "now", backend=ScriptedModel(["Struts, yes."])) as live:
            return await live.turn("What does my zeppelin model need?")

    result = run(go())
    system = result.assembly.messages[0].content
    assert "### earlier · 2023-05-01 10:02\n- Ann: My zeppelin model needs new struts.\n" in system
    recall = next(s for s in result.assembly.trace()["sources"] if s["source"] == "recall")
    assert recall["included"] >= 1 and recall["tokens"] > 0
    # The turn itself is archived for the next one.
    assert facade.recall("What does my zeppelin model need?", session_id="now", k=50)
