"""The plugin host: built-ins, entry points, the allow-list, failures and clashes."""

from __future__ import annotations

import pytest

from kairox import hookimpl
from kairox.plugin_host.manager import (
    BUILTIN_PLUGINS,
    KairoxPluginManager,
    PluginError,
    allow_list_from_env,
    build_plugin_manager,
    get_plugin_manager,
)
from kairox.plugin_host.registry import EmbeddingBackendSpec, KnowledgeBaseKind
from kairox.testing import registered_plugin

GOOD_PLUGIN = """
from kairox import hookimpl
from kairox.plugin_host.registry import EmbeddingBackendSpec

@hookimpl
def kairox_register_embedding_backends(register):
    register(EmbeddingBackendSpec(name="{name}", factory=lambda: None))
"""


def test_builtins_load_and_register_through_the_hooks():
    pm = build_plugin_manager(entry_points=False)
    infos = pm.plugin_infos(include_builtins=True)
    assert [i.name for i in infos] == sorted(BUILTIN_PLUGINS)
    assert all(i.status == "ok" and i.builtin for i in infos)
    assert "hashing" in pm.registry.embedding_backends
    assert "sqlite-fts" in pm.registry.knowledge_base_kinds
    assert pm.registry.knowledge_base_kinds.provider("sqlite-fts") == (
        "kairox.default_plugins.sqlite_fts"
    )


def test_builtins_are_hidden_unless_asked_for():
    pm = build_plugin_manager(entry_points=False)
    assert pm.plugin_infos() == []


def test_get_plugin_manager_is_built_once():
    assert get_plugin_manager() is get_plugin_manager()


def test_entry_point_plugins_load(make_distribution):
    make_distribution("kairox-good", "good_plugin", GOOD_PLUGIN.format(name="good-embed"))
    pm = build_plugin_manager(builtins=False)
    info = pm.infos["good_plugin"]
    assert (info.package, info.version, info.status) == ("kairox-good", "0.1.0", "ok")
    assert info.hooks == ["kairox_register_embedding_backends"]
    assert pm.registry.embedding_backends.provider("good-embed") == "good_plugin"


def test_import_failure_is_reported_by_name_with_the_cause_chained(make_distribution):
    make_distribution("kairox-broken", "broken_plugin", "raise RuntimeError('boom at import')")
    make_distribution("kairox-good", "good_plugin", GOOD_PLUGIN.format(name="good-embed"))
    pm = build_plugin_manager(builtins=False)
    failed = pm.infos["broken_plugin"]
    assert failed.status == "failed"
    assert isinstance(failed.error, PluginError)
    assert "broken_plugin" in str(failed.error) and "kairox-broken" in str(failed.error)
    assert "boom at import" in str(failed.error)
    assert isinstance(failed.error.__cause__, RuntimeError)
    data = failed.as_json()
    assert data["status"] == "failed" and "boom at import" in data["traceback"]
    # the healthy plugin next to it is untouched
    assert "good-embed" in pm.registry.embedding_backends


@pytest.mark.parametrize(
    ("allow", "expected"),
    [
        (None, {"alpha_plugin", "beta_plugin"}),
        ({"alpha_plugin"}, {"alpha_plugin"}),
        ({"kairox-beta"}, {"beta_plugin"}),
        (set(), set()),
    ],
)
def test_allow_list_limits_entry_points(make_distribution, allow, expected):
    make_distribution("kairox-alpha", "alpha_plugin", GOOD_PLUGIN.format(name="a"))
    make_distribution("kairox-beta", "beta_plugin", GOOD_PLUGIN.format(name="b"))
    pm = build_plugin_manager(builtins=False, allow=allow)
    # other installed plugins (the template, say) may load too; only ours are under test
    assert set(pm.infos) & {"alpha_plugin", "beta_plugin"} == expected
    if allow == set():
        assert pm.infos == {}


def test_allow_list_env_parsing(monkeypatch):
    assert allow_list_from_env({}) is None
    assert allow_list_from_env({"KAIROX_LOAD_PLUGINS": ""}) == set()
    assert allow_list_from_env({"KAIROX_LOAD_PLUGINS": " a, b ,,"}) == {"a", "b"}


def test_duplicate_registration_names_both_plugins():
    class First:
        @hookimpl
        def kairox_register_embedding_backends(self, register):
            register(EmbeddingBackendSpec(name="twin", factory=lambda: None))

    class Second:
        @hookimpl
        def kairox_register_embedding_backends(self, register):
            register(EmbeddingBackendSpec(name="solo", factory=lambda: None))
            register(EmbeddingBackendSpec(name="twin", factory=lambda: None))

    pm = KairoxPluginManager()
    with registered_plugin(First(), "first", pm), registered_plugin(Second(), "second", pm):
        registry = pm.registry
        assert registry.embedding_backends.provider("twin") == "first"
        error = str(pm.infos["second"].error)
        assert "'twin'" in error and "'first'" in error and "'second'" in error
        # all or nothing: the clashing plugin's other registration is withdrawn too
        assert "solo" not in registry.embedding_backends


