"""plugin-template/README.md, followed literally, leaves a working plugin whose tests pass.

The README's shell blocks run as written on a copy: the copy is renamed, a fresh virtual
environment gets Kairox (from a copy of this checkout) and the renamed plugin, `kairox
plugins` lists it as ok and its own tests pass. Two things differ from a user's run, both
to stay offline and fast: every `pip install` also gets `--no-index --no-deps
--no-build-isolation`, and the libraries Kairox depends on come from this test's own
environment (a folder of links to its site-packages without Kairox or any plugin, added
to the fresh environment with a `.pth` file).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "plugin-template" / "README.md"
PIP_OFFLINE = "pip install --no-index --no-deps --no-build-isolation "
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", "*.egg-info")


def _blocks(section: str) -> list[str]:
    """The ```bash blocks of one ``## section`` of the README, in order."""
    text = README.read_text(encoding="utf-8")
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return [
        "\n".join(line[indent:] if line[:indent].isspace() else line for line in code.split("\n"))
        for indent, code in (
            (len(m.group(1)), m.group(2))
            for m in re.finditer(r"( *)```bash\n(.*?)\n *```", body, re.S)
        )
    ]


def _overlay(folder: Path) -> Path:
    """Links to this environment's installed libraries, leaving out Kairox and its plugins."""
    folder.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        name = entry.name.lower()
        if "kairox" in name or name.endswith(".pth") or name.startswith("__editable__"):
            continue
        (folder / entry.name).symlink_to(entry)
    return folder


def _checkout(folder: Path) -> Path:
    """What `pip install -e "$KAIROX"` needs of this checkout, plus the template."""
    folder.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, folder / name)
    shutil.copytree(ROOT / "core", folder / "core", ignore=_IGNORE)
    shutil.copytree(ROOT / "plugin-template", folder / "plugin-template", ignore=_IGNORE)
    return folder


@pytest.mark.timeout(600)
def test_the_readme_steps_leave_a_working_tested_plugin(tmp_path):
    (rename,) = _blocks("Make it yours")
    (install,) = _blocks("Install and test")
    checkout = _checkout(tmp_path / "kairox")
    overlay = _overlay(tmp_path / "libraries")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(getattr(sys, "_base_executable", sys.executable))
    lines = install.split("\n")
    assert lines[0].startswith("python -m venv .venv"), lines[0]
    add_libraries = (
        '"$VIRTUAL_ENV/bin/python" -c "import sysconfig, pathlib; '
        "pathlib.Path(sysconfig.get_paths()['purelib'], 'kairox-test-libraries.pth')"
        f".write_text('{overlay}\\n')\""
    )
    script = "\n".join(
        [
            "set -euo pipefail",
            rename,
            lines[0],
            add_libraries,
            *(line.replace("pip install ", PIP_OFFLINE) for line in lines[1:]),
        ]
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"VIRTUAL_ENV", "PYTHONPATH", "KAIROX_LOAD_PLUGINS", "PYTHONHOME"}
    }
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", KAIROX_HOME=str(tmp_path / "home")
    )
    result = subprocess.run(
        ["bash", "-c", script], cwd=checkout, env=env, capture_output=True, text=True, timeout=600
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    plugin = tmp_path / "kairox-myretriever"
    assert (plugin / "src" / "kairox_myretriever" / "__init__.py").is_file()
    assert not (plugin / "src" / "kairox_example").exists()
    assert re.search(r"myretriever\s.*kairox-myretriever.*\bok\b", output), output
    assert re.search(r"\b\d+ passed\b", output) and " failed" not in output, output
