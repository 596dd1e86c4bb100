"""The plugin API is importable from ``kairox`` itself, without making ``import kairox`` heavy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import kairox


@pytest.mark.parametrize("name", sorted(kairox._PLUGIN_API))
def test_each_name_is_its_modules_own_object(name):
    module = __import__(kairox._PLUGIN_API[name], fromlist=[name])
    assert getattr(kairox, name) is getattr(module, name)
    assert name in kairox.__all__ and name in dir(kairox)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        kairox.Nope  # noqa: B018


def test_import_kairox_loads_none_of_the_plugin_api_modules():
    script = (
        "import json, sys, kairox\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('kairox'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    # kairox.support.moved (stdlib only) serves the module paths from before the re-layout
    assert json.loads(out.stdout) == ["kairox", "kairox.support", "kairox.support.moved"]