def test_a_hook_that_raises_fails_only_its_plugin():
    class Raises:
        @hookimpl
        def kairox_register_knowledge_base_kinds(self, register):
            raise ValueError("cannot register today")

    pm = build_plugin_manager(entry_points=False)
    with registered_plugin(Raises(), "raises", pm):
        assert "sqlite-fts" in pm.registry.knowledge_base_kinds
        info = pm.infos["raises"]
        assert info.status == "failed"
        assert "cannot register today" in str(info.error)
        assert isinstance(info.error.__cause__, ValueError)


def test_registering_the_wrong_type_is_reported():
    class Wrong:
        @hookimpl
        def kairox_register_knowledge_base_kinds(self, register):
            register(EmbeddingBackendSpec(name="x", factory=lambda: None))

    pm = KairoxPluginManager()
    with registered_plugin(Wrong(), "wrong", pm):
        pm.registry  # noqa: B018
        assert "KnowledgeBaseKind" in str(pm.infos["wrong"].error)


def test_unknown_hook_name_fails_the_plugin_not_the_host(make_distribution):
    make_distribution(
        "kairox-typo",
        "typo_plugin",
        """
        from kairox import hookimpl

        @hookimpl
        def kairox_register_embeding_backends(register):
            pass
        """,
    )
    pm = build_plugin_manager()
    assert pm.infos["typo_plugin"].status == "failed"
    assert "kairox_register_embeding_backends" in str(pm.infos["typo_plugin"].error)
    assert pm.get_plugin("typo_plugin") is None
    assert "hashing" in pm.registry.embedding_backends


def test_same_plugin_name_from_two_packages(make_distribution):
    make_distribution("kairox-one", "one_plugin", GOOD_PLUGIN.format(name="x"), entry_name="dup")
    make_distribution("kairox-two", "two_plugin", GOOD_PLUGIN.format(name="y"), entry_name="dup")
    pm = build_plugin_manager(builtins=False)
    # the first keeps the name; the clash is reported naming both packages
    assert "x" in pm.registry.embedding_backends
    assert "y" not in pm.registry.embedding_backends
    clash = pm.infos["dup (kairox-two)"]
    assert clash.status == "failed"
    assert "kairox-one" in str(clash.error) and "kairox-two" in str(clash.error)


def test_registered_plugin_always_unregisters():
    class Temporary:
        @hookimpl
        def kairox_register_knowledge_base_kinds(self, register):
            register(KnowledgeBaseKind(name="temp", config_model=object, factory=print))

    pm = build_plugin_manager(entry_points=False)
    with pytest.raises(RuntimeError), registered_plugin(Temporary(), "temporary", pm):
        assert "temp" in pm.registry.knowledge_base_kinds
        raise RuntimeError("test body failed")
    assert "temp" not in pm.registry.knowledge_base_kinds
    assert "temporary" not in pm.infos


def test_hooks_are_called_through_pluggy_so_monitoring_sees_each_plugin():
    class Embeds:
        @hookimpl
        def kairox_register_embedding_backends(self, register):
            register(EmbeddingBackendSpec(name="seen", factory=lambda: None))

    pm = build_plugin_manager(entry_points=False)
    calls: list[tuple[str, list[str]]] = []

    def before(hook_name, hook_impls, kwargs):
        calls.append((hook_name, [impl.plugin_name for impl in hook_impls]))

    undo = pm.add_hookcall_monitoring(before, lambda outcome, name, impls, kwargs: None)
    try:
        with registered_plugin(Embeds(), "embeds", pm):
            assert "seen" in pm.registry.embedding_backends
    finally:
        undo()
    # One call per plugin and hook, each with that plugin's implementation alone.
    assert ("kairox_register_embedding_backends", ["embeds"]) in calls
    assert (
        "kairox_register_workspace_retrievers",
        ["kairox.default_plugins.workspace_rag"],
    ) in calls
    assert all(len(impls) == 1 for _, impls in calls)


def test_call_for_plugin_calls_that_plugin_only():
    class A:
        @hookimpl
        def kairox_register_embedding_backends(self, register):
            register("a")

    class B:
        @hookimpl
        def kairox_register_embedding_backends(self, register):
            register("b")

    pm = KairoxPluginManager()
    a, b = A(), B()
    pm.register(a, "a")
    pm.register(b, "b")
    got: list[str] = []
    pm.call_for_plugin("kairox_register_embedding_backends", b, register=got.append)
    assert got == ["b"]
