"""The ``scripted`` model backend: replies in order, in chunks, with scripted failures."""

from __future__ import annotations

import asyncio
import json

import pytest

from kairox.config.schema import ProfileConfig
from kairox.default_plugins import scripted_model
from kairox.default_plugins.scripted_model import (
    ScriptedModel,
    ScriptedSettings,
    ScriptError,
    load_script,
)
from kairox.memory.markers import MarkerExtractor
from kairox.plugin_host.manager import KairoxPluginManager
from kairox.plugin_host.registry import ModelBackendContext
from kairox.support.models import ChatMessage, ModelBackend, ModelError
from kairox.testing import registered_plugin, run

PROMPT = [ChatMessage("system", "Be brief."), ChatMessage("user", "Hi")]


async def _collect(model, messages=PROMPT, **kwargs):
    return [piece async for piece in model.stream(messages, model="m", **kwargs)]


def collect(model, messages=PROMPT, **kwargs):
    return run(_collect(model, messages, **kwargs))


def collect_until_error(model):
    """The pieces that arrived, and the ModelError that ended the stream."""
    pieces = []

    async def go():
        async for piece in model.stream(PROMPT, model="m"):
            pieces.append(piece)

    with pytest.raises(ModelError) as caught:
        run(go())
    return pieces, caught.value


# -- replies and chunks -----------------------------------------------------------------


def test_replies_come_in_order_then_the_script_runs_out():
    model = ScriptedModel(["first reply", "second reply"])
    assert "".join(collect(model)) == "first reply"
    assert "".join(collect(model)) == "second reply"
    assert model.used == 2 and model.remaining == 0
    with pytest.raises(ModelError, match=r"no more replies \(2 used"):
        collect(model)


def test_an_empty_script_fails_on_the_first_turn():
    with pytest.raises(ModelError, match=r"no more replies \(0 used"):
        collect(ScriptedModel())


@pytest.mark.parametrize("chunk_size", [1, 3, 7, 100])
def test_replies_stream_in_chunks_of_chunk_size(chunk_size):
    reply = "Grüße 🚀 from the scripted backend!"
    pieces = collect(ScriptedModel([reply], chunk_size=chunk_size))
    assert "".join(pieces) == reply
    assert all(1 <= len(piece) <= chunk_size for piece in pieces)
    assert len(pieces) == -(-len(reply) // chunk_size)


def test_default_chunks_are_small():
    pieces = collect(ScriptedModel(["x" * 20]))
    assert [len(p) for p in pieces] == [7, 7, 6]


def test_a_marker_split_across_chunks_is_still_extracted():
    reply = 'Noted. <memory scope="session">Prefers tabs.</memory> Anything else?'
    pieces = collect(ScriptedModel([reply], chunk_size=3))
    assert any("<" in p and "memory" not in p for p in pieces)  # the tag really is split
    extractor = MarkerExtractor()
    visible = "".join(extractor.feed(p) for p in pieces) + extractor.close()
    assert "<memory" not in visible and "Anything else?" in visible
    assert [m.body for m in extractor.markers] == ["Prefers tabs."]


def test_chunks_yield_to_the_event_loop():
    async def interleave():
        order = []

        async def other():
            for _ in range(3):
                order.append("other")
                await asyncio.sleep(0)

        task = asyncio.ensure_future(other())
        async for _ in ScriptedModel(["abcdefgh"], chunk_size=2).stream(PROMPT, model="m"):
            order.append("chunk")
        await task
        return order

    order = run(interleave())
    first_other = order.index("other")
    assert 0 < first_other < len(order) - 1  # the other task ran between chunks


def test_delay_between_chunks_keeps_the_text():
    model = ScriptedModel(["delayed reply"], chunk_size=4, delay_s=0.001)
    assert "".join(collect(model)) == "delayed reply"


def test_requests_are_recorded():
    model = ScriptedModel(["a", "b"])
    collect(model)
    second = [*PROMPT, ChatMessage("assistant", "a"), ChatMessage("user", "more")]
    collect(model, second, max_tokens=50)
    assert model.requests == [PROMPT, second]
    assert model.requests[1] is not second  # a copy: later edits don't rewrite history
    assert model.calls == [{"model": "m", "max_tokens": None}, {"model": "m", "max_tokens": 50}]


def test_cancelling_a_stream_leaves_the_next_turn_playable():
    model = ScriptedModel(["a long first reply", "second"], chunk_size=2)

    async def cancel_then_continue():
        async for _ in model.stream(PROMPT, model="m"):
            break  # the consumer gives up after one chunk
        return await _collect(model)

    assert "".join(run(cancel_then_continue())) == "second"


def test_implements_the_model_backend_protocol():
    assert isinstance(ScriptedModel(["x"]), ModelBackend)
    assert ScriptedModel().name == "scripted"


# -- scripted failures ----------------------------------------------------------------------


def test_an_error_entry_fails_that_turn_and_the_script_goes_on():
    model = ScriptedModel(["ok", {"error": "the model is overloaded"}, "back again"])
    assert "".join(collect(model)) == "ok"
    pieces, error = collect_until_error(model)
    assert pieces == [] and "the model is overloaded" in str(error) and "turn 2" in str(error)
    assert "".join(collect(model)) == "back again"
    assert len(model.requests) == 3  # the failed turn was asked, too


def test_fail_after_chars_streams_a_prefix_then_fails():
    model = ScriptedModel([{"reply": "0123456789abcdef", "fail_after_chars": 10}], chunk_size=4)
    pieces, error = collect_until_error(model)
    assert "".join(pieces) == "0123456789"
    assert "after 10 characters" in str(error) and "cut off" in str(error)


def test_fail_after_chars_with_an_error_message():
    model = ScriptedModel([{"reply": "abcdef", "fail_after_chars": 0, "error": "socket closed"}])
    pieces, error = collect_until_error(model)
    assert pieces == [] and "socket closed" in str(error)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"reply": 3}, "'reply' must be a string"),
        ({"nope": "x"}, "unknown key"),
        ({}, "expected a 'reply' or an 'error'"),
        ({"error": "x", "fail_after_chars": 2}, "needs a 'reply'"),
        ({"reply": "x", "fail_after_chars": -1}, "whole number"),
        ({"reply": "x", "fail_after_chars": True}, "whole number"),
        (42, "expected a string or a mapping"),
    ],
)
def test_bad_reply_entries_are_rejected_with_their_index(entry, message):
    with pytest.raises(ScriptError, match=message) as caught:
        ScriptedModel(["fine", entry])
    assert "replies[1]" in str(caught.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"replies": ["a"], "script": "x.jsonl"}, "not both"),
        ({"replies": "just one string"}, "not a single string"),
        ({"replies": ["a"], "chunk_size": 0}, "chunk_size"),
        ({"replies": ["a"], "delay_s": -1}, "delay_s"),
    ],
)
def test_bad_arguments_are_rejected(kwargs, message):
    with pytest.raises(ScriptError, match=message):
        ScriptedModel(**kwargs)


