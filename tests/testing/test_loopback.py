"""kairox.testing.loopback: the lifecycle, records and faults every loopback server shares."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from kairox.testing.loopback import (
    Fault,
    FaultPlan,
    LoopbackHTTPServer,
    RecordedRequest,
    Reply,
    closed_url,
)


class EchoServer(LoopbackHTTPServer):
    """Answers every request with its path; applies the shared faults."""

    def _handle(self, request, handler):
        self._record(request)
        if self.faults.take("disconnect", request) is not None:
            return Reply(drop=True)
        failure = self.faults.take("fail", request)
        if failure is not None:
            return Reply.json(int(failure.error), {"error": failure.message})
        bad = self.faults.take("malformed", request)
        if bad is not None:
            return Reply(200, bad.body or b"{")
        return Reply.json(200, {"path": request.path, "json": request.json})


def get(server, path="/a", data=None):
    request = urllib.request.Request(server.url + path, data=data, method="POST" if data else "GET")
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.read()


def test_lifecycle_url_and_a_port_nothing_listens_on_after_stop():
    server = EchoServer()
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.url
    with server as running:
        assert running is server and server.url == f"http://127.0.0.1:{server.port}"
        assert get(server, "/x?q=1") == (200, b'{"path": "/x", "json": null}')
    with pytest.raises(urllib.error.URLError):
        get(server)
    server.stop()  # a second stop is harmless


def test_requests_are_recorded_and_counted_by_target():
    with EchoServer() as server:
        get(server, "/a")
        get(server, "/b?x=1", data=b'{"k": 1}')
        first, second = server.requests
        assert (first.method, first.path, first.status) == ("GET", "/a", 200)
        assert second.json == {"k": 1} and second.query == {"x": ["1"]}
        assert second.raw_path == "/b?x=1" and second.target == "POST /b"
        assert server.count() == 2 and server.count("/a") == 1
        assert server.count("POST /") == 1 and server.count(method="GET") == 1
        server.clear_requests()
        assert server.requests == [] and server.count() == 0


def test_fail_after_times_and_target():
    with EchoServer() as server:
        server.fail(503, 2, target="/a", after=1, message="down")
        statuses = []
        for path in ("/a", "/b", "/a", "/a", "/a"):
            try:
                statuses.append(get(server, path)[0])
            except urllib.error.HTTPError as exc:
                statuses.append(exc.code)
        assert statuses == [200, 200, 503, 503, 200]


def test_malformed_disconnect_and_reset():
    with EchoServer() as server:
        server.malformed(body="not json")
        assert get(server) == (200, b"not json")
        server.disconnect()
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            get(server)
        assert get(server)[0] == 200
        server.fail(500, None)
        server.reset()
        assert get(server)[0] == 200 and server.count() == 1


def test_faults_of_one_kind_queue_up_like_a_script():
    plan = FaultPlan()
    plan.add(Fault("fail", 1, after=1, error="A"))
    plan.add(Fault("fail", 1, error="B"))
    request = RecordedRequest("POST", "/x")
    taken = [plan.take("fail", request) for _ in range(4)]
    assert [f.error if f else None for f in taken] == [None, "A", "B", None]
    with pytest.raises(ValueError, match="unknown fault kind"):
        plan.add(Fault("explode"))
    with pytest.raises(ValueError, match="times"):
        plan.add(Fault("fail", 0))


def test_closed_url_refuses():
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(closed_url(), timeout=5)
