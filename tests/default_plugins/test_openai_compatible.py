"""The ``openai-compatible`` backend, driven over a real socket against OpenAITestServer."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from kairox.config.schema import ProfileConfig
from kairox.default_plugins import openai_compatible
from kairox.default_plugins.openai_compatible import (
    DEFAULT_BASE_URL,
    ModelHTTPError,
    OpenAICompatibleModel,
    OpenAICompatibleSettings,
)
from kairox.plugin_host.manager import KairoxPluginManager
from kairox.plugin_host.registry import ModelBackendContext
from kairox.support.models import ChatMessage, ModelBackend, ModelError
from kairox.support.retry import RetryPolicy
from kairox.testing import registered_plugin, run
from kairox.testing.openai_server import OpenAITestServer

KEY_ENV = "KAIROX_TEST_OPENAI_KEY"
FAST = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.01, budget=10.0, jitter=0)
PROMPT = [ChatMessage("system", "Be brief."), ChatMessage("user", "Say hi")]
UNICODE_REPLY = "Grüße, 世界! 🎉🚀 Ünïcödé — naïve café ✅ 👩‍💻 done."


@pytest.fixture(autouse=True)
def no_real_keys(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def model_for(server_or_url, **kwargs) -> OpenAICompatibleModel:
    url = server_or_url if isinstance(server_or_url, str) else server_or_url.base_url
    kwargs.setdefault("api_key_env", KEY_ENV)
    kwargs.setdefault("retry", FAST)
    kwargs.setdefault("timeout_s", 10)
    return OpenAICompatibleModel(url, **kwargs)


def stream(model, messages=PROMPT, *, name="test-model", max_tokens=None):
    """Every piece that arrived, and the error that ended the stream (or None)."""
    pieces: list[str] = []

    async def go():
        async for piece in model.stream(messages, model=name, max_tokens=max_tokens):
            pieces.append(piece)

    try:
        run(go())
    except ModelError as exc:
        return pieces, exc
    return pieces, None


def chunks_of(text, size):
    return [text[i : i + size] for i in range(0, len(text), size)]


# -- streaming ----------------------------------------------------------------------------------

WIRE_FORMATS = {
    "plain": {},
    "split-utf8": {"split_bytes": True},
    "crlf-split-utf8": {"crlf": True, "split_bytes": True},
    "keepalive-comments": {"keepalive": True, "crlf": True},
    "multiline-data": {"multiline_data": True, "split_bytes": True},
    "usage-chunk": {"include_usage": True},
    "one-char-deltas": {"chunk_size": 1},
    "finish-without-done": {"finish_without_done": True},
}


@pytest.mark.parametrize("wire", list(WIRE_FORMATS), ids=list(WIRE_FORMATS))
def test_streams_the_whole_reply(wire):
    with OpenAITestServer([UNICODE_REPLY], **WIRE_FORMATS[wire]) as server:
        pieces, error = stream(model_for(server))
        assert error is None
        assert "".join(pieces) == UNICODE_REPLY
        assert all(pieces), "empty and role-only deltas must be skipped"
        assert "\ufffd" not in "".join(pieces)
        assert len(server.chat_requests) == 1


def test_pieces_are_the_server_deltas():
    with OpenAITestServer([UNICODE_REPLY], chunk_size=5) as server:
        pieces, error = stream(model_for(server))
    assert error is None and pieces == chunks_of(UNICODE_REPLY, 5)


def test_replies_in_order_over_several_calls():
    with OpenAITestServer(["one", "two"]) as server:
        model = model_for(server)
        assert "".join(stream(model)[0]) == "one"
        assert "".join(stream(model)[0]) == "two"
        assert "".join(stream(model)[0]) == "two"  # the last reply repeats
        assert server.replies_served == 3


def test_a_server_that_ignores_stream_true_still_works():
    with OpenAITestServer([UNICODE_REPLY], ignore_stream=True) as server:
        pieces, error = stream(model_for(server))
    assert error is None and pieces == [UNICODE_REPLY]


def test_request_body_and_headers(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-123")
    messages = [
        ChatMessage("system", "You are terse."),
        ChatMessage("user", "Grüße 🎉"),
        ChatMessage("assistant", "Hi."),
        ChatMessage("user", "again"),
    ]
    with OpenAITestServer(["ok"], api_key="sk-test-123") as server:
        model = model_for(server, extra_headers={"X-Title": "kairox-tests"})
        pieces, error = stream(model, messages, max_tokens=77)
        assert error is None and pieces == ["ok"]
        request = server.chat_requests[0]
    assert request.method == "POST" and request.path == "/v1/chat/completions"
    assert request.json == {
        "model": "test-model",
        "messages": [{"role": m.role, "content": m.content} for m in messages],
        "stream": True,
        "max_tokens": 77,
    }
    assert request.headers["authorization"] == "Bearer sk-test-123"
    assert request.headers["accept"] == "text/event-stream"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-title"] == "kairox-tests"
    assert request.headers["user-agent"].startswith("kairox/")


def test_no_key_means_no_authorization_header_and_no_max_tokens():
    with OpenAITestServer(["ok"]) as server:  # a local server: no key needed
        assert stream(model_for(server))[1] is None
        request = server.chat_requests[0]
    assert "authorization" not in request.headers
    assert "max_tokens" not in request.json


def test_a_tool_message_name_is_sent():
    with OpenAITestServer(["ok"]) as server:
        stream(model_for(server), [ChatMessage("user", "x", name="alice")])
        assert server.chat_requests[0].json["messages"] == [
            {"role": "user", "content": "x", "name": "alice"}
        ]


def test_cancelling_mid_stream_closes_cleanly_and_the_next_call_works():
    with OpenAITestServer(["a long reply in many pieces", "second"], chunk_size=2) as server:
        model = model_for(server)

        async def break_early():
            async for piece in model.stream(PROMPT, model="test-model"):
                return piece
            return None

        assert run(break_early()) == "a "
        assert stream(model) == (["se", "co", "nd"], None)
        assert server.replies_served == 2


def test_cancelling_the_task_propagates():
    with OpenAITestServer(["slow reply"], chunk_size=1, chunk_delay_s=0.05) as server:
        model = model_for(server)

        async def cancel_after_first_piece():
            got = asyncio.Event()

            async def consume():
                async for _ in model.stream(PROMPT, model="test-model"):
                    got.set()

            task = asyncio.ensure_future(consume())
            await got.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        run(cancel_after_first_piece())
        assert len(server.chat_requests) == 1


def test_implements_the_model_backend_protocol():
    model = OpenAICompatibleModel("http://localhost:11434/v1/")
    assert isinstance(model, ModelBackend)
    assert model.name == "openai-compatible"
    assert model.url == "http://localhost:11434/v1/chat/completions"


def test_list_models(monkeypatch):
    with OpenAITestServer(models=["m-1", "m-2"], api_key="sk-k") as server:
        monkeypatch.setenv(KEY_ENV, "sk-k")
        assert run(model_for(server).list_models()) == ["m-1", "m-2"]
        monkeypatch.setenv(KEY_ENV, "sk-wrong")
        with pytest.raises(ModelHTTPError, match=KEY_ENV):
            run(model_for(server).list_models())


# -- HTTP errors ----------------------------------------------------------------------------------


def test_401_without_a_key_names_the_variable_to_set():
    with OpenAITestServer(["ok"], api_key="sk-right") as server:
        pieces, error = stream(model_for(server))
        assert len(server.chat_requests) == 1  # never retried
    assert pieces == [] and isinstance(error, ModelHTTPError) and error.status == 401
    assert f"set the environment variable {KEY_ENV}" in str(error)
    assert "You didn't provide an API key" in str(error)


def test_401_with_a_wrong_key_names_the_variable_and_hides_the_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-wrong-but-long-secret")
    with OpenAITestServer(["ok"], api_key="sk-right") as server:
        _, error = stream(model_for(server))
        assert len(server.chat_requests) == 1
    assert isinstance(error, ModelHTTPError) and error.status == 401
    assert KEY_ENV in str(error) and "rejected" in str(error)
    assert "sk-wrong-but-long-secret" not in str(error)


def test_401_when_the_profile_names_no_key_variable():
    with OpenAITestServer(["ok"], api_key="sk-right") as server:
        _, error = stream(model_for(server, api_key_env=None))
    assert isinstance(error, ModelHTTPError) and "set api_key_env" in str(error)


def test_403_names_the_variable(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-limited")
    with OpenAITestServer(["ok"]) as server:
        server.fail(403)
        _, error = stream(model_for(server))
        assert len(server.chat_requests) == 1
    assert isinstance(error, ModelHTTPError) and error.status == 403
    assert KEY_ENV in str(error) and "no access" in str(error)


def test_404_unknown_model_names_the_model_and_the_base_url():
    with OpenAITestServer(["ok"], models=["llama3"]) as server:
        _, error = stream(model_for(server), name="no-such-model")
        assert len(server.chat_requests) == 1
    assert isinstance(error, ModelHTTPError) and error.status == 404
    message = str(error)
    assert "'no-such-model'" in message and server.base_url in message
    assert "ends with /v1" in message and "does not exist" in message


def test_404_when_base_url_lacks_v1():
    with OpenAITestServer(["ok"]) as server:
        _, error = stream(model_for(server.url))
        assert server.requests[0].path == "/chat/completions"
    assert isinstance(error, ModelHTTPError) and error.status == 404
    assert "check base_url ends with /v1" in str(error)


def test_400_is_not_retried():
    with OpenAITestServer(["ok"]) as server:
        server.fail(400, times=3, message="context length exceeded")
        _, error = stream(model_for(server))
        assert len(server.chat_requests) == 1
    assert isinstance(error, ModelHTTPError) and error.status == 400
    assert "context length exceeded" in str(error)


@pytest.mark.parametrize("status", [429, 500, 503])
def test_throttling_and_server_errors_are_retried_then_succeed(status):
    with OpenAITestServer([UNICODE_REPLY]) as server:
        server.fail(status, times=2, retry_after=0)
        pieces, error = stream(model_for(server))
        assert error is None and "".join(pieces) == UNICODE_REPLY
        assert len(server.chat_requests) == 3
        assert server.replies_served == 1


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_retries_are_bounded(status):
    with OpenAITestServer(["never"]) as server:
        server.fail(status, times=10)
        pieces, error = stream(model_for(server))
        assert len(server.chat_requests) == FAST.attempts
    assert pieces == [] and isinstance(error, ModelHTTPError) and error.status == status
    assert f"gave up after {FAST.attempts} attempts" in str(error)
    assert f"HTTP {status}" in str(error)


def test_retry_after_is_honoured_up_to_the_cap():
    policy = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.02, budget=10, jitter=0)
    pauses: list[float] = []

    async def record(seconds: float) -> None:
        pauses.append(seconds)

    with OpenAITestServer(["ok"]) as server:
        model = model_for(server, retry=policy)
        model._sleep = record
        server.fail(429, retry_after=1)  # one second asked; the cap is 0.02
        server.fail(503)  # no Retry-After: the policy's own second delay
        pieces, error = stream(model)
        assert error is None and pieces == ["ok"]
    assert pauses == [0.02, 0.002]


# -- failures during the stream --------------------------------------------------------------------


def test_a_stream_cut_off_after_tokens_is_not_retried():
    with OpenAITestServer([UNICODE_REPLY], chunk_size=4, cut_off_after=2) as server:
        pieces, error = stream(model_for(server))
        assert len(server.chat_requests) == 1
        assert pieces == chunks_of(UNICODE_REPLY, 4)[:2]
        assert error is not None and not isinstance(error, ModelHTTPError)
        assert "the reply was cut off after 8 characters" in str(error)
        assert "not retried" in str(error)
        server.cut_off_after = None  # the server recovers; so does the client
        assert stream(model_for(server)) == (chunks_of(UNICODE_REPLY, 4), None)


def test_a_stream_that_ends_cleanly_without_done_is_cut_off():
    with OpenAITestServer(["abcdefgh"], chunk_size=4, cut_off_after=1, cut_off_mode="end") as s:
        pieces, error = stream(model_for(s))
    assert pieces == ["abcd"]
    assert "the reply was cut off" in str(error) and "ended without [DONE]" in str(error)


def test_a_stream_cut_off_before_any_text():
    with OpenAITestServer(["abcdefgh"], cut_off_after=0) as server:
        pieces, error = stream(model_for(server))
        assert len(server.chat_requests) == 1
    assert pieces == [] and "the reply was cut off before any text arrived" in str(error)


def test_an_error_event_mid_stream():
    message = "CUDA out of memory while generating"
    with OpenAITestServer([UNICODE_REPLY], chunk_size=3, error_after=2) as server:
        server.error_message = message
        pieces, error = stream(model_for(server))
        assert len(server.chat_requests) == 1
    assert pieces == chunks_of(UNICODE_REPLY, 3)[:2]
    assert message in str(error) and "cut off" in str(error)


def test_an_error_event_before_any_text():
    with OpenAITestServer(["abc"], error_after=0, error_message="prompt too long") as server:
        pieces, error = stream(model_for(server))
    assert pieces == [] and "reported an error: prompt too long" in str(error)


def test_a_slow_first_byte_is_waited_for():
    with OpenAITestServer(["patience"], first_byte_delay_s=0.05) as server:
        assert "".join(stream(model_for(server))[0]) == "patience"


def test_a_first_byte_later_than_the_timeout_is_a_clear_error():
    with OpenAITestServer(["too late"], first_byte_delay_s=5) as server:
        pieces, error = stream(model_for(server, timeout_s=0.2))
        assert len(server.chat_requests) == 1  # a timeout is not retried
    assert pieces == [] and "did not answer within 0.2 s" in str(error)
    assert server.base_url in str(error)


def test_slow_chunks_within_the_timeout_arrive_one_by_one():
    with OpenAITestServer(["abcdefgh"], chunk_size=2, chunk_delay_s=0.02) as server:
        pieces, error = stream(model_for(server))
    assert error is None and "".join(pieces) == "abcdefgh" and len(pieces) >= 2


def test_a_stall_after_tokens_is_a_cut_off_not_a_retry():
    with OpenAITestServer(["abcdefgh"], chunk_size=4, chunk_delay_s=5) as server:
        pieces, error = stream(model_for(server, timeout_s=0.2))
        assert len(server.chat_requests) == 1
    assert pieces == ["abcd"]
    assert "the reply was cut off after 4 characters" in str(error)
    assert "sent nothing for 0.2 s" in str(error)


def test_connection_refused_names_the_base_url():
    with OpenAITestServer() as server:
        base_url = server.base_url
    pieces, error = stream(model_for(base_url))  # the server is gone: nothing listens
    assert pieces == [] and not isinstance(error, ModelHTTPError)
    assert f"cannot connect to the model server at {base_url}" in str(error)
    assert "is the server running?" in str(error)


def test_a_bad_base_url_is_refused_at_construction():
    with pytest.raises(ModelError, match="http:// or https://"):
        OpenAICompatibleModel("localhost:11434/v1")
    with pytest.raises(ModelError, match="timeout_s"):
        OpenAICompatibleModel("http://localhost/v1", timeout_s=0)


# -- registration and import weight ----------------------------------------------------------------


def test_registered_through_the_hook_and_built_by_the_factory():
    pm = KairoxPluginManager()
    with registered_plugin(openai_compatible, "openai-under-test", pm):
        assert not pm.failures()
        spec = pm.registry.model_backends["openai-compatible"]
    assert spec.config_model is OpenAICompatibleSettings

    def build(settings=None, **options):
        return spec.factory(ModelBackendContext("p", ProfileConfig(), settings, options))

    model = build(OpenAICompatibleSettings(base_url="http://localhost:8000/v1", api_key_env=None))
    assert isinstance(model, OpenAICompatibleModel)
    assert model.base_url == "http://localhost:8000/v1" and model.api_key_env is None
    assert build().base_url == DEFAULT_BASE_URL
    assert build(retry={"attempts": 2}).retry.attempts == 2
    with pytest.raises(TypeError, match="does not take replies"):
        build(replies=["x"])


def test_the_factory_streams_from_a_server():
    pm = KairoxPluginManager()
    with registered_plugin(openai_compatible, "openai-under-test", pm):
        spec = pm.registry.model_backends["openai-compatible"]
    with OpenAITestServer(["via the registry"]) as server:
        settings = OpenAICompatibleSettings(base_url=server.base_url, api_key_env=KEY_ENV)
        model = spec.factory(ModelBackendContext("p", ProfileConfig(), settings))
        assert "".join(stream(model)[0]) == "via the registry"


def test_loading_the_plugin_does_not_import_httpx():
    script = (
        "import sys, kairox.default_plugins.openai_compatible, "
        "kairox.default_plugins.scripted_model; print('httpx' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
