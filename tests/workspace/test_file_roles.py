"""A file's role from its path, and the roles a query asks for."""

from __future__ import annotations

import pytest

from kairox.workspace.file_roles import Role, asked_roles, role_of


@pytest.mark.parametrize(
    ("path", "role"),
    [
        ("src/flask/app.py", Role.IMPLEMENTATION),
        ("httpx/_auth.py", Role.IMPLEMENTATION),
        ("context.go", Role.IMPLEMENTATION),
        ("lib/response.js", Role.IMPLEMENTATION),
        ("core/kairox/plugin_host/hookspecs.py", Role.IMPLEMENTATION),
        ("tests/test_auth.py", Role.TEST),
        ("test_app.py", Role.TEST),
        ("context_test.go", Role.TEST),
        ("src/walk.spec.ts", Role.TEST),
        ("test/res.send.js", Role.TEST),
        ("pkg/conftest.py", Role.TEST),
        ("docs/plugins.md", Role.DOCS),
        ("README.md", Role.DOCS),
        ("LICENSE", Role.DOCS),
        ("docs/conf.py", Role.DOCS),
        ("CHANGELOG.md", Role.CHANGELOG),
        ("History.md", Role.CHANGELOG),
        ("CHANGES.rst", Role.CHANGELOG),
        ("docs/changes.rst", Role.CHANGELOG),
        ("examples/search/index.js", Role.EXAMPLE),
        ("benchmarks/rerank_stages.py", Role.BENCHMARK),
        ("Makefile", Role.CONFIG),
        ("pyproject.toml", Role.CONFIG),
        (".github/workflows/ci.yml", Role.CONFIG),
        ("data/papers.jsonl", Role.CONFIG),
        ("static/app.min.js", Role.GENERATED),
        ("api/service_pb2.py", Role.GENERATED),
        ("go.sum", Role.GENERATED),
        ("vendor/github.com/x/y.go", Role.VENDORED),
        ("src/_vendor/six.py", Role.VENDORED),
    ],
)
def test_role_of_reads_the_path(path: str, role: Role) -> None:
    assert role_of(path) is role


def test_the_more_specific_role_wins() -> None:
    assert role_of("docs/CHANGELOG.md") is Role.CHANGELOG  # not docs
    assert role_of("examples/tests/test_x.py") is Role.TEST  # not example
    assert role_of("vendor/pkg/foo_test.go") is Role.VENDORED  # not test


@pytest.mark.parametrize(
    ("query", "roles"),
    [
        ("how does digest authentication compute the response hash", set()),
        ("the tests for digest auth", {Role.TEST}),
        ("where is the Test of the pager?", {Role.TEST}),
        ("docs page on plugins", {Role.DOCS}),
        ("what changed in the changelog", {Role.CHANGELOG}),
        ("an example of a blueprint, and its tests", {Role.EXAMPLE, Role.TEST}),
        ("attestation of contest results", set()),  # words, not substrings
        # Words a developer mostly means otherwise ask for no role.
        ("the release script's config loading", set()),
        ("route spec changes in the ci workflow", set()),
        ("guide the fixture through the news feed", set()),
    ],
)
def test_asked_roles_are_named_words(query: str, roles: set[Role]) -> None:
    assert asked_roles(query) == roles
