"""``kairox bench history``: the run over one or more repositories.

For each repository: its judged queries (:mod:`kairox.bench.history`), refused below
``min_queries`` in the evaluated split before anything is indexed; the tree at HEAD
exported into ``work/<name>/tree`` (reused while HEAD is unchanged), so uncommitted edits
and the user's own index are never touched, and a ``kairox.toml`` committed in the
repository applies; one private state folder per embedding backend
(``work/<name>/state-<embedder>``) indexed as ``kairox index`` indexes, and every system
asked through :meth:`AppFacade.search_sync`, which is what ``kairox search`` and
``kairox.open(root).search(q, k=K)`` run:

* ``default``: the shipped default profile, every source;
* ``profile:NAME``: another profile of the repository's (or the user's) configuration;
* ``workspace-fts`` and ``workspace``: one built-in workspace source alone (words, vectors).

With several embedders each system but ``workspace-fts`` is named ``SYSTEM/EMBEDDER``.
The two references (:mod:`kairox.bench.history_refs`) run on the same tree, and
:func:`write_queries` writes a repository's queries and its ``train`` and ``test``
judgments for ``kairox bench tune``.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kairox.bench import BenchError, BenchUsageError
from kairox.bench.history import History, export_head, extract
from kairox.bench.history_eval import check_enough, evaluate_repo, pooled
from kairox.bench.history_refs import RANK_BM25
from kairox.bench.metrics import IR_MEASURES
from kairox.bench.report import machine
from kairox.config.schema import KNOWN_EMBEDDING_PACKAGES
from kairox.support.embed_progress import EmbedProgress

if TYPE_CHECKING:
    from kairox.plugin_host.manager import KairoxPluginManager
    from kairox.plugin_host.registry import Registry
    from kairox.runtime.facade import AppFacade

__all__ = [
    "DEFAULT_SYSTEMS",
    "check_dependencies",
    "check_systems",
    "history_benchmark",
    "repo_names",
    "write_queries",
]

DEFAULT_SYSTEMS = ("default",)
SOURCES = ("workspace-fts", "workspace")
#: Hits asked of each system per query, as ``kairox search -k`` (the issue measured 30).
K = 30

Progress = Callable[[str, int, int], None]


def repo_names(repos: Sequence[Path]) -> list[str]:
    """A short, unique name per repository: ``owner+name`` of ``/x/owner+name/repo``, else
    the folder's name (``.git`` and ``repo`` folders speak for their parent)."""
    names: list[str] = []
    for repo in repos:
        path = Path(repo).resolve()
        name = path.parent.name if path.name in ("repo", ".git") else path.name
        name = name.removesuffix(".git") or "repo"
        unique, n = name, 2
        while unique in names:
            unique, n = f"{name}-{n}", n + 1
        names.append(unique)
    return names


def write_queries(history: History, folder: Path) -> dict[str, Path]:
    """``queries.jsonl`` (every query) and ``train.tsv`` / ``test.tsv`` (BEIR qrels naming
    the answer files by path) in ``folder``: ``kairox bench tune --queries ... --qrels
    train.tsv --holdout-qrels test.tsv`` in a checkout of the repository."""
    folder.mkdir(parents=True, exist_ok=True)
    written = {"queries": folder / "queries.jsonl"}
    with written["queries"].open("w", encoding="utf-8") as handle:
        for query in history.queries:
            record = {"id": query.id, "text": query.text, "commit": query.commit}
            handle.write(json.dumps(record) + "\n")
    for split in ("train", "test"):
        rows = ["query-id\tcorpus-id\tscore"]
        rows += [f"{q.id}\t{path}\t1" for q in history.split(split) for path in q.answers]
        written[split] = folder / f"{split}.tsv"
        written[split].write_text("\n".join(rows) + "\n", encoding="utf-8")
    return written


def _tree(repo: Path, history: History, folder: Path) -> Path:
    """HEAD's tree in ``folder/tree``, exported again when HEAD moved."""
    tree, stamp = folder / "tree", folder / "head"
    if tree.is_dir() and stamp.is_file() and stamp.read_text().strip() == history.head:
        return tree
    if tree.exists():
        shutil.rmtree(tree)
    export_head(repo, tree)
    stamp.write_text(history.head + "\n")
    return tree


def _facade(tree: Path, state: Path, embedder: str, pm: KairoxPluginManager | None) -> AppFacade:
    """The facade ``kairox.open(tree)`` makes, its state in ``state`` and its workspace
    embedded by ``embedder``."""
    from kairox.config.loader import load_config
    from kairox.plugin_host.manager import get_plugin_manager
    from kairox.runtime.facade import AppFacade

    manager = pm or get_plugin_manager()
    config = load_config(cwd=tree, registry=manager.registry)
    workspace = config.workspace.model_copy(update={"embedding_backend": embedder})
    config = dataclasses.replace(config, workspace=workspace)
    state.mkdir(parents=True, exist_ok=True)
    return AppFacade(cwd=tree, config=config, pm=manager, state_dir=state, root_given=True)


