"""Shared fixtures: fake AWS credentials in the environment, loopback servers, and sources
built the way Kairox builds them (config model, then factory).

Every test drives real boto3 over a real socket to a :class:`BedrockTestServer`; nothing
is stubbed. Helpers are fixtures (not imports from this file) so the tests run under any
pytest import mode, including the repository root's ``--import-mode=importlib``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import kairox_bedrock
import pytest
from kairox_bedrock.testing import BedrockTestServer, corpus_documents

from kairox.plugin_host.registry import KnowledgeBaseKind
from kairox.testing import build_source, check_kind_registration

ACCESS_KEY = "AKIAKAIROXTEST000001"
SECRET_KEY = "kairox/test/secret/key/0000000000000000000"
REGION = "us-east-1"

# The real environment, read before any fixture replaces it: the cloud test needs it.
_REAL_AWS_ENV = {
    name: value
    for name, value in os.environ.items()
    if name.startswith(("AWS_", "KAIROX_BEDROCK_"))
}

MakeSource = Callable[..., kairox_bedrock.BedrockSource]


@pytest.fixture(scope="session")
def real_aws_env() -> dict[str, str]:
    """The AWS_* and KAIROX_BEDROCK_* variables as they were when the tests started."""
    return dict(_REAL_AWS_ENV)


@pytest.fixture(scope="module", autouse=True)
def aws_env(request, tmp_path_factory) -> Iterator[None]:
    """Fake credentials through the standard chain (environment variables), and no way
    to reach real AWS config: empty config files, no instance metadata service.
    Modules marked ``cloud`` keep the real environment."""
    if request.node.get_closest_marker("cloud"):
        yield
        return
    folder = tmp_path_factory.mktemp("aws")
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith("AWS_"):
                mp.delenv(name)
        mp.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        mp.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        mp.setenv("AWS_DEFAULT_REGION", REGION)
        mp.setenv("AWS_CONFIG_FILE", str(folder / "config"))
        mp.setenv("AWS_SHARED_CREDENTIALS_FILE", str(folder / "credentials"))
        mp.setenv("AWS_EC2_METADATA_DISABLED", "true")
        yield


@pytest.fixture(scope="session")
def bedrock_kind() -> KnowledgeBaseKind:
    return check_kind_registration(kairox_bedrock, "bedrock")


def _builder(kind: KnowledgeBaseKind, base_dir: Path) -> MakeSource:
    def make(
        target: BedrockTestServer | str | None = None,
        kb_id: str = "papers",
        **options,
    ) -> kairox_bedrock.BedrockSource:
        if isinstance(target, BedrockTestServer):
            options.setdefault("endpoint_url", target.url)
            options.setdefault("knowledge_base_id", target.knowledge_base_id)
        elif isinstance(target, str):
            options.setdefault("endpoint_url", target)
        options.setdefault("knowledge_base_id", "KAIROXTEST")
        options.setdefault("region", REGION)
        # Functional tests must not race the default 800 ms deadline on a loaded CI machine;
        # the deadline tests pass their own timeout_ms.
        options.setdefault("timeout_ms", 10_000)
        return build_source(kairox_bedrock, kind.name, kb_id, base_dir=base_dir, **options)

    return make


@pytest.fixture(scope="session")
def make_source(bedrock_kind, tmp_path_factory) -> MakeSource:
    """``make_source(server_or_endpoint_url, kb_id="papers", **table_keys)``: a source
    built through the registered kind, as Kairox builds one from a table."""
    return _builder(bedrock_kind, tmp_path_factory.mktemp("base"))


def _checking_server() -> Iterator[BedrockTestServer]:
    """A server over the conformance corpus that checks credentials, region and the SigV4
    signature (the fake environment credentials pass), and that it raised nothing."""
    with BedrockTestServer(
        corpus_documents(), access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION
    ) as srv:
        yield srv
        assert not srv.errors, srv.errors


@pytest.fixture
def server() -> Iterator[BedrockTestServer]:
    """A fresh :func:`_checking_server` for one test."""
    yield from _checking_server()


@pytest.fixture(scope="module")
def corpus_server() -> Iterator[BedrockTestServer]:
    """One :func:`_checking_server` for a whole module (read-only tests)."""
    yield from _checking_server()


@pytest.fixture(scope="session")
def credentials() -> tuple[str, str, str]:
    """``(access key id, secret key, region)`` the fake environment holds."""
    return ACCESS_KEY, SECRET_KEY, REGION