# -- script files ---------------------------------------------------------------------------


def test_jsonl_script(tmp_path):
    path = tmp_path / "demo.jsonl"
    lines = [
        {"reply": "Hello!"},
        {"error": "overloaded"},
        {"reply": "cut short", "fail_after_chars": 3},
        {"reply": "line one\nline two"},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n", encoding="utf-8")
    model = ScriptedModel(script=path)
    assert "".join(collect(model)) == "Hello!"
    assert "overloaded" in str(collect_until_error(model)[1])
    assert "".join(collect_until_error(model)[0]) == "cut"
    assert "".join(collect(model)) == "line one\nline two"
    with pytest.raises(ModelError, match=r"no more replies \(4 used from .*demo\.jsonl"):
        collect(model)


def test_text_script_with_separators(tmp_path):
    path = tmp_path / "demo.txt"
    path.write_text(
        "First reply.\n---\nSecond reply,\n\nwith a blank line.\r\n---  \r\n"
        "Third: {not json}\n---\n",
        encoding="utf-8",
    )
    model = ScriptedModel(script=str(path))
    assert [t.reply for t in model.turns] == [
        "First reply.",
        "Second reply,\n\nwith a blank line.",
        "Third: {not json}",
    ]
    assert "".join(collect(model)) == "First reply."


def test_a_text_script_may_start_with_json_that_is_not_an_entry(tmp_path):
    path = tmp_path / "replies.txt"
    path.write_text('{"answer": 42}\n---\nplain\n', encoding="utf-8")
    assert [t.reply for t in load_script(path)] == ['{"answer": 42}', "plain"]


def test_jsonl_is_sniffed_without_the_extension(tmp_path):
    path = tmp_path / "replies.txt"
    path.write_text('\n{"reply": "sniffed"}\n{"error": "boom"}\n', encoding="utf-8")
    turns = load_script(path)
    assert [(t.reply, t.error) for t in turns] == [("sniffed", None), (None, "boom")]


@pytest.mark.parametrize(
    ("name", "text", "where", "message"),
    [
        ("bad.jsonl", '{"reply": "ok"}\n{"reply": \n', ":2:", "not valid JSON"),
        ("bad.jsonl", '{"reply": "ok"}\n\n["a list"]\n', ":3:", "expected an object"),
        ("bad.jsonl", '{"reply": "ok"}\n{"replies": "typo"}\n', ":2:", "unknown key"),
        ("bad.jsonl", '{"reply": "ok"}\n{"reply": "x", "fail_after_chars": "3"}\n', ":2:", "whole"),
        ("bad.txt", '{"reply": "ok"}\n{oops\n', ":2:", "not valid JSON"),
        ("bad.txt", "one\n---\n\n---\nthree\n", ":4:", "empty reply"),
    ],
)
def test_bad_script_files_name_file_and_line(tmp_path, name, text, where, message):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ScriptError, match=message) as caught:
        ScriptedModel(script=path)
    assert f"{path}{where}" in str(caught.value)


def test_missing_empty_and_binary_script_files(tmp_path):
    with pytest.raises(ScriptError, match="does not exist"):
        load_script(tmp_path / "missing.jsonl")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(ScriptError, match="holds no replies") as caught:
        load_script(empty)
    assert str(empty) in str(caught.value)
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(ScriptError, match="not UTF-8"):
        load_script(binary)


# -- registration ---------------------------------------------------------------------------


def test_registered_through_the_hook_and_built_by_the_factory(tmp_path):
    pm = KairoxPluginManager()
    with registered_plugin(scripted_model, "scripted-under-test", pm):
        assert not pm.failures()
        spec = pm.registry.model_backends["scripted"]
        assert pm.registry.model_backends.provider("scripted") == "scripted-under-test"

    def build(settings=None, **options):
        return spec.factory(
            ModelBackendContext("p", ProfileConfig(backend="scripted"), settings, options)
        )

    model = build(ScriptedSettings(replies=["from the registry"], chunk_size=2))
    assert isinstance(model, ScriptedModel) and model.chunk_size == 2
    assert "".join(collect(model)) == "from the registry"
    script = tmp_path / "s.txt"
    script.write_text("from a file", encoding="utf-8")
    # Given for the call (kairox chat --script), a script replaces the profile's replies.
    assert "".join(collect(build(ScriptedSettings(replies=["x"]), script=str(script)))) == (
        "from a file"
    )
    assert build().remaining == 0
    with pytest.raises(TypeError, match="does not take base_url"):
        build(base_url="http://x")
