"""kairox.support.lazy_imports: an optional library imports on first use, or says what to install."""

from __future__ import annotations

import sys

import pytest

from kairox.support.errors import BackendError, BackendTimeoutError, KairoxError
from kairox.support.lazy_imports import LazyImport


def test_load_returns_the_first_module_and_imports_the_rest():
    lazy = LazyImport("json", "json.decoder", needed_by="the test", install="pip install json")
    module = lazy.load()
    assert module is sys.modules["json"]
    assert lazy.error is None and lazy.available()


def test_a_missing_module_raises_the_install_hint_and_is_recorded(monkeypatch):
    monkeypatch.setitem(sys.modules, "kairox_no_such_lib", None)
    lazy = LazyImport(
        "kairox_no_such_lib",
        needed_by="the 'demo' kind",
        install="pip install kairox-demo",
        distributions={"kairox_no_such_lib": "kairox-no-such-lib"},
    )
    with pytest.raises(
        ImportError, match=r"the 'demo' kind needs the 'kairox-no-such-lib'"
    ) as caught:
        lazy.load()
    assert str(caught.value).endswith(": pip install kairox-demo")
    assert caught.value.name == "kairox_no_such_lib"
    assert isinstance(caught.value.__cause__, ImportError)
    assert lazy.error is caught.value
    with pytest.raises(ImportError, match="pip install kairox-demo"):
        lazy.check()
    assert not lazy.available()


def test_check_finds_without_importing():
    name = "kairox.bench.beir"
    sys.modules.pop(name, None)
    LazyImport(name, needed_by="the test", install="-").check()
    assert name not in sys.modules


def test_a_library_installed_later_loads_on_the_next_call(monkeypatch):
    monkeypatch.setitem(sys.modules, "json", None)
    lazy = LazyImport("json", needed_by="the test", install="-")
    with pytest.raises(ImportError):
        lazy.load()
    monkeypatch.undo()
    assert lazy.load() is sys.modules["json"] and lazy.error is None


def test_plugin_errors_share_one_base_the_cli_formats():
    assert issubclass(BackendError, KairoxError) and issubclass(BackendError, RuntimeError)
    assert issubclass(BackendTimeoutError, BackendError)
    assert issubclass(BackendTimeoutError, TimeoutError)
