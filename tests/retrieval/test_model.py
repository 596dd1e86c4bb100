"""The retrieval data model's names: ``Source`` and its deprecated old name."""

from __future__ import annotations

import pytest

import kairox.retrieval
import kairox.retrieval.model
from kairox.retrieval import Source


@pytest.mark.parametrize("module", [kairox.retrieval, kairox.retrieval.model])
def test_workspace_retriever_is_source_with_a_deprecation_warning(module):
    with pytest.warns(DeprecationWarning, match=r"WorkspaceRetriever is deprecated.*\.Source"):
        old = module.WorkspaceRetriever
    assert old is Source


def test_an_unknown_name_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        kairox.retrieval.Nope  # noqa: B018
