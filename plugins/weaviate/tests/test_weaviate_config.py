"""``[knowledge_bases.<id>]`` with ``kind = "weaviate"``: defaults, checks, and loading from a
real ``kairox.toml``."""

from __future__ import annotations

import pytest
from kairox_weaviate import WeaviateConfig, build_filter
from pydantic import ValidationError

from kairox.config.errors import ConfigError
from kairox.config.loader import load_config
from kairox.plugin_host.manager import KairoxPluginManager
from kairox.retrieval import QueryError
from kairox.testing import registered_plugin


def config(**keys) -> WeaviateConfig:
    keys.setdefault("url", "http://localhost:8080")
    keys.setdefault("collection", "Docs")
    keys.setdefault("embedding_backend", "hashing")
    return WeaviateConfig(kind="weaviate", **keys)


def test_defaults():
    c = config()
    assert (c.mode, c.alpha, c.grpc_port, c.text_property, c.id_property) == (
        "hybrid",
        0.5,
        50051,
        "text",
        "doc_id",
    )
    assert (c.http_host, c.http_port, c.http_secure, c.grpc_target_host) == (
        "localhost",
        8080,
        False,
        "localhost",
    )
    assert c.timeout_ms == 800 and c.tenant is None and c.target_vector is None


def test_https_defaults_to_443_and_a_secure_grpc_host_can_differ():
    c = config(
        url="https://abc.weaviate.cloud/", grpc_host="grpc-abc.weaviate.cloud", grpc_port=443
    )
    assert (c.url, c.http_port, c.http_secure, c.grpc_target_host) == (
        "https://abc.weaviate.cloud",
        443,
        True,
        "grpc-abc.weaviate.cloud",
    )


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"url": "localhost:8080"}, "http"),
        ({"url": "ftp://host"}, "http"),
        ({"url": "http://host:99999"}, "invalid port"),
        ({"url": "http://host:8080/v1"}, "without a path"),
        ({"collection": "my docs"}, "collection name"),
        ({"collection": "1Docs"}, "collection name"),
        ({"text_property": "body text"}, "property name"),
        ({"api_key_env": "sk-123-secret"}, "environment variable name"),
        ({"mode": "semantic"}, "bm25"),
        ({"mode": "near_vector", "embedding_backend": None}, "needs embedding_backend"),
        ({"mode": "hybrid", "embedding_backend": None}, "needs embedding_backend"),
        ({"mode": "bm25", "alpha": 0.3}, 'alpha only applies to mode = "hybrid"'),
        ({"alpha": 1.5}, "less than or equal to 1"),
        ({"grpc_port": 0}, "greater than or equal to 1"),
        ({"filters": {"topic": {"a": 1}}}, "filters"),
        ({"filters": {"bad key": "x"}}, "not a Weaviate property name"),
        ({"id_property": "text"}, "must be different"),
        ({"colour": "red"}, "Extra inputs"),
    ],
)
def test_bad_settings_are_rejected(keys, message):
    with pytest.raises(ValidationError, match=message):
        config(**keys)


def test_an_empty_id_property_turns_it_off():
    assert config(id_property="").id_property is None


def test_bm25_needs_no_embedding_backend():
    c = config(mode="bm25", embedding_backend=None)
    assert c.embedding_backend is None


def test_build_filter_translates_equality_any_of_and_and():
    from weaviate.collections.classes.filters import _FilterAnd, _FilterValue

    assert build_filter({}) is None
    single = build_filter({"topic": "cooking"})
    assert isinstance(single, _FilterValue) and single.value == "cooking"
    assert single.operator.value == "Equal"
    both = build_filter({"topic": ["a", "b"]}, {"year": 2021})
    assert isinstance(both, _FilterAnd) and len(both.filters) == 2
    assert both.filters[0].operator.value == "ContainsAny"
    assert build_filter({"year": [2020, 2021.5]}).value == [2020.0, 2021.5]
    with pytest.raises(QueryError):
        build_filter({"topic": [True, "x"]})


def test_a_kairox_toml_table_loads_through_the_registered_kind(tmp_path):
    import kairox_weaviate

    (tmp_path / "kairox.toml").write_text(
        "[knowledge_bases.handbook]\n"
        'kind = "weaviate"\n'
        'url = "http://localhost:8080"\n'
        'collection = "Handbook"\n'
        'mode = "hybrid"\n'
        "alpha = 0.7\n"
        'embedding_backend = "hashing"\n'
        'api_key_env = "WEAVIATE_API_KEY"\n'
        'filters = { lang = "en", team = ["infra", "data"] }\n'
        "timeout_ms = 1500\n"
    )
    pm = KairoxPluginManager()
    with registered_plugin(kairox_weaviate, "weaviate-under-test", pm):
        loaded = load_config(config_path=tmp_path / "kairox.toml", registry=pm.registry)
    entry = loaded.knowledge_bases["handbook"]
    assert entry.available and isinstance(entry.config, WeaviateConfig)
    assert entry.config.alpha == 0.7 and entry.config.timeout_ms == 1500
    assert entry.config.filters == {"lang": "en", "team": ["infra", "data"]}


def test_a_typo_in_kairox_toml_names_the_key(tmp_path):
    import kairox_weaviate

    (tmp_path / "kairox.toml").write_text(
        "[knowledge_bases.handbook]\n"
        'kind = "weaviate"\n'
        'url = "http://localhost:8080"\n'
        'colection = "Handbook"\n'
    )
    pm = KairoxPluginManager()
    with (
        registered_plugin(kairox_weaviate, "weaviate-under-test", pm),
        pytest.raises(ConfigError, match="colection") as caught,
    ):
        load_config(config_path=tmp_path / "kairox.toml", registry=pm.registry)
    assert "collection" in str(caught.value)
