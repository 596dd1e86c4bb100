"""``kairox.registers``: a register hook made from a table of records."""

from __future__ import annotations

from types import ModuleType

from kairox import RerankerSpec, SummarizerSpec, registers
from kairox.plugin_host.manager import build_plugin_manager
from kairox.testing import registered_plugin


def _build(ctx):
    return "built"


def _plugin_module(**hooks: object) -> ModuleType:
    # A module, as the built-ins and installed plugins are.
    module = ModuleType("kairox_table_plugin")
    for name, hook in hooks.items():
        setattr(module, name, hook)
    return module


def test_registers_every_record_in_order_under_the_plugin():
    plugin = _plugin_module(
        kairox_register_rerankers=registers(
            RerankerSpec(name="first", factory=_build, description="one"),
            RerankerSpec(name="second", factory=_build),
        )
    )
    with registered_plugin(plugin, "table-plugin", build_plugin_manager(entry_points=False)) as pm:
        table = pm.registry.rerankers
        assert [name for name in table if name in {"first", "second"}] == ["first", "second"]
        assert table.provider("second") == "table-plugin"
        assert table["first"].description == "one" and table["first"].factory(None) == "built"
        assert pm.infos["table-plugin"].hooks == ["kairox_register_rerankers"]


def test_a_record_of_the_wrong_kind_fails_the_plugin_naming_it():
    plugin = _plugin_module(
        kairox_register_rerankers=registers(SummarizerSpec(name="oops", factory=_build))
    )
    with registered_plugin(plugin, "wrong-kind", build_plugin_manager(entry_points=False)) as pm:
        assert "oops" not in pm.registry.rerankers
        error = str(pm.infos["wrong-kind"].error)
        assert "'wrong-kind'" in error and "RerankerSpec" in error
