"""Benchmark systems that are what you configured, next to the built-in ones.

* ``profile:NAME`` asks :meth:`AppFacade.search_sync` exactly what ``kairox search
  --profile NAME -k 100`` asks: the same plan, sources, fusion, weights and deadlines, so
  any knowledge-base kind (plugins, cloud ones) is measured as it serves searches.
  ``--kb ID[,ID]`` and ``--workspace`` narrow it to some sources (``--source`` of
  ``kairox search``).
* ``kb:ID`` is one knowledge base alone, through the same facade search.
* ``kind:NAME`` builds a knowledge-base kind fresh on the dataset's corpus, from its own
  settings model and an inline config (``--kind-config NAME='{"k1": 1.2}'``): a plugin
  author compares a new kind with the built-ins on BEIR data without editing Kairox.

A facade search reports each source's status; a source that timed out, failed or was
skipped is counted per query (``failures`` in the report), never scored silently as
an empty list.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kairox.bench import BenchError, BenchUsageError
from kairox.retrieval import Document, IngestableSource, Query, RetrievalResult, SourceStatus

if TYPE_CHECKING:
    from kairox.bench.retrieval import Bench, SystemRun
    from kairox.retrieval import Source
    from kairox.runtime.facade import AppFacade

PREFIXES = ("profile:", "kb:", "kind:")


def did_you_mean(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def is_external(name: str) -> bool:
    """Whether ``name`` searches through the facade (a profile or a knowledge base)."""
    return name.startswith(("profile:", "kb:"))


class FacadeSystem:
    """One benchmarked system that is a facade search (what ``kairox search`` runs)."""

    def __init__(self, facade: AppFacade, name: str, profile: str, only: set[str] | None) -> None:
        self.facade = facade
        self.name = name
        self.profile = profile
        self.only = only

    async def retrieve(self, query: Query) -> RetrievalResult:
        # search_sync is what `kairox search` calls; a worker thread keeps this loop free.
        return await asyncio.to_thread(
            self.facade.search_sync, query.text, profile=self.profile, k=query.k, only=self.only
        )

    def stored_ids(self) -> tuple[list[str], set[str] | None]:
        """(names of the sources, every id they hold, or ``None`` when one cannot say)."""
        composite, _ = self.facade.sources.composite_and_groups(self.profile, only=self.only)
        ids: set[str] = set()
        for source in composite.sources:
            if not isinstance(source, IngestableSource):
                return [s.name for s in composite.sources], None
            ids |= set(source.fingerprints())
        return [s.name for s in composite.sources], ids


class Systems:
    """Resolves ``profile:``, ``kb:`` and ``kind:`` names for :class:`Bench`."""

    def __init__(
        self,
        facade: AppFacade | None,
        *,
        profile: str | None = None,
        narrow: set[str] | None = None,
        kind_configs: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.facade = facade
        self.profile = profile
        self.narrow = narrow
        self.kind_configs = dict(kind_configs or {})

    def _need_facade(self, name: str) -> AppFacade:
        if self.facade is None:
            raise BenchError(f"system {name!r} needs a workspace configuration (kairox.toml)")
        return self.facade

    def check(self, name: str, bench: Bench) -> None:
        if name.startswith("profile:"):
            facade = self._need_facade(name)
            facade.resolve_profile(name.split(":", 1)[1])  # ConfigError with a did-you-mean
            return
        if name.startswith("kb:"):
            facade = self._need_facade(name)
            _known("knowledge base", name, list(facade.config.knowledge_bases), "configured")
            return
        _known("knowledge-base kind", name, sorted(bench.registry.knowledge_base_kinds))
        if not bench.dataset.corpus:
            raise BenchError(f"{name!r} is built on the dataset's corpus: give --dataset")

    def build(self, name: str, bench: Bench) -> tuple[Any, float, bool]:
        if name.startswith("kind:"):
            return build_kind(bench, name, self.kind_configs.get(name.split(":", 1)[1], {}))
        facade = self._need_facade(name)
        if name.startswith("kb:"):
            profile = facade.resolve_profile(self.profile)
            return FacadeSystem(facade, name, profile, {name.split(":", 1)[1]}), 0.0, False
        profile = facade.resolve_profile(name.split(":", 1)[1])
        return FacadeSystem(facade, name, profile, self.narrow), 0.0, False


def _known(what: str, name: str, known: list[str], verb: str = "installed") -> None:
    """Refuse ``PREFIX:VALUE`` when VALUE is not among ``known``, with a did-you-mean."""
    value = name.split(":", 1)[1]
    if value not in known:
        raise BenchUsageError(
            f"no {what} {value!r} is {verb}{did_you_mean(value, known)} "
            f"({verb}: {', '.join(known) or 'none'})"
        )


def build_kind(bench: Bench, name: str, options: Mapping[str, Any]) -> tuple[Any, float, bool]:
    """Knowledge-base kind ``kind:NAME`` built from its settings model, filled with the corpus.

    Required settings that name a file or folder (by their name or description) and that
    the inline config does not give point into a scratch folder.
    """
    kind_name = name.split(":", 1)[1]
    kind = bench.registry.knowledge_base_kinds[kind_name]
    folder = bench.scratch / ("kind-" + kind_name)
    folder.mkdir(parents=True, exist_ok=True)
    settings: dict[str, Any] = {}
    for field_name, info in kind.config_model.model_fields.items():
        # A required setting that names a file or folder: the kind's own storage.
        words = f"{field_name} {info.description or ''}".lower()
        wants_path = "path" in words or "dir" in words or "file" in words
        if field_name not in options and info.is_required() and wants_path:
            settings[field_name] = str(folder / field_name)
    settings.update(options)
    settings.pop("kind", None)
    try:
        config = kind.config_model(kind=kind_name, **settings)
    except Exception as exc:  # pydantic says which key is wrong
        raise BenchError(
            f"{name}: the inline config {json.dumps(dict(options))} is not valid: {exc}; "
            f"pass --kind-config {kind_name}='{{...}}' with the kind's settings"
        ) from None
    source: Source = kind.factory(kind_name, config, bench._context(folder))
    return fill(bench, source, kind_name, name)


def fill(bench: Bench, source: Any, kind_name: str, label: str) -> tuple[Any, float, bool]:
    """``source`` (of kind ``kind_name``) filled with the dataset's corpus, 1,000 documents
    at a time (progress as ``indexing LABEL``): the source, the seconds it took, not cached."""
    if not isinstance(source, IngestableSource):
        raise BenchError(f"kind {kind_name!r} cannot be filled with documents")
    documents = [
        Document(doc_id, text, title=title)
        for doc_id, (title, text) in bench.dataset.corpus.items()
    ]
    started = time.perf_counter()
    for start in range(0, len(documents), 1000):
        source.upsert(documents[start : start + 1000])
        bench._report(f"indexing {label}", start + 1000, len(documents))
    finish = getattr(source, "finish", None)
    if callable(finish):
        finish()  # the end-of-run work `kairox kb ingest` does (merging, packing)
    return source, time.perf_counter() - started, False


def record_failures(ran: SystemRun, qid: str, answer: object) -> None:
    """Count each source that did not answer ``qid``: ``failures`` (timeout, error) and
    ``skipped_sources`` (configured but unusable, with the reason)."""
    reports = getattr(answer, "reports", None)
    if not reports:
        return
    for report in reports:
        if report.status is SourceStatus.OK:
            continue
        # Skipped: configured but not usable (an index not built yet); the others failed.
        key = "skipped_sources" if report.status is SourceStatus.SKIPPED else "failures"
        failures: dict[str, dict[str, Any]] = ran.notes.setdefault(key, {})
        entry = failures.setdefault(report.source, {"queries": 0, "last_error": None})
        entry["queries"] += 1
        entry[str(report.status)] = entry.get(str(report.status), 0) + 1
        entry["last_error"] = report.error
    ran.notes.setdefault("sources", sorted(r.source for r in reports))


def record_contributions(ran: SystemRun, answer: object, depth: int = 10) -> None:
    """For each source, how many fused top-``depth`` hits it found, and found alone."""
    hits = getattr(answer, "hits", None)
    if hits is None or not getattr(answer, "reports", None):
        return
    counts: dict[str, dict[str, int]] = ran.notes.setdefault("contributions", {})
    for hit in hits[:depth]:
        names = [p.source for p in getattr(hit, "sources", ())]
        for source in names:
            entry = counts.setdefault(source, {"in_top": 0, "only": 0})
            entry["in_top"] += 1
            if len(names) == 1:
                entry["only"] += 1


def check_coverage(bench: Bench, name: str, source: Any, judged: set[str]) -> None:
    """Before querying: stop when no judged document exists in the system's sources."""
    from kairox.bench.judgments import check_known

    if not isinstance(source, FacadeSystem):
        return
    names, ids = source.stored_ids()
    if ids is None:
        return  # a remote kind cannot list its ids; checked on the hits instead
    where = (
        f"knowledge base {names[0]!r}"
        if len(names) == 1
        else f"the sources of {name!r} ({', '.join(names)})"
    )
    check_known(where, judged, ids)


def workspace_sources(facade: AppFacade) -> set[str]:
    """The workspace retrievers a profile gets (what ``--workspace`` narrows to)."""
    disabled = set(facade.config.workspace.disabled_retrievers)
    return {name for name in facade.registry.workspace_retrievers if name not in disabled}


def corpus_root(facade: AppFacade | None) -> Path | None:
    return facade.workspace_root if facade is not None else None
