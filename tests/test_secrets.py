"""kairox.secrets: a ``*_env`` key names a variable, never holds the secret."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from kairox.secrets import EnvVarName, check_env_name


class _Schema(BaseModel):
    api_key_env: EnvVarName


@pytest.mark.parametrize("name", ["PINECONE_API_KEY", "_x", "a1"])
def test_a_variable_name_passes(name):
    assert check_env_name(name) == name
    assert _Schema(api_key_env=name).api_key_env == name


@pytest.mark.parametrize("value", ["sk-123-secret", "1ABC", "", "MY KEY"])
def test_a_value_is_rejected_with_the_fix(value):
    with pytest.raises(
        ValidationError, match=r"not an environment variable name.*never the secret"
    ):
        _Schema(api_key_env=value)


def test_only_strings():
    with pytest.raises(ValidationError, match="string"):
        _Schema(api_key_env=123)
