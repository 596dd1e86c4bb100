"""``kairox config check``: which profile sees which source, and what is missing."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table
from rich.text import Text

from kairox.cli.app import (
    AppContext,
    console,
    console_err,
    fold_long_values,
    print_json,
    warn_plugin_failures,
)
from kairox.cli.options import json_option


@click.group()
def config() -> None:
    """Inspect the configuration."""


def check_report(app: AppContext) -> dict[str, Any]:
    """The profile x source matrix as plain data (what ``--json`` prints)."""
    cfg = app.config()
    registry = app.plugin_manager().registry
    sources: list[dict[str, Any]] = []
    for name in registry.workspace_retrievers:
        sources.append(
            {
                "id": name,
                "type": "workspace",
                "kind": "workspace",
                "enabled": name not in cfg.workspace.disabled_retrievers,
                "profile_aliases": None,
                "provider": registry.workspace_retrievers.provider(name),
                "installed": True,
                "problem": None,
            }
        )
    for kb in cfg.knowledge_bases.values():
        sources.append(
            {
                "id": kb.id,
                "type": "knowledge_base",
                "kind": kb.kind,
                "enabled": kb.config.enabled,
                "profile_aliases": kb.config.profile_aliases,
                "provider": kb.provider,
                "installed": kb.available,
                "problem": kb.unavailable_reason,
                "defined_in": str(kb.origin),
            }
        )
    _add_filter_support(app, sources)
    matrix = []
    for profile in cfg.profiles:
        visible_kbs = {kb.id for kb in cfg.visible_knowledge_bases(profile)}
        for source in sources:
            visible = (
                source["enabled"] if source["type"] == "workspace" else source["id"] in visible_kbs
            )
            matrix.append({"profile": profile, "source": source["id"], "visible": visible})
    problems = [
        f"knowledge_bases.{s['id']}: {s['problem']}"
        for s in sources
        if s["problem"] and s["enabled"]
    ]
    return {
        "files": [str(path) for path in cfg.files],
        "profiles": [
            {"name": name, **profile.model_dump()} for name, profile in cfg.profiles.items()
        ],
        "sources": sources,
        "matrix": matrix,
        "problems": problems,
    }


def _add_filter_support(app: AppContext, sources: list[dict[str, Any]]) -> None:
    """Each source's ``filter_support``: the operators it can push down (``none``: it is
    skipped when a query has a filter). Building a source connects to nothing."""
    factory = app.facade().sources
    entries = app.config().knowledge_bases
    for source in sources:
        if source["type"] == "knowledge_base" and not source["installed"]:
            source["filters"] = None
            continue
        try:
            built = (
                factory.workspace_retriever(source["id"])
                if source["type"] == "workspace"
                else factory.knowledge_base(entries[source["id"]])
            )
        except Exception as exc:  # reported, never fatal: the problem column says more
            source["filters"] = f"unknown ({type(exc).__name__}: {exc})"
            continue
        support = getattr(built, "filter_support", None)
        source["filters"] = support.describe() if support is not None else "none"


@config.command()
@json_option("Print JSON instead of a table.")
@click.pass_obj
def check(app: AppContext, as_json: bool) -> None:
    """Validate the configuration and print every profile x source.

    Exits 2 when a config file is invalid, 1 when it is valid but an enabled knowledge
    base's kind is not installed, 0 otherwise.
    """
    report = check_report(app)
    if as_json:
        print_json(report)
    else:
        warn_plugin_failures(app)
        files = ", ".join(report["files"]) or "none (built-in defaults)"
        console.print(f"config files: {files}", markup=False)
        profiles = [p["name"] for p in report["profiles"]]
        table = Table("source", "kind", "provider", "installed", *profiles, "filters")
        fold_long_values(table)
        visible = {(m["profile"], m["source"]): m["visible"] for m in report["matrix"]}
        for source in report["sources"]:
            table.add_row(
                Text(source["id"]),
                Text(source["kind"]),
                Text(source["provider"] or "-"),
                "yes" if source["installed"] else "[red]no[/]",
                *("[green]visible[/]" if visible[(p, source["id"])] else "-" for p in profiles),
                Text(source.get("filters") or "-"),
            )
        console.print(table)
        for problem in report["problems"]:
            console_err.print(f"problem: {problem}", markup=False)
    if report["problems"]:
        click.get_current_context().exit(1)
