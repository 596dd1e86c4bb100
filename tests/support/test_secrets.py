"""kairox.support.secrets: a ``*_env`` key names a variable, never holds the secret, and the
variable's value never reaches error text or logs."""

from __future__ import annotations

import logging
import textwrap

import pytest
from pydantic import BaseModel, ValidationError

from kairox.config.loader import load_config
from kairox.plugin_host.manager import build_plugin_manager
from kairox.support.secrets import (
    MASK,
    EnvVarName,
    check_env_name,
    install_log_scrubbing,
    register_env,
    register_env_keys,
    scrub,
)


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


# -- scrubbing -------------------------------------------------------------------------


def test_scrub_masks_the_current_value_of_registered_variables(monkeypatch):
    monkeypatch.setenv("SECRETS_TEST_A", "alpha-secret-value")
    monkeypatch.setenv("SECRETS_TEST_B", "short")
    monkeypatch.setenv("SECRETS_TEST_UNREGISTERED", "beta-secret-value")
    register_env_keys({"api_key_env": "SECRETS_TEST_A", "nested": {"x_env": "SECRETS_TEST_B"}})
    text = "a=alpha-secret-value b=short c=beta-secret-value"
    # Too-short values would mask ordinary words; unregistered variables are not secrets.
    assert scrub(text) == f"a={MASK} b=short c=beta-secret-value"
    monkeypatch.setenv("SECRETS_TEST_A", "rotated-secret-value")
    assert scrub("alpha-secret-value rotated-secret-value") == f"alpha-secret-value {MASK}"


def test_a_secret_containing_another_is_masked_whole(monkeypatch):
    monkeypatch.setenv("SECRETS_TEST_SHORTER", "abcdef123")
    monkeypatch.setenv("SECRETS_TEST_LONGER", "abcdef123456789")
    register_env("SECRETS_TEST_SHORTER")
    register_env("SECRETS_TEST_LONGER")
    assert scrub("key abcdef123456789") == f"key {MASK}"


def test_loading_a_config_registers_every_env_key_defaults_included(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("SECRETS_TEST_PROFILE_KEY", "sk-profile-123456")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-default-name-654321")
    (tmp_path / "kairox.toml").write_text(
        textwrap.dedent(
            """
            [profiles.other]
            api_key_env = "SECRETS_TEST_PROFILE_KEY"
            """
        )
    )
    registry = build_plugin_manager(entry_points=False).registry
    load_config(cwd=tmp_path, registry=registry)
    assert scrub("sk-profile-123456 / sk-default-name-654321") == f"{MASK} / {MASK}"


def test_log_records_are_scrubbed_whoever_formats_them(monkeypatch, caplog):
    monkeypatch.setenv("SECRETS_TEST_LOG", "log-secret-abcdef")
    register_env("SECRETS_TEST_LOG")
    install_log_scrubbing()
    install_log_scrubbing()  # idempotent
    logger = logging.getLogger("kairox_some_plugin.client")
    with caplog.at_level(logging.WARNING):
        logger.warning("server said %s", "Authorization: Bearer log-secret-abcdef")
        try:
            raise RuntimeError("echo log-secret-abcdef")
        except RuntimeError:
            logger.exception("failed")
    assert caplog.records[0].getMessage() == f"server said Authorization: Bearer {MASK}"
    assert "log-secret-abcdef" not in caplog.text
    assert f"echo {MASK}" in caplog.text
