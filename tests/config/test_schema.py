"""Tests for :mod:`kairox.config.schema`: where the files are, the schemas' own rules, visibility,
resolving profiles and how problems read."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from kairox.config.errors import ConfigError, ConfigProblem
from kairox.config.loader import load_config
from kairox.config.schema import ProfileConfig, find_workspace_config, user_config_path
from kairox.plugin_host.registry import Registry
from kairox.workspace.file_ranking import ASKED_PATH_BONUS, ASKED_ROLE_WEIGHT

from .conftest import load_ws, problems_of, write


def test_user_config_path_follows_xdg(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path.home()
    assert user_config_path() == home / ".config" / "kairox" / "config.toml"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(env / "xdg"))
    assert user_config_path() == env / "xdg" / "kairox" / "config.toml"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert user_config_path() == home / ".config" / "kairox" / "config.toml"


def test_find_workspace_config_walks_up(env: Path, registry: Registry) -> None:
    ws_file = write(env / "kairox.toml", '[profiles.fast]\nmodel = "small"\n')
    deep = env / "a" / "b" / "c"
    deep.mkdir(parents=True)
    assert find_workspace_config(deep) == ws_file

    config = load_config(cwd=deep, registry=registry)
    assert config.workspace_file == ws_file
    assert config.root == env
    assert config.files == [ws_file]
    assert config.profiles["fast"].model == "small"


def test_no_files_gives_builtin_default_profile(env: Path, registry: Registry) -> None:
    config = load_config(cwd=env, registry=registry)
    assert config.files == []
    assert config.workspace_file is None
    assert config.root == env
    assert config.profiles == {"default": ProfileConfig()}
    assert config.profiles["default"].context_window == 128000
    assert config.knowledge_bases == {}


def test_headroom_must_be_below_context_window(env: Path, registry: Registry) -> None:
    err, _ = problems_of(
        env, "[profiles.default]\ncontext_window = 8000\nheadroom = 8000\n", registry
    )
    [problem] = err.problems
    assert problem.key == "headroom"
    assert "smaller than context_window" in problem.problem
    with pytest.raises(ValueError, match="smaller than context_window"):
        ProfileConfig(context_window=100, headroom=200)


def test_knowledge_base_chunking_keys(env: Path, registry: Registry) -> None:
    config = load_ws(
        env,
        """
        [knowledge_bases.papers]
        kind = "sqlite-fts"
        path = "a.db"
        chunk_tokens = 128
        chunk_overlap = 16
        """,
        registry,
    )
    settings = config.knowledge_bases["papers"].config
    assert (settings.chunk, settings.chunk_tokens, settings.chunk_overlap) == (True, 128, 16)
    # An overlap as long as the chunk: a case of test_config_problems' ONE_PROBLEM table.


def test_workspace_sentence_weight_default_and_range(env: Path, registry: Registry) -> None:
    # Unset: the embedder's own (kairox.retrieval.vectors.default_sentence_weight).
    assert load_ws(env, "", registry).workspace.sentence_weight is None
    config = load_ws(env, "[workspace]\nsentence_weight = 0\n", registry)
    assert config.workspace.sentence_weight == 0
    err, _ = problems_of(env, "[workspace]\nsentence_weight = 1.5\n", registry)
    [problem] = err.problems
    assert problem.key == "sentence_weight"
    assert "sentence_weight = 0.5" in problem.fix


def test_workspace_file_ranking_settings(env: Path, registry: Registry) -> None:
    defaults = load_ws(env, "", registry).workspace
    assert (defaults.role_weights, defaults.file_evidence, defaults.candidate_depth) == (
        {},
        0.2,
        100,
    )
    text = "[workspace]\nrole_weights = { test = 1.0, docs = 0.5 }\nfile_evidence = 0\n"
    config = load_ws(env, text, registry).workspace
    assert config.role_weights == {"test": 1.0, "docs": 0.5} and config.file_evidence == 0
    err, _ = problems_of(env, "[workspace]\nrole_weights = { tests = 1.0 }\n", registry)
    [problem] = err.problems
    assert problem.key == "role_weights"
    assert (
        "'tests' is not a file role" in problem.problem
        and "implementation, test" in problem.problem
    )
    assert defaults.asked_role_weight == ASKED_ROLE_WEIGHT
    assert defaults.asked_path_bonus == ASKED_PATH_BONUS
    raised = load_ws(env, "[workspace]\nasked_role_weight = 1\n", registry).workspace
    assert raised.asked_role_weight == 1.0
    err, _ = problems_of(env, "[workspace]\nasked_role_weight = -2\n", registry)
    [problem] = err.problems
    assert problem.key == "asked_role_weight" and "asked_role_weight = 1.5" in problem.fix
    err, _ = problems_of(env, "[workspace]\nasked_path_bonus = -1\n", registry)
    assert [p.key for p in err.problems] == ["asked_path_bonus"]
    err, _ = problems_of(env, "[workspace]\ncandidate_depth = 0\n", registry)
    assert [p.key for p in err.problems] == ["candidate_depth"]


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "+inf"])
@pytest.mark.parametrize(
    "table",
    [
        '[knowledge_bases.kb]\nkind = "sqlite-fts"\npath = "kb.db"\nweight',
        "[workspace]\nsentence_weight",
    ],
)
def test_floats_must_be_finite(env: Path, registry: Registry, table: str, value: str) -> None:
    err, _ = problems_of(env, f"{table} = {value}\n", registry)
    [problem] = err.problems
    assert problem.key in ("weight", "sentence_weight")
    assert "finite" in problem.problem + problem.fix


def test_workspace_vector_pack_is_on_by_default_and_a_boolean(
    env: Path, registry: Registry
) -> None:
    assert load_ws(env, "", registry).workspace.vector_pack is True
    assert (
        load_ws(env, "[workspace]\nvector_pack = false\n", registry).workspace.vector_pack is False
    )
    err, _ = problems_of(env, '[workspace]\nvector_pack = "no"\n', registry)
    [problem] = err.problems
    assert problem.key == "vector_pack"
    assert "vector_pack = false" in problem.fix


def test_workspace_vector_format_is_float16_by_default_and_one_of_the_formats(
    env: Path, registry: Registry
) -> None:
    assert load_ws(env, "", registry).workspace.vector_format == "float16"
    loaded = load_ws(env, '[workspace]\nvector_format = "int8"\n', registry)
    assert loaded.workspace.vector_format == "int8"
    err, _ = problems_of(env, '[workspace]\nvector_format = "float8"\n', registry)
    [problem] = err.problems
    assert problem.key == "vector_format"
    assert "'float16'" in problem.fix and "'int8'" in problem.fix


#: Two profiles (``fast`` also called ``quick``) and knowledge bases each sees or not.
VISIBILITY = Path(__file__).parent / "data" / "visibility.toml"


def test_visibility_by_name_and_alias(env: Path, registry: Registry) -> None:
    config = load_ws(env, VISIBILITY.read_text(), registry)
    ids = lambda profile: [e.id for e in config.visible_knowledge_bases(profile)]  # noqa: E731
    assert ids("default") == ["everyone", "default_only"]
    assert ids("fast") == ["everyone", "fast_by_name", "fast_by_alias"]
    assert ids("quick") == ids("fast")
    assert config.is_visible("fast_by_alias", "fast")
    assert not config.is_visible("fast_by_alias", "default")
    assert not config.is_visible("off", "default")
    with pytest.raises(KeyError):
        config.is_visible("nope", "default")


def test_resolve_profile_by_name_alias_and_unknown(env: Path, registry: Registry) -> None:
    config = load_ws(env, '[profiles.fast]\nmodel = "small"\naliases = ["quick"]\n', registry)
    assert config.resolve_profile("fast") == ("fast", config.profiles["fast"])
    name, profile = config.resolve_profile("quick")
    assert name == "fast"
    assert profile.model == "small"
    with pytest.raises(ConfigError) as info:
        config.resolve_profile("quik")
    assert "did you mean 'quick'?" in str(info.value)


def test_problem_rendering_leaves_out_missing_parts() -> None:
    full = ConfigProblem(Path("/a/kairox.toml"), "profiles.x", "model", "bad value", "fix it")
    assert str(full) == "/a/kairox.toml: [profiles.x] model: bad value. Fix: fix it"
    bare = ConfigProblem(None, None, None, "bad", "do this")
    assert str(bare) == "bad. Fix: do this"
    err = ConfigError([full, bare])
    assert str(err).splitlines() == [str(full), str(bare)]
    assert pickle.loads(pickle.dumps(err)).problems == [full, bare]
