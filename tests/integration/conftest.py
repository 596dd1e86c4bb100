"""Integration tests drive the CLI with every installed plugin loaded."""

from __future__ import annotations

# ``invoke``: ``kairox ARGS`` in-process with the built-ins and every installed plugin
# (``plugin_manager``, one per module), as the benchmark tests run it.
from tests.bench.conftest import invoke, plugin_manager

__all__ = ["cloud_tables", "invoke", "plugin_manager"]


def cloud_tables(bedrock, pinecone, weaviate) -> str:
    """The ``kairox.toml`` tables of one knowledge base per cloud kind, each on its loopback
    server, with the workspace's own retrievers switched off."""
    return f"""[knowledge_bases.aws]
kind = "bedrock"
knowledge_base_id = "{bedrock.knowledge_base_id}"
region = "us-east-1"
endpoint_url = "{bedrock.url}"
timeout_ms = 5000

[knowledge_bases.pc]
kind = "pinecone"
host = "{pinecone.url}"
api_key_env = "KAIROX_PINECONE_KEY"
embedding_backend = "hashing"
timeout_ms = 5000

[knowledge_bases.wv]
kind = "weaviate"
url = "{weaviate.url}"
grpc_port = {weaviate.grpc_port}
collection = "Notes"
mode = "hybrid"
embedding_backend = "hashing"
timeout_ms = 5000

[workspace]
disabled_retrievers = ["workspace", "workspace-fts"]
"""