def _searcher(facade: AppFacade, system: str, k: int) -> Callable[[str], Any]:
    profile = system.split(":", 1)[1] if system.startswith("profile:") else None
    name = facade.resolve_profile(profile)  # a did-you-mean for a typo, before any search
    only = {system} if system in SOURCES else None
    return lambda text: facade.search_sync(text, profile=name, k=k, only=only).hits


def check_systems(systems: Sequence[str]) -> None:
    """Refuse a system name the benchmark cannot run, before anything is read."""
    for system in systems:
        if system not in (*DEFAULT_SYSTEMS, *SOURCES) and not system.startswith("profile:"):
            raise BenchUsageError(
                f"unknown system {system!r}; choose default, profile:NAME, {', '.join(SOURCES)}"
            )


def check_dependencies(embedders: Sequence[str], registry: Registry) -> None:
    """Refuse a run whose metrics, references or embedders cannot work here, before any
    tree is exported or embedded: a missing library or plugin is a :class:`BenchError`
    with its install hint, an embedder nobody ships a :class:`BenchUsageError`."""
    for library in (IR_MEASURES, RANK_BM25):
        try:
            library.check()
        except ImportError as exc:
            raise BenchError(str(exc)) from None
    for name in embedders:
        spec = registry.embedding_backends.get(name)
        if spec is None:
            known = ", ".join(sorted(registry.embedding_backends))
            package = KNOWN_EMBEDDING_PACKAGES.get(name)
            if package is not None:
                raise BenchError(
                    f"the {name!r} embedding backend comes with a plugin that is not "
                    f"installed: kairox install {package} (installed backends: {known})"
                )
            raise BenchUsageError(f"no embedding backend {name!r}; installed: {known}")
        try:  # building a backend checks its libraries; its model loads on first use
            spec.factory()
        except ImportError as exc:
            raise BenchError(f"the {name!r} embedding backend cannot load: {exc}") from None


def history_benchmark(
    repos: Sequence[Path],
    work: Path,
    *,
    systems: Sequence[str] = DEFAULT_SYSTEMS,
    embedders: Sequence[str] = ("hashing",),
    split: str = "test",
    with_body: bool = False,
    limit: int | None = 400,
    test_share: float = 0.5,
    min_queries: int = 20,
    k: int = K,
    write_to: Path | None = None,
    pm: KairoxPluginManager | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run the benchmark over ``repos``; returns the report (one row per repository and
    the pooled row). Every repository is checked for enough queries before any is indexed."""
    check_systems(systems)
    registry = (pm.registry if pm is not None else None) or _registry()
    check_dependencies(embedders, registry)
    names = repo_names(repos)
    histories = []
    for repo in repos:
        history = extract(Path(repo), with_body=with_body, limit=limit, test_share=test_share)
        check_enough(history, split, min_queries)
        histories.append(history)
    rows: list[dict[str, Any]] = []
    for repo, name, history in zip(repos, names, histories, strict=True):
        folder = Path(work) / name
        tree = _tree(Path(repo), history, folder)
        if write_to is not None:
            write_queries(history, Path(write_to) / name)
        searchers: dict[str, Callable[[str], Any]] = {}
        facades = []
        try:
            for embedder in embedders:
                facade = _facade(tree, folder / f"state-{embedder}", embedder, pm)
                facades.append(facade)
                for system in systems:  # a profile's typo is refused before indexing
                    if system == "workspace-fts" and embedder != embedders[0]:
                        continue  # words only: the same for every embedder
                    label = system
                    if len(embedders) > 1 and system != "workspace-fts":
                        label = f"{system}/{embedder}"
                    searchers[label] = _searcher(facade, system, k)
                _index(facade, f"{name}: {{}} ({embedder})", progress)
            row = evaluate_repo(history, tree, searchers, split=split, progress=progress)
        finally:
            for facade in facades:
                facade.close()
        row["name"] = name
        row["files"] = sum(1 for p in tree.rglob("*") if p.is_file())
        row["train_queries"] = len(history.split("train"))
        row["skipped_commits"] = [
            [sha[:12], subject, reason] for sha, subject, reason in history.skipped_commits
        ]
        rows.append(row)
    return {
        "benchmark": "history",
        "split": split,
        "k": k,
        "with_body": with_body,
        "limit": limit,
        "test_share": test_share,
        "embedders": list(embedders),
        "repos": rows,
        "pooled": pooled(rows),
        "machine": machine(),
    }


def _index(facade: AppFacade, label: str, progress: Progress | None) -> None:
    """Index the tree as ``kairox index`` does, its reading and embedding as progress
    (``label`` formatted with ``indexing`` and ``embedding``)."""

    def embedded(counts: EmbedProgress) -> None:
        planned = counts.chunks_planned + counts.sentences_planned
        _say(progress, label.format("embedding"), counts.embedded, planned)

    facade.index_workspace(
        progress=lambda _path, done, total: _say(progress, label.format("indexing"), done, total),
        embedding=EmbedProgress(listener=embedded),
    )


def _registry() -> Registry:
    from kairox.plugin_host.manager import get_plugin_manager

    return get_plugin_manager().registry


def _say(progress: Progress | None, what: str, done: int, total: int) -> None:
    if progress is not None:
        progress(what, done, total)
