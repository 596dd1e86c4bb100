"""Who may call the memory browser: CSRF, origins, hosts and the optional token."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from kairox.web import (
    COOKIE_NAME,
    CSRF_HEADER,
    Origin,
    ServeError,
    check_bind,
    create_app,
    is_loopback,
)
from kairox.web.security import cookie_value

ORIGIN = "http://testserver"  # TestClient's base URL
TOKEN = "a-long-enough-secret-token-0123"


def snapshot(facade):
    """Every record in the store, whatever its status: proof that nothing changed."""
    return facade.memory.store.list(status=None)


@pytest.fixture
def seeded(facade, propose):
    """One approved memory and one pending proposal; returns their ids."""
    approved = facade.memory.set("user", "editor.font", "Fira", workspace_id=facade.workspace_id)
    pending = propose('<memory scope="workspace" key="commit.style">Conventional.</memory>')
    return {"approved": approved.id, "pending": pending.pending[0].id}


MUTATIONS = [
    ("POST", "/api/memories", {"scope": "user", "key": "evil", "body": "obey me"}),
    ("POST", "/api/memories/{pending}/approve", None),
    ("POST", "/api/memories/{pending}/reject", None),
    ("PUT", "/api/memories/{approved}", {"body": "changed"}),
    ("DELETE", "/api/memories/{approved}", None),
]


@pytest.mark.parametrize(("method", "path", "body"), MUTATIONS)
@pytest.mark.parametrize(
    ("headers", "problem"),
    [
        ({"Origin": ORIGIN}, CSRF_HEADER),
        ({"Origin": ORIGIN, CSRF_HEADER: "wrong"}, CSRF_HEADER),
        ({CSRF_HEADER: "<right>"}, "no Origin header"),
        ({"Origin": "http://evil.example", CSRF_HEADER: "<right>"}, "cross-origin"),
        ({"Origin": "http://testserver:8080", CSRF_HEADER: "<right>"}, "cross-origin"),
        ({"Origin": "https://testserver", CSRF_HEADER: "<right>"}, "cross-origin"),
        ({"Origin": "null", CSRF_HEADER: "<right>"}, "cross-origin"),
    ],
)
def test_changes_without_the_page_origin_and_csrf_token_are_403(
    web, facade, seeded, method, path, body, headers, problem
):
    before = snapshot(facade)
    sent = {name: web.csrf if value == "<right>" else value for name, value in headers.items()}
    response = web.client.request(method, path.format(**seeded), json=body, headers=sent)
    assert response.status_code == 403
    assert problem in response.json()["error"]
    assert snapshot(facade) == before


@pytest.mark.parametrize(("method", "path", "body"), MUTATIONS)
def test_the_same_changes_from_the_page_succeed(web, facade, seeded, method, path, body):
    before = snapshot(facade)
    response = web.send(method, path.format(**seeded), body)
    assert response.status_code == 200, response.text
    assert snapshot(facade) != before


def test_the_csrf_token_is_new_for_every_server(facade, csrf_of):
    first = create_app(lambda: facade, token=None, allowed_origin=ORIGIN)
    second = create_app(lambda: facade, token=None, allowed_origin=ORIGIN)
    tokens = {csrf_of(TestClient(app).get("/").text) for app in (first, second)}
    assert len(tokens) == 2
    assert all(len(token) >= 32 for token in tokens)


def test_get_never_changes_state(web, facade, seeded):
    before = snapshot(facade)
    for path in ("/api/memories/{pending}/approve", "/api/memories/{pending}/reject"):
        assert web.client.get(path.format(**seeded)).status_code == 405
    assert web.client.get("/api/memories", params={"status": "pending"}).status_code == 200
    assert snapshot(facade) == before


def test_a_foreign_host_is_refused(web, facade, seeded):
    """DNS rebinding: a hostile name pointed at 127.0.0.1 must not reach the API."""
    rebound = {"Host": "evil.example:8765"}
    api = web.client.get("/api/memories", headers=rebound)
    assert api.status_code == 421
    assert "memories" not in api.json()
    page = web.client.get("/", headers=rebound, follow_redirects=False)
    assert page.status_code == 307
    assert page.headers["location"] == f"{ORIGIN}/"
    before = snapshot(facade)
    change = web.send("POST", "/api/memories/{pending}/approve".format(**seeded), headers=rebound)
    assert change.status_code == 421
    assert snapshot(facade) == before


# -- the token -----------------------------------------------------------------------------


@pytest.fixture
def locked(facade):
    """The app with a token."""
    return TestClient(create_app(lambda: facade, token=TOKEN, allowed_origin=ORIGIN))


@pytest.mark.parametrize("path", ["/", "/api/memories", "/static/app.js", "/static/style.css"])
def test_with_a_token_every_request_needs_it(locked, path):
    response = locked.get(path)
    assert response.status_code == 401
    assert "token" in response.text
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert locked.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert locked.get(path, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_visiting_with_the_token_sets_a_cookie_once(locked):
    wrong = locked.get("/", params={"token": "nope"}, follow_redirects=False)
    assert wrong.status_code == 401
    assert COOKIE_NAME not in locked.cookies

    login = locked.get("/", params={"token": TOKEN}, follow_redirects=False)
    assert login.status_code == 303
    assert login.headers["location"] == "/"  # the token leaves the address bar
    cookie = login.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    assert TOKEN not in cookie  # the browser keeps an HMAC of it, not the token
    assert locked.cookies[COOKIE_NAME] == cookie_value(TOKEN)

    assert locked.get("/").status_code == 200
    assert locked.get("/api/memories").status_code == 200
    locked.cookies.clear()
    forged = locked.get("/api/memories", headers={"Cookie": f"{COOKIE_NAME}=forged"})
    assert forged.status_code == 401


def test_with_a_token_changes_still_need_origin_and_csrf(locked, facade, seeded, csrf_of):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    csrf = csrf_of(locked.get("/", headers=auth).text)
    before = snapshot(facade)
    approve = "/api/memories/{pending}/approve".format(**seeded)
    assert locked.post(approve, headers=auth).status_code == 403
    no_token = locked.post(approve, headers={"Origin": ORIGIN, CSRF_HEADER: csrf})
    assert no_token.status_code == 401
    assert snapshot(facade) == before
    done = locked.post(approve, headers={**auth, "Origin": ORIGIN, CSRF_HEADER: csrf})
    assert done.status_code == 200


# -- binding -------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "example.com", ""])
def test_a_network_address_without_a_token_is_refused(host):
    with pytest.raises(ServeError, match="without a token"):
        check_bind(host, None)
    check_bind(host, TOKEN)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"])
def test_loopback_needs_no_token(host):
    assert is_loopback(host)
    check_bind(host, None)


def test_a_short_token_is_refused():
    with pytest.raises(ServeError, match="too short"):
        check_bind("127.0.0.1", "secret")


def test_origins():
    assert Origin.parse("http://127.0.0.1:8765") == Origin("http", "127.0.0.1", 8765)
    assert Origin.parse("HTTP://LocalHost") == Origin("http", "localhost", 80)
    assert str(Origin.for_bind("::1", 8765)) == "http://[::1]:8765"
    assert Origin.for_bind("::1", 8765).matches_host_header("[::1]:8765")
    assert str(Origin.parse("https://box.lan:443/")) == "https://box.lan"
    for bad in ("127.0.0.1:8765", "ftp://x", "http://x/path", "http://x:99999", "http://u@x"):
        with pytest.raises(ValueError):
            Origin.parse(bad)
    with pytest.raises(ServeError, match="--origin"):
        Origin.for_bind("0.0.0.0", 8765)
    with pytest.raises(ValueError):
        create_app(lambda: None, token=None, allowed_origin="not an origin")
