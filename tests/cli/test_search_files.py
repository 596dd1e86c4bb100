"""``kairox search`` lists files: the file a developer means first, its lines readable,
the same top ranks for every ``-k``."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

DEMO_QUERY = "how does a plugin register a knowledge base kind"


def write(root: Path, relpath: str, text: str) -> None:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())


@pytest.fixture
def demo_tree(workspace: Path) -> Path:
    """A small tree shaped like this repository where the demo query misled before: a
    Makefile holding the query text, a benchmark's import block, tests that register
    kinds, next to the hook specification and the plugin guide."""
    write(
        workspace,
        "Makefile",
        f"""
        QUERY ?= {DEMO_QUERY}
        demo:
        \tkairox index .
        \tkairox search "$(QUERY)" -k 5
        """,
    )
    write(
        workspace,
        "benchmarks/rerank_stages.py",
        """
        from kairox.plugin_host.manager import build_plugin_manager
        from kairox.plugin_host.registry import KnowledgeBaseKind, register
        from kairox.bench import knowledge_base
        """,
    )
    write(
        workspace,
        "tests/plugin_host/test_manager.py",
        """
        def test_a_plugin_can_register_a_knowledge_base_kind(pm):
            register = pm.hook.kairox_register_knowledge_base_kinds
            assert register is not None  # a plugin registers its kind

        def test_a_kind_registered_twice_is_refused(pm):
            pass
        """,
    )
    write(
        workspace,
        "core/kairox/plugin_host/hookspecs.py",
        '''
        """Every hook Kairox calls, grouped by concern."""

        @hookspec
        def kairox_register_knowledge_base_kinds(register):
            """Register configurable knowledge-base kinds: call ``register(kind)`` once
            for each KnowledgeBaseKind the plugin provides."""

        @hookspec
        def kairox_register_embedding_backends(register):
            """Register embedding backends."""
        ''',
    )
    write(
        workspace,
        "core/kairox/chunking.py",
        '''
        def split(text, size):
            """Cut text into pieces of about size tokens."""
            return [text[i : i + size] for i in range(0, len(text), size)]
        ''',
    )
    # Unrelated modules and pages, as in any repository: the query's words are rare.
    topics = ["tokens budget", "session events", "memory approval", "terminal colours"]
    topics += ["vector packs", "file walking", "context assembly", "model streaming"]
    for n, topic in enumerate(topics):
        write(
            workspace, f"core/kairox/part{n}.py", f'"""The {topic}."""\n\ndef run{n}():\n    pass\n'
        )
        write(workspace, f"docs/page{n}.md", f"# {topic.title()}\n\nHow the {topic} work.\n")
    write(
        workspace,
        "docs/plugins.md",
        """
        # Writing a plugin

        A plugin registers a knowledge base kind with the
        `kairox_register_knowledge_base_kinds` hook: it calls `register` with a
        `KnowledgeBaseKind` naming the kind, its config model and its factory.
        """,
    )
    return workspace


def search_json(invoke, *args: str) -> list[dict]:
    result = invoke("search", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["hits"]


def test_the_demo_query_finds_the_hook_or_the_plugin_guide(invoke, demo_tree):
    assert invoke("index").exit_code == 0
    hits = search_json(invoke, DEMO_QUERY, "-k", "5")
    top3 = [h["metadata"]["path"] for h in hits[:3]]
    assert {"docs/plugins.md", "core/kairox/plugin_host/hookspecs.py"} & set(top3), top3
    assert top3[0] not in {
        "Makefile",
        "benchmarks/rerank_stages.py",
        "tests/plugin_host/test_manager.py",
    }


def test_search_lists_each_file_once_with_its_lines(invoke, demo_tree):
    assert invoke("index").exit_code == 0
    result = invoke("search", DEMO_QUERY, "-k", "3")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    headers = [line for line in lines if line[:1].isdigit()]
    assert len(headers) == 3
    where = [header.split()[1] for header in headers]
    assert len({w.split(":")[0] for w in where}) == 3  # three different files
    hook = next(w for w in where if w.startswith("core/kairox/plugin_host/hookspecs.py:"))
    first, last = (int(n) for n in hook.split(":")[1].split("-"))
    assert 1 <= first <= last
    # The hit's own lines follow its header, numbered as in the file.
    assert any(line.strip().startswith(f"{first} │") for line in lines)


def test_chunks_shows_every_matching_chunk(invoke, demo_tree):
    assert invoke("index").exit_code == 0
    files = search_json(invoke, DEMO_QUERY, "-k", "50")
    chunks = search_json(invoke, DEMO_QUERY, "-k", "50", "--chunks")
    paths = [h["metadata"]["path"] for h in files]
    assert len(paths) == len(set(paths))
    assert len(chunks) > len(files)
    assert "file_chunks" in files[0]["metadata"]


@pytest.mark.parametrize("chunks", [(), ("--chunks",)])
def test_the_top_ranks_do_not_depend_on_k(invoke, demo_tree, chunks):
    assert invoke("index").exit_code == 0
    ids = {
        k: [h["id"] for h in search_json(invoke, DEMO_QUERY, "-k", str(k), *chunks)]
        for k in (1, 3, 5, 100)
    }
    for k in (1, 3, 5):
        assert ids[k] == ids[100][:k]


def test_a_query_asking_for_tests_gets_the_test(invoke, demo_tree):
    assert invoke("index").exit_code == 0
    hits = search_json(invoke, "the test that a plugin can register a knowledge base kind")
    assert hits[0]["metadata"]["path"] == "tests/plugin_host/test_manager.py"


@pytest.fixture
def auth_tree(workspace: Path) -> Path:
    """Digest authentication's implementation, which matches its words best, beside its
    docs page and its test, which match them nearly as well."""
    write(
        workspace,
        "httpx/_auth.py",
        """
        class DigestAuth:
            \"\"\"Digest authentication: the digest response hash of a challenge.\"\"\"

            def digest_authentication_response(self, challenge):
                # digest authentication hashes the challenge with the password
                return self.digest(challenge)
        """,
    )
    write(
        workspace,
        "docs/authentication.md",
        """
        # Digest authentication

        Pass `auth=DigestAuth(user, password)`: digest authentication computes the response
        hash of the challenge for you.
        """,
    )
    write(
        workspace,
        "tests/test_auth.py",
        """
        def test_digest_authentication_response_hash():
            # the response hash of a challenge
            assert DigestAuth("user", "password").digest(challenge)
        """,
    )
    write(workspace, "httpx/_client.py", "class Client:\n    def send(self, request): ...\n")
    write(workspace, "httpx/_models.py", "class Response:\n    def read(self): ...\n")
    return workspace


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("digest authentication response hash", "httpx/_auth.py"),
        # The implementation matches better; a named role counts more than it does.
        ("documentation of the digest authentication response hash", "docs/authentication.md"),
        ("the tests for digest authentication response hash", "tests/test_auth.py"),
    ],
)
def test_a_query_naming_docs_or_tests_gets_that_role_first(invoke, auth_tree, query, first):
    assert invoke("index").exit_code == 0
    hits = search_json(invoke, query)
    assert [h["metadata"]["path"] for h in hits][:1] == [first], hits
