"""The module paths from before the re-layout: each still imports, warns, and is the moved
module itself (relayout: keep old names -- the re-layout script leaves this file as it is)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import kairox
from kairox.config import schema
from kairox.store import sqlite
from kairox.support import moved, paths


@pytest.fixture
def forget(monkeypatch: pytest.MonkeyPatch):
    """Forget that an old name was imported, so importing it again goes through the hook."""

    def forget(old: str) -> None:
        monkeypatch.delitem(sys.modules, old, raising=False)
        parent, _, leaf = old.rpartition(".")
        monkeypatch.delattr(sys.modules[parent], leaf, raising=False)

    return forget


def test_an_old_name_is_the_moved_module_and_warns(forget):
    forget("kairox.storage")
    with pytest.warns(
        DeprecationWarning, match=r"kairox\.storage is deprecated: import kairox\.store\.sqlite"
    ):
        old = importlib.import_module("kairox.storage")
    assert old is sqlite
    assert old.__name__ == old.__spec__.name == "kairox.store.sqlite"


def test_from_kairox_import_an_old_module(forget):
    forget("kairox.paths")
    with pytest.warns(DeprecationWarning, match=r"import kairox\.support\.paths"):
        from kairox import paths as old
    assert old is paths


def test_monkeypatching_through_an_old_name_patches_the_moved_module(monkeypatch):
    monkeypatch.setenv("KAIROX_HOME", "/somewhere")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        monkeypatch.setattr("kairox.paths.kairox_home", lambda: "patched")
    assert paths.kairox_home() == "patched"


def test_every_old_name_leads_to_a_module_and_none_is_still_a_file():
    core = Path(kairox.__file__).parent
    for old, new in moved.MOVED.items():
        assert importlib.import_module(new).__name__ == new
        assert not (core / (old.removeprefix("kairox.") + ".py")).exists(), old


def test_names_of_the_old_config_module_come_from_the_schema(monkeypatch):
    import kairox.config as package

    monkeypatch.delitem(package.__dict__, "KnowledgeBaseConfig", raising=False)
    with pytest.warns(DeprecationWarning, match=r"kairox\.config\.schema\.KnowledgeBaseConfig"):
        from kairox.config import KnowledgeBaseConfig
    assert KnowledgeBaseConfig is schema.KnowledgeBaseConfig
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        package.Nope  # noqa: B018


def test_an_unknown_name_is_still_not_found():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("kairox.no_such_module")


def test_the_warning_names_the_line_that_imports_the_old_name(tmp_path):
    script = tmp_path / "user_code.py"
    script.write_text("import warnings\nwarnings.simplefilter('always')\nimport kairox.facade\n")
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True
    )
    assert f"{script}:3: DeprecationWarning: kairox.facade is deprecated" in result.stderr
