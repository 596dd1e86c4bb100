"""``kairox search``: the workspace and the profile's knowledge bases, one fused ranking."""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from kairox.cli.app import AppContext, console, fold_long_values, print_json
from kairox.cli.history_search import search_history
from kairox.cli.hit_format import code_excerpt, location, numbered_lines, vimgrep_line
from kairox.cli.options import json_option, profile_option
from kairox.cli.workspace_root import indexed_nearby, not_indexed_note, root_json, say_root
from kairox.retrieval import FusedHit, RetrievalResult, SourceReport
from kairox.retrieval.fusion import DEFAULT_FUSION, FUSION_METHODS
from kairox.support.terminal import printable

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


def _report_json(report: SourceReport) -> dict[str, Any]:
    return {
        "source": report.source,
        "status": str(report.status),
        "latency_ms": round(report.latency_ms, 2),
        "hits": report.hit_count,
        "error": report.error,
    }


def _ranks(hit: FusedHit) -> dict[str, int]:
    ranks = {"fused_rank": hit.fused_rank, "reranked_rank": hit.reranked_rank}
    return {key: value for key, value in ranks.items() if value is not None}


def result_as_json(result: RetrievalResult, query: str, profile: str) -> dict[str, Any]:
    return {
        "query": query,
        "profile": profile,
        "hits": [
            {
                "rank": rank,
                **_ranks(hit),
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
        "sources": [_report_json(r) for r in result.reports],
        "stages": [_report_json(r) for r in result.stages],
    }


def _provenance(hit: FusedHit) -> str:
    return ", ".join(f"{p.source}#{p.rank}" for p in hit.sources)


def print_result(result: RetrievalResult, query: str, root: Path | None = None) -> None:
    """The hits as a table (snippets around the query's words), then one line per source.

    ``where`` is ``path:12-40`` relative to ``root`` when the hit knows its lines; code and
    other line-ranged hits show a few lines with their indentation kept.
    """
    if result.hits:
        table = Table("#", "score", "sources", "where", "snippet")
        fold_long_values(table)
        for rank, hit in enumerate(result.hits, start=1):
            # Text(), not str: file contents may hold [brackets] that rich reads as markup.
            table.add_row(
                str(rank),
                f"{hit.score:.4f}",
                Text(printable(_provenance(hit))),
                Text(printable(location(hit, root))),
                Text(printable(_excerpt(hit, query))),
            )
        console.print(table)
    else:
        console.print("no hits", markup=False)
    print_reports(result)


def print_reports(result: RetrievalResult) -> None:
    """One line per source and stage: its status, hits and latency (and error)."""
    for report in [*result.reports, *result.stages]:
        noun = "query" if report.source.startswith("transform:") else "hit"
        count = noun if report.hit_count == 1 else {"query": "queries", "hit": "hits"}[noun]
        line = (
            f"{report.source}: {report.status} · {report.hit_count} {count} · "
            f"{report.latency_ms:.0f} ms"
        )
        if report.error:
            line += f" · {report.error}"
        style = "green" if str(report.status) == "ok" else "yellow"
        console.print(Text(printable(line), style="" if report.error else style))


def print_listing(result: RetrievalResult, query: str, root: Path | None = None) -> None:
    """Each hit as a person reads it: rank, ``path:12-40``, how many of the file's chunks
    matched, then the lines around the first query word with their line numbers."""
    if not result.hits:
        click.echo("no hits")
    for rank, hit in enumerate(result.hits, start=1):
        chunks = hit.metadata.get("file_chunks")
        more = f" · {chunks} matching chunks" if isinstance(chunks, int) and chunks > 1 else ""
        header = f"{rank}. {location(hit, root)}{more} · {_provenance(hit)}"
        click.echo(printable(header))
        excerpt = numbered_lines(hit, query) if "line_start" in hit.metadata else None
        for row in excerpt or [snippet(hit.text, query)]:
            click.echo(printable("   " + row))
        click.echo("")
    print_reports(result)


def parse_cli_filter(text: str | None) -> Any:
    """``--filter`` as a parsed expression (``None`` without one); bad input exits 2."""
    from kairox.retrieval.filters import MAX_DEPTH, FilterError, parse_filter

    if text is None or not text.strip():
        return None
    spec: Any = text
    if text.lstrip().startswith("{"):
        try:
            spec = json.loads(text)
        except RecursionError:
            raise click.BadParameter(
                f"nested deeper than {MAX_DEPTH} levels; flatten it", param_hint="'--filter'"
            ) from None
        except ValueError as exc:
            raise click.BadParameter(
                f"not valid JSON ({exc}); write a JSON object or the text form",
                param_hint="'--filter'",
            ) from None
    try:
        return parse_filter(spec)
    except (FilterError, RecursionError) as exc:
        raise click.BadParameter(printable(str(exc)), param_hint="'--filter'") from None


def _excerpt(hit: FusedHit, query: str) -> str:
    if "line_start" in hit.metadata:
        return code_excerpt(hit.text, query)
    return snippet(hit.text, query)


def print_vimgrep(result: RetrievalResult, query: str, root: Path | None) -> None:
    """One ``path:line:col:text`` line per hit, best first (no source summary)."""
    for hit in result.hits:
        click.echo(printable(vimgrep_line(hit, root, query)))


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


def check_stage(facade: Any, table: str, name: str | None, hint: str) -> None:
    """Refuse (exit 2) a stage name nothing registered, with what is installed."""
    specs = getattr(facade.registry, table)
    if name is None or name == "none" or name in specs:
        return
    installed = ", ".join(sorted(specs)) or "none"
    suggestion = difflib.get_close_matches(name, list(specs), n=1)
    problem = f"no {specs.what} named {name!r}"
    if suggestion:
        problem += f"; did you mean {suggestion[0]!r}?"
    end = " " if problem.endswith("?") else ". "
    raise click.BadParameter(f"{problem}{end}Installed: {installed}, or none.", param_hint=hint)


def _given_options(ctx: click.Context) -> set[str]:
    """The parameters the user typed (not their defaults)."""
    return {
        name
        for name in ctx.params
        if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)
    }


# The flag each ``search`` parameter is typed as, for the options --history has no use for.
_NOT_FOR_HISTORY = {
    "profile": "--profile",
    "fusion": "--fusion",
    "only": "--source",
    "rerank": "--rerank",
    "query_transform": "--query-transform",
    "filter_text": "--filter",
    "chunks": "--chunks",
}


def refuse_for_history(given: set[str], output: str) -> None:
    """Refuse (exit 2) options that do not apply to ``--history`` rather than ignore them."""
    flags = [flag for name, flag in _NOT_FOR_HISTORY.items() if name in given]
    if output not in ("lines", "json"):
        flags.append(f"--format {output}")
    if flags:
        raise click.UsageError(
            f"{', '.join(flags)} {'does' if len(flags) == 1 else 'do'} not apply to --history; "
            "it takes -k, --session, --json (or --format json) and --workspace"
        )


@click.command()
@click.argument("query")
@profile_option("Profile name or alias (default: default).")
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
@click.option(
    "--workspace",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Search the workspace at this folder (as `kairox index PATH` indexed it) instead "
    "of the current folder's.",
)
@click.option(
    "--rerank",
    metavar="NAME|none",
    default=None,
    help="Rerank the fused candidates with this reranker instead of the profile's "
    "`rerank` (none: no reranking). Built in: mmr, llm.",
)
@click.option(
    "--query-transform",
    metavar="NAME|none",
    default=None,
    help="Rewrite the query with this transform instead of the profile's `query_transform` "
    "(none: the query as typed). Built in: multi-query, hyde.",
)
@json_option("Print JSON (same as --format json).")
@click.option(
    "--filter",
    "filter_text",
    default=None,
    metavar="FILTER",
    help='Metadata filter: JSON (\'{"year": {"$gte": 2020}}\') or text '
    "('year >= 2020 and lang in (en, de) and not draft'); see docs/filters.md.",
)
@click.option(
    "--format",
    "output",
    type=click.Choice(["lines", "table", "json", "vimgrep"]),
    default="lines",
    show_default=True,
    help="lines: each hit's path, line range and lines; table: scores and every source's "
    "rank; vimgrep: path:line:col:text per hit, for editors' quickfix lists.",
)
@click.option(
    "--chunks",
    is_flag=True,
    help="Every matching chunk as its own hit (a file may appear several times); by "
    "default each workspace file appears once, with its best chunk.",
)
@click.option(
    "--history",
    is_flag=True,
    help="Search what was said in this workspace's sessions (the recall archive) instead.",
)
@click.option("--session", default=None, help="With --history: this session's messages only.")
@click.pass_obj
def search(
    app: AppContext,
    query: str,
    profile: str | None,
    k: int,
    fusion: str,
    only: tuple[str, ...],
    workspace: Path | None,
    rerank: str | None,
    query_transform: str | None,
    as_json: bool,
    filter_text: str | None,
    output: str,
    chunks: bool,
    history: bool,
    session: str | None,
) -> None:
    """Search the workspace index and every knowledge base the profile sees (--history:
    the messages of every session)."""
    if not query.strip():
        raise click.BadParameter("the query is empty; say what to look for", param_hint="QUERY")
    given = _given_options(click.get_current_context())
    if history:
        refuse_for_history(given, output)
        search_history(app.facade(workspace), query, k, session, as_json or output == "json")
        return
    if "session" in given:
        raise click.UsageError("--session applies to --history only: add --history")
    filters = parse_cli_filter(filter_text)
    facade = app.facade(workspace)
    name = facade.resolve_profile(profile)
    if only:
        check_sources(facade, name, set(only))
    check_stage(facade, "rerankers", rerank, "'--rerank'")
    check_stage(facade, "query_transforms", query_transform, "'--query-transform'")
    result = facade.search_sync(
        query,
        profile=name,
        k=k,
        fusion=fusion,
        only=set(only) or None,
        rerank=rerank,
        query_transform=query_transform,
        filters=filters,
        by_file=not chunks,
    )
    nearby = indexed_nearby(facade, result)
    if as_json or output == "json":
        answer = {**result_as_json(result, query, name), "workspace": root_json(facade, nearby)}
        print_json(answer, default=str)
        return
    root = Path(facade.workspace_root).resolve()
    if output == "vimgrep":  # machine-read, like --json: nothing else, even on stderr
        print_vimgrep(result, query, root)
        return
    say_root(facade)
    not_indexed_note(facade, nearby, query)
    if output == "table":
        print_result(result, query, root)
        return
    print_listing(result, query, root)
