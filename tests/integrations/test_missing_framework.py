"""Importing an integration without its framework: an ImportError that names the extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize(
    ("framework", "module", "extra"),
    [
        ("langchain_core", "kairox.integrations.langchain", "langchain"),
        ("llama_index", "kairox.integrations.llama_index", "llamaindex"),
    ],
    ids=["langchain", "llama_index"],
)
def test_without_the_framework_the_error_names_the_extra(
    workspace: Path, framework: str, module: str, extra: str
):
    script = f"import sys; sys.modules[{framework!r}] = None\nimport {module}\n"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode != 0
    assert f"pip install 'kairox[{extra}]'" in result.stderr
