"""``kairox search``: the workspace and the profile's knowledge bases, one fused ranking."""

from __future__ import annotations

import re
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from kairox.cli.app import AppContext, console, fold_long_values, print_json
from kairox.retrieval import FusedHit, RetrievalResult
from kairox.retrieval.fusion import DEFAULT_FUSION, FUSION_METHODS
from kairox.terminal import printable

_WORD = re.compile(r"\w+", re.UNICODE)


def snippet(text: str, query: str, width: int = 160) -> str:
    """A one-line excerpt around the first query word found in ``text``."""
    flat = " ".join(text.split())
    lowered = flat.casefold()
    positions = [lowered.find(w) for w in _WORD.findall(query.casefold())]
    found = min((p for p in positions if p >= 0), default=0)
    start = max(0, found - width // 4)
    excerpt = flat[start : start + width]
    return ("…" if start else "") + excerpt + ("…" if start + width < len(flat) else "")


def result_as_json(result: RetrievalResult, query: str, profile: str) -> dict[str, Any]:
    return {
        "query": query,
        "profile": profile,
        "hits": [
            {
                "rank": rank,
                "id": hit.id,
                "score": hit.score,
                "uri": hit.uri,
                "source": hit.source,
                "sources": [
                    {"source": p.source, "rank": p.rank, "score": p.score} for p in hit.sources
                ],
                "snippet": snippet(hit.text, query),
                "text": hit.text,
                "metadata": dict(hit.metadata),
            }
            for rank, hit in enumerate(result.hits, start=1)
        ],
        "sources": [
            {
                "source": r.source,
                "status": str(r.status),
                "latency_ms": round(r.latency_ms, 2),
                "hits": r.hit_count,
                "error": r.error,
            }
            for r in result.reports
        ],
    }


def _provenance(hit: FusedHit) -> str:
    return ", ".join(f"{p.source}#{p.rank}" for p in hit.sources)


def print_result(result: RetrievalResult, query: str) -> None:
    """The hits as a table (snippets around the query's words), then one line per source."""
    if result.hits:
        table = Table("#", "score", "sources", "where", "snippet")
        fold_long_values(table)
        for rank, hit in enumerate(result.hits, start=1):
            # Text(), not str: file contents may hold [brackets] that rich reads as markup.
            table.add_row(
                str(rank),
                f"{hit.score:.4f}",
                Text(printable(_provenance(hit))),
                Text(printable(hit.uri or hit.id)),
                Text(printable(snippet(hit.text, query))),
            )
        console.print(table)
    else:
        console.print("no hits", markup=False)
    for report in result.reports:
        line = (
            f"{report.source}: {report.status} · {report.hit_count} hits · "
            f"{report.latency_ms:.0f} ms"
        )
        if report.error:
            line += f" · {report.error}"
        style = "green" if str(report.status) == "ok" else "yellow"
        console.print(Text(printable(line), style="" if report.error else style))


def check_sources(facade: Any, profile: str, only: set[str]) -> None:
    """Refuse (exit 2) a ``--source`` the profile does not search, saying why."""
    config = facade.config
    disabled = set(config.workspace.disabled_retrievers)
    workspace = [n for n in facade.registry.workspace_retrievers if n not in disabled]
    visible = workspace + [e.id for e in config.visible_knowledge_bases(profile)]
    problems = []
    for name in sorted(only - set(visible)):
        entry = config.knowledge_bases.get(name)
        if name in disabled:
            why = "is switched off by [workspace] disabled_retrievers"
        elif entry is not None and not entry.config.enabled:
            why = "is a knowledge base with enabled = false"
        elif entry is not None:
            why = f"is a knowledge base profile {profile!r} does not see (its profile_aliases)"
        else:
            why = "is not a source"
        problems.append(f"{name!r} {why}")
    if problems:
        raise click.BadParameter(
            "; ".join(problems) + f". Profile {profile!r} searches: {', '.join(visible)}",
            param_hint="'--source'",
        )


@click.command()
@click.argument("query")
@click.option("-p", "--profile", default=None, help="Profile name or alias (default: default).")
@click.option("-k", "k", default=10, show_default=True, type=click.IntRange(1, 1000))
@click.option(
    "--fusion",
    type=click.Choice(list(FUSION_METHODS)),
    default=DEFAULT_FUSION,
    show_default=True,
    help="How rankings from several sources are merged (convex: min-max normalised scores "
    "times each source's weight; rrf: reciprocal rank fusion; minmax, dbsf: plain score "
    "fusions).",
)
@click.option("--source", "only", multiple=True, help="Search only this source (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def search(
    app: AppContext,
    query: str,
    profile: str | None,
    k: int,
    fusion: str,
    only: tuple[str, ...],
    as_json: bool,
) -> None:
    """Search the workspace index and every knowledge base the profile sees."""
    facade = app.facade()
    name = facade.resolve_profile(profile)
    if only:
        check_sources(facade, name, set(only))
    result = facade.search_sync(query, profile=name, k=k, fusion=fusion, only=set(only) or None)
    if as_json:
        print_json(result_as_json(result, query, name), default=str)
        return
    print_result(result, query)
