"""``kairox plugins``, ``kairox install`` and ``kairox --version``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kairox import __version__
from kairox.cli import plugins_cmd
from kairox.plugin_host.manager import BUILTIN_PLUGINS


def test_version(invoke):
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.output.strip() == f"kairox, version {__version__}"


def test_plugins_all_json_lists_every_builtin_ok(kairox_process):
    result = kairox_process("plugins", "--all", "--json")
    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)
    builtins = [p for p in listed if p["builtin"]]
    assert {p["name"] for p in builtins} == set(BUILTIN_PLUGINS)
    assert all(p["status"] == "ok" and p["hooks"] for p in builtins)


def test_plugins_without_all_hides_builtins(invoke):
    result = invoke("plugins", "--json")
    assert result.exit_code == 0
    assert json.loads(result.output) == []


def test_plugins_table(invoke):
    result = invoke("plugins", "--all")
    assert result.exit_code == 0
    assert "sqlite_fts" in result.output
    assert "knowledge_base_kinds" in result.output


def test_broken_plugin_is_listed_as_failed_and_config_check_still_works(
    make_distribution, kairox_process, workspace
):
    site = make_distribution(
        "kairox-broken", "broken_plugin", "import no_such_module_anywhere  # noqa\n"
    )
    result = kairox_process("plugins", "--json", pythonpath=site)
    assert result.returncode == 0, result.stderr
    [broken] = [p for p in json.loads(result.stdout) if p["name"] == "broken_plugin"]
    assert broken["status"] == "failed"
    assert broken["package"] == "kairox-broken"
    assert "no_such_module_anywhere" in broken["error"]
    assert "ModuleNotFoundError" in broken["traceback"]

    (workspace / "kairox.toml").write_text(
        '[knowledge_bases.papers]\nkind = "sqlite-fts"\npath = "papers.db"\n'
    )
    check = kairox_process("config", "check", pythonpath=site)
    assert check.returncode == 0, check.stderr
    assert "papers" in check.stdout
    assert "broken_plugin" in check.stderr  # reported, not fatal


def test_install_runs_pip_in_this_environment(monkeypatch, invoke):
    calls = []

    def fake_run(command, check):
        calls.append(command)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(plugins_cmd.subprocess, "run", fake_run)
    result = invoke("install", "-U", "kairox-something")
    assert result.exit_code == 0, result.output
    assert calls == [[sys.executable, "-m", "pip", "install", "--upgrade", "kairox-something"]]


def test_install_reports_pip_failure(monkeypatch, invoke):
    monkeypatch.setattr(
        plugins_cmd.subprocess,
        "run",
        lambda command, check: subprocess.CompletedProcess(command, 1),
    )
    result = invoke("install", "no-such-package")
    assert result.exit_code == 1
    assert "pip exited with status 1" in result.output


def test_install_first_party_plugin_from_source_checkout(monkeypatch, invoke, tmp_path):
    folder = tmp_path / "plugins" / "tantivy"
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text("[project]\nname = 'kairox-tantivy'\n")
    monkeypatch.setattr(plugins_cmd, "source_checkout_plugin", lambda name: folder)
    calls = []
    monkeypatch.setattr(
        plugins_cmd.subprocess,
        "run",
        lambda command, check: calls.append(command) or subprocess.CompletedProcess(command, 0),
    )
    result = invoke("install", "kairox-tantivy")
    assert result.exit_code == 0
    assert calls[0][-1] == str(folder)


def test_unknown_packages_are_not_resolved_to_folders():
    assert plugins_cmd.source_checkout_plugin("requests") is None


@pytest.mark.parametrize(
    "spelling",
    ["kairox-sentence-transformers[onnx,openvino]", "Kairox_Sentence.Transformers[onnx]"],
)
def test_a_first_party_plugin_with_extras_installs_by_that_name(kairox_process, spelling):
    # The README's spelling; pip itself decides, in a dry run that needs no network.
    if plugins_cmd.source_checkout_plugin("kairox-sentence-transformers") is None:
        pytest.skip("not a source checkout: first-party plugins come from the package index")
    # No index, no dependencies, no isolated build environment (hatchling is installed),
    # and this machine's pip configuration left out.
    dry_run = {
        "PIP_DRY_RUN": "1",
        "PIP_NO_DEPS": "1",
        "PIP_NO_INDEX": "1",
        "PIP_NO_BUILD_ISOLATION": "0",
        "PIP_CONFIG_FILE": os.devnull,
    }
    result = kairox_process("install", spelling, env=dry_run)
    assert result.returncode == 0, result.stderr
    assert "Would install kairox-sentence-transformers" in result.stdout
    assert "plugins/sentence-transformers[onnx" in result.stderr


HIDE_DOCUMENT_LIBRARIES = (
    "import runpy, sys\n"
    "sys.modules.update(dict.fromkeys(['bs4', 'pypdf', 'docx', 'pptx', 'openpyxl']))\n"
    "sys.argv = ['kairox', *sys.argv[1:]]\n"
    "runpy.run_module('kairox', run_name='__main__')\n"
)


def test_plugins_lists_converters_whose_library_is_missing_as_not_installed(workspace):
    # A real process where the documents extra's libraries cannot be imported.
    result = subprocess.run(
        [sys.executable, "-c", HIDE_DOCUMENT_LIBRARIES, "plugins"],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    [line] = [line for line in result.stdout.splitlines() if "document converters" in line]
    available, _, missing = line.partition("; not installed: ")
    assert "markdown" in available and "notebook" in available
    for name in ("html", "pdf", "docx", "pptx", "xlsx"):
        assert name not in available and f"{name} (" in missing
    assert "pip install 'kairox[documents]'" in missing
    # with the libraries there (this environment), nothing is listed as missing
    shown = subprocess.run(
        [sys.executable, "-m", "kairox", "plugins"],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "document converters" in shown.stdout and "not installed: html" not in shown.stdout


def test_grammars_are_part_of_the_core_install_and_a_missing_one_names_its_wheel(
    invoke, monkeypatch
):
    from kairox.workspace.grammars import GRAMMARS, load_parser

    load_parser.cache_clear()
    try:
        installed = invoke("plugins").output
        assert "not installed" not in installed  # every grammar ships with kairox
        assert all(g.name in installed for g in GRAMMARS)
        monkeypatch.setitem(sys.modules, "tree_sitter_ruby", None)
        load_parser.cache_clear()
        missing = invoke("plugins").output
        assert "not installed: tree-sitter-ruby" in missing
        assert "pip install tree-sitter-ruby" in missing
    finally:
        load_parser.cache_clear()
