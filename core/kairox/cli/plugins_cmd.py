"""``kairox plugins`` and ``kairox install``, and loading plugins' own commands."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from kairox.cli.app import AppContext, console, console_err, fold_long_values, print_json
from kairox.cli.options import json_option
from kairox.support.terminal import printable

# First-party plugins live in this repository; from a source checkout `kairox install`
# installs them from their folder (they are not on the package index).
FIRST_PARTY_PLUGINS = {
    "kairox-tantivy": "tantivy",
    "kairox-sentence-transformers": "sentence-transformers",
    "kairox-bedrock": "bedrock",
    "kairox-pinecone": "pinecone",
    "kairox-weaviate": "weaviate",
}


@click.command()
@click.option("--all", "show_all", is_flag=True, help="Include the built-in plugins.")
@json_option("Print JSON instead of a table.")
@click.pass_obj
def plugins(app: AppContext, show_all: bool, as_json: bool) -> None:
    """List installed plugins: name, version, hooks and status."""
    infos = app.plugin_manager().plugin_infos(include_builtins=show_all)
    if as_json:
        print_json([info.as_json() for info in infos])
        return
    if not infos:
        console.print("No plugins installed. Use --all to include the built-ins.")
        print_grammars()
        print_converters(app.plugin_manager().registry)
        return
    table = Table("name", "package", "version", "registers", "status")
    fold_long_values(table)
    for info in infos:
        status = (
            Text("ok", style="green")
            if info.error is None
            else Text.assemble(("failed", "red"), f": {info.error}")
        )
        for note in info.notes:
            status.append(f"\n{printable(note)}", style="yellow")
        hooks = "\n".join(hook.removeprefix("kairox_register_") for hook in info.hooks)
        table.add_row(info.name, info.package or "", info.version or "", hooks, status)
    console.print(table)
    print_grammars()
    print_converters(app.plugin_manager().registry)


def print_converters(registry: Any) -> None:
    """Which document converters read which file types (a later plugin's claim wins)."""
    from kairox.workspace.convert.converters import Converters

    specs = [registry.converters[name] for name in registry.converters]
    winners = Converters(specs).by_suffix
    parts, missing, hints = [], [], []
    for spec in specs:
        claimed = [s for s in spec.suffixes if winners.get(s.lower()) is spec]
        if not claimed:
            continue
        named = f"{spec.name} ({' '.join(claimed)})"
        if spec.installed():
            parts.append(named)
        else:
            missing.append(named)
            if spec.install and spec.install not in hints:
                hints.append(spec.install)
    line = "document converters (file types read as text): " + (", ".join(parts) or "none")
    if missing:
        # Listed apart: their files are skipped as "converter not installed" until then.
        line += f"; not installed: {', '.join(missing)} ({'; '.join(hints) or 'see its plugin'})"
    console.print(printable(line), markup=False)


def print_grammars() -> None:
    """Which tree-sitter grammars code is chunked with (the others get line windows)."""
    from kairox.workspace.grammars import grammar_status

    status = grammar_status()
    have = [name for name, _, ok in status if ok]
    missing = sorted({package for _, package, ok in status if not ok})
    line = "code grammars (syntax-aware chunks): " + (", ".join(have) or "none")
    if missing:
        line += (
            f"; not installed: {', '.join(missing)} (their files get line windows; "
            f"pip install {' '.join(missing)})"
        )
    console.print(line, markup=False)


# A distribution name with optional extras (PEP 508, no version or marker):
# `kairox-sentence-transformers[onnx,openvino]`.
_NAME_WITH_EXTRAS = re.compile(
    r"\s*(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?P<extras>\[[^\]]*\])?\s*"
)


def source_checkout_plugin(package: str) -> Path | None:
    """The folder of a first-party plugin when kairox runs from a source checkout."""
    folder = FIRST_PARTY_PLUGINS.get(package)
    if folder is None:
        return None
    candidate = Path(__file__).resolve().parents[3] / "plugins" / folder
    return candidate if (candidate / "pyproject.toml").is_file() else None


def checkout_target(requirement: str) -> str | None:
    """What pip installs for ``requirement`` when it names a first-party plugin in this
    source checkout, extras kept (``/checkout/plugins/sentence-transformers[onnx]``);
    ``None`` for anything else (pip then resolves it as given)."""
    match = _NAME_WITH_EXTRAS.fullmatch(requirement)
    if match is None:
        return None
    # Names compare normalised (PEP 503): Kairox_Tantivy and kairox.tantivy are one.
    local = source_checkout_plugin(re.sub(r"[-_.]+", "-", match["name"]).lower())
    if local is None:
        return None
    extras = (match["extras"] or "").replace(" ", "")
    return f"{local}{extras if extras != '[]' else ''}"


@click.command()
@click.argument("packages", nargs=-1, required=True)
@click.option("-U", "--upgrade", is_flag=True, help="Upgrade packages that are already installed.")
@click.option("-e", "--editable", is_flag=True, help="Install local folders in editable mode.")
def install(packages: tuple[str, ...], upgrade: bool, editable: bool) -> None:
    """Install plugins with pip into the environment kairox runs in."""
    targets: list[str] = []
    for package in packages:
        local = checkout_target(package)
        if local is not None:
            console_err.print(f"installing {package} from {local}", markup=False)
            targets.extend(["-e", local] if editable else [local])
        elif editable:
            targets.extend(["-e", package])
        else:
            targets.append(package)
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        *(["--upgrade"] if upgrade else []),
        *targets,
    ]
    result = subprocess.run(command, check=False)
    if result.returncode != 0:
        raise click.ClickException(
            f"pip exited with status {result.returncode}; nothing was changed by kairox itself. "
            "Check the package name, or run the pip command above by hand to see more."
        )


def add_plugin_commands(cli: click.Group, pm: Any = None) -> None:
    """Let every healthy plugin add commands; a broken one is reported, never fatal."""
    if pm is None:
        from kairox.plugin_host.manager import get_plugin_manager

        pm = get_plugin_manager()
    owners = {name: "kairox" for name in cli.list_commands(click.Context(cli))}
    for impl in pm.hook.kairox_register_commands.get_hookimpls():
        # Each plugin writes into a scratch group first, so a clash or an exception
        # half-way through leaves none of its commands behind.
        scratch = click.Group(name=cli.name)
        try:
            pm.call_for_plugin("kairox_register_commands", impl.plugin, cli=scratch)
        except Exception as exc:
            console_err.print(
                f"warning: plugin {impl.plugin_name} failed to add its commands: "
                f"{type(exc).__name__}: {exc}",
                markup=False,
            )
            continue
        clashes = sorted(set(scratch.commands) & set(owners))
        if clashes:
            detail = ", ".join(f"{name!r} (already from {owners[name]})" for name in clashes)
            console_err.print(
                f"warning: plugin {impl.plugin_name} tried to add command {detail}; "
                "none of its commands were added. Uninstall one of the two plugins.",
                markup=False,
            )
            continue
        for name, command in scratch.commands.items():
            cli.add_command(command, name)
            owners[name] = impl.plugin_name
