"""The loopback OpenAI-compatible server (kairox.testing.openai_server), seen raw: its
stream, its models list, its errors and whole completions."""

from __future__ import annotations

import http.client
import json

from kairox.testing.openai_server import OpenAITestServer


def raw_request(server, method, path, body=None, headers=None):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        payload = json.dumps(body).encode() if body is not None else None
        connection.request(method, path, body=payload, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def test_server_streams_like_openai():
    with OpenAITestServer(["Hi there"], chunk_size=3) as server:
        body = {"model": "test-model", "messages": [{"role": "user", "content": "x"}]}
        status, headers, raw = raw_request(
            server, "POST", "/v1/chat/completions", {**body, "stream": True}
        )
    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    assert headers["Transfer-Encoding"] == "chunked"
    text = raw.decode()
    assert text.endswith("data: [DONE]\n\n")
    events = [json.loads(line[6:]) for line in text.split("\n\n") if line.startswith("data: {")]
    assert all(e["object"] == "chat.completion.chunk" for e in events)
    assert len({e["id"] for e in events}) == 1
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    assert [e["choices"][0]["delta"].get("content") for e in events[1:-1]] == ["Hi ", "the", "re"]
    assert events[-1]["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "stop",
    }


def test_server_models_errors_and_whole_completions():
    with OpenAITestServer(["whole"], api_key="sk-a", models=["a", "b"]) as server:
        auth = {"Authorization": "Bearer sk-a"}
        status, _, raw = raw_request(server, "GET", "/v1/models", headers=auth)
        assert status == 200 and [m["id"] for m in json.loads(raw)["data"]] == ["a", "b"]
        status, _, raw = raw_request(server, "GET", "/v1/models")
        assert status == 401 and "didn't provide an API key" in json.loads(raw)["error"]["message"]
        status, _, raw = raw_request(server, "POST", "/v1/nope", {}, auth)
        assert status == 404 and "Invalid URL" in json.loads(raw)["error"]["message"]
        body = {"model": "a", "messages": []}
        server.fail(429, retry_after=7)
        status, headers, raw = raw_request(server, "POST", "/v1/chat/completions", body, auth)
        assert status == 429 and headers["Retry-After"] == "7"
        assert json.loads(raw)["error"]["code"] == "rate_limit_exceeded"
        status, _, raw = raw_request(server, "POST", "/v1/chat/completions", body, auth)
        assert status == 200
        assert json.loads(raw)["choices"][0]["message"]["content"] == "whole"
        assert [r.path for r in server.requests] == [
            "/v1/models",
            "/v1/models",
            "/v1/nope",
            "/v1/chat/completions",
            "/v1/chat/completions",
        ]
