"""The built-in ``workspace`` retrievers take their settings from ``[workspace]``."""

from __future__ import annotations

from pathlib import Path

import pytest

from kairox.config.schema import WorkspaceConfig
from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.default_plugins.workspace_rag import dense_retriever, lexical_retriever
from kairox.plugin_host.registry import BuildContext
from kairox.retrieval.vectors import SENTENCE_WEIGHT


def context(tmp_path: Path, workspace: WorkspaceConfig | None) -> BuildContext:
    return BuildContext(
        workspace_root=tmp_path,
        state_dir=tmp_path / "state",
        base_dir=tmp_path,
        embedding_backend=lambda name: HashingEmbedder(),
        workspace=workspace,
    )


@pytest.mark.parametrize(
    ("workspace", "expected"),
    [
        # hashing declares no sentence vectors; a configured weight wins.
        (None, (256, 32, 0)),
        (WorkspaceConfig(), (256, 32, 0)),
        (WorkspaceConfig(sentence_weight=SENTENCE_WEIGHT), (256, 32, SENTENCE_WEIGHT)),
        (
            WorkspaceConfig(chunk_tokens=64, chunk_overlap=8, sentence_weight=0),
            (64, 8, 0),
        ),
    ],
)
def test_index_settings_come_from_the_workspace_table(tmp_path, workspace, expected) -> None:
    for factory in (dense_retriever, lexical_retriever):
        retriever = factory(context(tmp_path, workspace))
        index = retriever.index
        try:
            assert (index.chunk_tokens, index.chunk_overlap, index.sentence_weight) == expected
        finally:
            index.close()


@pytest.mark.parametrize(
    ("workspace", "stored"),
    [(None, False), (WorkspaceConfig(), False), (WorkspaceConfig(vectors=True), True)],
)
def test_hashing_vectors_are_kept_only_when_asked(tmp_path, workspace, stored) -> None:
    retriever = dense_retriever(context(tmp_path, workspace))
    try:
        # Words only by default: the by-vector retriever leaves every search plan.
        assert retriever.index.vectors is stored and retriever.switched_off() is not stored
    finally:
        retriever.index.close()
