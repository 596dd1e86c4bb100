"""Turning configuration into retrievers: which sources a profile gets, built once each.

``SourceFactory`` resolves embedding backends (one shared instance per name, so a
query is embedded once per backend), builds the workspace retrievers every profile gets
and the knowledge bases visible to a profile, and hands the composite everything it
needs: sources, per-source deadlines and weights, each source's group (from its spec),
and the sources it must report as skipped (with the reason and the fix). Everything it
builds lives until :meth:`SourceFactory.close`: a facade keeps one factory per loaded
configuration.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kairox.config.schema import KNOWN_EMBEDDING_PACKAGES
from kairox.plugin_host.registry import BuildContext, SourceGroup
from kairox.support.blocking import run_coroutine
from kairox.support.errors import KairoxError

if TYPE_CHECKING:
    from kairox.config.loaded import KairoxConfig, KnowledgeBaseEntry
    from kairox.config.schema import ProfileConfig
    from kairox.plugin_host.registry import Registry
    from kairox.retrieval import Source
    from kairox.retrieval.composite import CompositeWorkspaceRetriever
    from kairox.retrieval.embedding import EmbeddingBackend
    from kairox.retrieval.stages import StagedRetrieval
    from kairox.support.models import ModelBackend
    from kairox.workspace.convert.converters import Converters


class SourceError(KairoxError, RuntimeError):
    """A source cannot be built as configured (the message says how to fix it)."""


@dataclass
class SourcePlan:
    """The sources one profile searches, with their settings and groups."""

    sources: list[Source] = field(default_factory=list)
    timeouts_ms: dict[str, int] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    groups: dict[str, SourceGroup] = field(default_factory=dict)
    #: each knowledge base's own ``filter`` (raw, as configured), ANDed into its queries
    filters: dict[str, Any] = field(default_factory=dict)
    #: every built source that may say it cannot answer yet, with what it said
    availability: list[tuple[Any, str | None]] = field(default_factory=list)
    #: a source failed to build (it is tried again next time, so the plan is not kept)
    failed: bool = False

    def current(self) -> bool:
        """Whether every source still says what it said when planned (an index built or
        removed meanwhile changes that)."""
        return all(_unavailable(source) == said for source, said in self.availability)


class SourceFactory:
    """Builds retrievers from a loaded configuration and the plugin registry, once each.

    A source is built the first time a plan needs it and reused after that; so are the
    embedding backends and the objects sources share through ``BuildContext.shared``
    (the workspace index). :meth:`close` closes them all: a source's or shared object's
    ``close()``, sync or async. A source that failed to build is tried again next time.
    """

    def __init__(
        self,
        config: KairoxConfig,
        registry: Registry,
        *,
        workspace_root: Path,
        state_dir: Path,
    ) -> None:
        self.config = config
        self.registry = registry
        self.workspace_root = workspace_root
        self.state_dir = state_dir
        self._backends: dict[str, EmbeddingBackend] = {}
        self._warmed: set[str] = set()
        self._built: dict[str, Source] = {}
        self._shared: dict[str, Any] = {}
        self._plans: dict[tuple[str, frozenset[str] | None], SourcePlan] = {}
        self._composites: dict[tuple[Any, ...], CompositeWorkspaceRetriever] = {}
        self._stages: dict[tuple[str, str, str], Any] = {}
        self._lock = threading.RLock()
        self._converters: Converters | None = None

    def embedding_backend(self, name: str) -> EmbeddingBackend:
        """The shared backend registered under ``name``, built on first use."""
        with self._lock:
            if name not in self._backends:
                spec = self.registry.embedding_backends.get(name)
                if spec is None:
                    known = ", ".join(sorted(self.registry.embedding_backends)) or "none"
                    package = KNOWN_EMBEDDING_PACKAGES.get(name)
                    hint = f" (install it: kairox install {package})" if package else ""
                    raise SourceError(
                        f"no embedding backend named {name!r}{hint}; installed backends: {known}"
                    )
                self._backends[name] = spec.factory()
            return self._backends[name]

    def shared(self, key: str, build: Callable[[], Any]) -> Any:
        """The object under ``key``, built by ``build()`` on first use (closed by :meth:`close`)."""
        with self._lock:
            if key not in self._shared:
                self._shared[key] = build()
            return self._shared[key]

    def converters(self) -> Converters:
        """The registered document converters (a later plugin's claim on a suffix wins)."""
        from kairox.workspace.convert.converters import Converters
        from kairox.workspace.convert.limits import ConversionLimits

        with self._lock:
            if self._converters is None:
                limits = ConversionLimits(
                    max_unpacked_bytes=self.config.workspace.max_unpacked_bytes
                )
                self._converters = Converters(
                    (self.registry.converters[name] for name in self.registry.converters),
                    limits=limits,
                )
            return self._converters

    def context(self, base_dir: Path | None = None) -> BuildContext:
        return BuildContext(
            workspace_root=self.workspace_root,
            state_dir=self.state_dir,
            base_dir=base_dir or self.workspace_root,
            embedding_backend=self.embedding_backend,
            workspace=self.config.workspace,
            shared=self.shared,
            owned_paths=self._owned_paths(),
            converters=self.converters(),
        )

    def _owned_paths(self) -> tuple[Path, ...]:
        """$KAIROX_HOME and every knowledge base's own files and folders, as its kind's
        schema declares them (``own_paths``), resolved as its factory resolves them."""
        owned = [self.state_dir]
        for entry in self.config.knowledge_bases.values():
            owned.extend(entry.own_paths())
        return tuple(owned)

    def workspace_retriever(self, name: str) -> Source:
        spec = self.registry.workspace_retrievers.get(name)
        if spec is None:
            known = ", ".join(sorted(self.registry.workspace_retrievers)) or "none"
            raise SourceError(f"no workspace retriever named {name!r}; installed: {known}")
        return self._once(f"workspace:{name}", lambda: spec.factory(self.context()))

    def knowledge_base(self, entry: KnowledgeBaseEntry) -> Source:
        """Build one knowledge base (once); :class:`SourceError` when its kind is missing."""
        if not entry.available:
            raise SourceError(entry.unavailable_reason or f"kind {entry.kind!r} is unavailable")
        kind = self.registry.knowledge_base_kinds[entry.kind]
        return self._once(
            f"knowledge_base:{entry.id}",
            lambda: kind.factory(entry.id, entry.config, self.context(entry.origin.parent)),
        )

    def _once(self, key: str, build: Callable[[], Source]) -> Source:
        with self._lock:
            if key not in self._built:
                self._built[key] = build()
            return self._built[key]

    def plan(self, profile: str, *, only: set[str] | None = None) -> SourcePlan:
        """Every source ``profile`` sees (workspace retrievers, then knowledge bases).

        A source that cannot be built, or says it cannot answer yet, is listed in
        ``skipped`` with the reason rather than failing the whole search. The plan is
        made once per profile and ``only``, and kept while every source still says it can
        (or cannot) answer; one with a source that failed to build is made again.
        """
        key = (profile, None if only is None else frozenset(only))
        with self._lock:
            kept = self._plans.get(key)
        if kept is not None and kept.current():
            return kept
        plan = self._new_plan(profile, only)
        if not plan.failed:
            with self._lock:
                self._plans[key] = plan
        return plan

    def _new_plan(self, profile: str, only: set[str] | None) -> SourcePlan:
        plan = SourcePlan()
        disabled = set(self.config.workspace.disabled_retrievers)
        for name, spec in self.registry.workspace_retrievers.entries.items():
            if name in disabled or (only is not None and name not in only):
                continue
            if not self._add(plan, name, lambda n=name: self.workspace_retriever(n)):
                continue  # switched off: not in the plan at all
            added = plan.sources[-1] if plan.sources else None
            weight = getattr(added, "fusion_weight", None) if added is not None else None
            if getattr(added, "name", None) != name:
                weight = None  # this retriever was skipped; the last one is another's
            if isinstance(weight, int | float) and not isinstance(weight, bool):
                plan.weights[name] = float(weight)  # the source's own default weight
            plan.timeouts_ms[name] = self.config.workspace.timeout_ms
            plan.groups[name] = spec.item.group
        for entry in self.config.visible_knowledge_bases(profile):
            if only is not None and entry.id not in only:
                continue
            self._add(plan, entry.id, lambda e=entry: self.knowledge_base(e))
            plan.timeouts_ms[entry.id] = entry.config.timeout_ms
            plan.weights[entry.id] = entry.config.weight
            if getattr(entry.config, "filter", None):
                plan.filters[entry.id] = entry.config.filter
            kind = self.registry.knowledge_base_kinds.get(entry.kind)
            plan.groups[entry.id] = kind.group if kind else SourceGroup.KNOWLEDGE_BASE
        return plan

    def _add(self, plan: SourcePlan, name: str, build: object) -> bool:
        """Add the source ``build`` makes to ``plan`` (or to its skipped ones, with the
        reason); False when it is switched off and left out of the plan altogether."""
        try:
            source = build()  # type: ignore[operator]
        except Exception as exc:  # a broken source is reported, never fatal
            plan.skipped[name] = f"{type(exc).__name__}: {exc}"
            plan.failed = True
            return True
        switched_off = getattr(source, "switched_off", None)
        if callable(switched_off) and switched_off():
            return False  # configured to keep nothing to search: as if disabled
        reason = _unavailable(source)
        if callable(getattr(source, "unavailable_reason", None)):
            plan.availability.append((source, reason))
        if reason:
            plan.skipped[name] = reason
        else:
            plan.sources.append(source)
        return True

    def composite(
        self,
        profile: str,
        *,
        fusion: str | None = None,
        only: set[str] | None = None,
    ) -> CompositeWorkspaceRetriever:
        """A composite over every source ``profile`` sees, ready to ``retrieve``.

        The same composite (and its worker threads) serves every call with the same
        profile, fusion, ``only`` and set of answering sources; a source that becomes
        available (an index built meanwhile) gets a new one.
        """
        return self.composite_and_groups(profile, fusion=fusion, only=only)[0]

    def composite_and_groups(
        self,
        profile: str,
        *,
        fusion: str | None = None,
        only: set[str] | None = None,
    ) -> tuple[CompositeWorkspaceRetriever, dict[str, SourceGroup]]:
        """:meth:`composite`, plus each source's group (name -> group)."""
        from kairox.retrieval.composite import CompositeWorkspaceRetriever
        from kairox.retrieval.filters import parse_filter
        from kairox.retrieval.fusion import DEFAULT_FUSION
        from kairox.workspace.file_ranking import DEFAULT_ROLE_WEIGHTS, FileRanking

        plan = self.plan(profile, only=only)
        method = fusion or DEFAULT_FUSION
        key = (
            profile,
            method,
            None if only is None else frozenset(only),
            tuple(id(source) for source in plan.sources),
            tuple(plan.skipped.items()),
        )
        with self._lock:
            composite = self._composites.get(key)
            if composite is None:
                self._warm_up(plan.sources)
                settings = self.config.workspace
                ranking = FileRanking(
                    role_weights={**DEFAULT_ROLE_WEIGHTS, **settings.role_weights},
                    asked_role_weight=settings.asked_role_weight,
                    asked_path_bonus=settings.asked_path_bonus,
                    file_evidence=settings.file_evidence,
                    # The workspace sources that answer: the key changes when one does.
                    sources=frozenset(
                        source.name
                        for source in plan.sources
                        if plan.groups.get(source.name) is SourceGroup.WORKSPACE
                    ),
                )
                composite = CompositeWorkspaceRetriever(
                    plan.sources,
                    timeouts_ms=plan.timeouts_ms,
                    weights=plan.weights,
                    fusion=method,
                    skipped=plan.skipped,
                    source_filters={name: parse_filter(raw) for name, raw in plan.filters.items()},
                    candidates=settings.candidate_depth,
                    # Without a workspace source, file ranking would leave every
                    # candidate as fused: fusion then cuts to k itself.
                    rescore=ranking.rescore if ranking.sources else None,
                )
                self._composites[key] = composite
        return composite, plan.groups

    def _warm_up(self, sources: list[Source]) -> None:
        """Load models now, outside the per-source deadlines of the first query."""
        for source in sources:
            embedder = getattr(source, "embedder", None)
            if embedder is not None and embedder.name not in self._warmed:
                embedder.embed(["warm-up"])
                self._warmed.add(embedder.name)

    async def aclose(self) -> None:
        """Close every source, shared object, composite and embedding backend built here."""
        with self._lock:
            composites = list(self._composites.values())
            owned = [*self._built.values(), *self._shared.values(), *self._backends.values()]
            self._composites.clear()
            self._plans.clear()
            self._built.clear()
            self._shared.clear()
            self._backends.clear()
            self._warmed.clear()
        for composite in composites:
            composite.close()
        errors: list[str] = []
        closed: set[int] = set()
        for thing in owned:  # in build order, each object once
            if id(thing) in closed:
                continue
            closed.add(id(thing))
            close = getattr(thing, "close", None)
            if not callable(close):
                continue
            try:
                result = close()
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:  # close the others; say which one failed
                errors.append(f"{type(thing).__name__}: {type(exc).__name__}: {exc}")
        if errors:
            raise SourceError("closing sources failed: " + "; ".join(errors))

    def with_stages(
        self,
        composite: CompositeWorkspaceRetriever,
        profile_name: str,
        rerank: str | None,
        query_transform: str | None,
        *,
        model_backend: Callable[..., ModelBackend],
    ) -> CompositeWorkspaceRetriever | StagedRetrieval:
        """The composite, wrapped in the profile's search stages when it has any.

        ``rerank``/``query_transform`` override the profile's (``"none"`` switches off).
        """
        from kairox.retrieval.stages import StagedRetrieval

        _, profile = self.config.resolve_profile(profile_name)
        rerank = profile.rerank if rerank is None else rerank
        query_transform = profile.query_transform if query_transform is None else query_transform
        reranker = self._stage("rerankers", rerank, profile_name, profile, model_backend)
        transform = self._stage(
            "query_transforms", query_transform, profile_name, profile, model_backend
        )
        if reranker is None and transform is None:
            return composite
        return StagedRetrieval(
            composite,
            transform=transform,
            transform_timeout_ms=profile.query_transform_timeout_ms,
            reranker=reranker,
            rerank_depth=profile.rerank_depth,
            rerank_timeout_ms=profile.rerank_timeout_ms,
        )

    def _stage(
        self,
        table: str,
        name: str | None,
        profile_name: str,
        profile: Any,
        model_backend: Callable[..., ModelBackend],
    ) -> Any:
        """A reranker or query transform built by its spec, once per factory and profile."""
        if name is None or name == "none":
            return None
        from kairox.plugin_host.registry import StageContext

        key = (table, name, profile_name)
        with self._lock:
            built = self._stages.get(key)
            if built is not None:
                return built
            specs = getattr(self.registry, table)
            spec = specs.get(name)
            if spec is None:
                what = specs.what
                known = ", ".join(sorted(specs)) or "none"
                raise SourceError(f"no {what} named {name!r}; installed: {known}")
            ctx = StageContext(
                profile_name=profile_name,
                profile=profile,
                model_backend=lambda: model_backend(profile, profile_name=profile_name),
                embedding_backend=self.embedding_backend,
                embedding_name=self.config.workspace.embedding_backend,
                settings=plugin_settings(spec.config_model, profile, f"{specs.what} {name!r}"),
            )
            try:
                built = spec.factory(ctx)
            except Exception as exc:  # a stage that cannot be built fails its searches' stage
                built = _UnbuiltStage(name, f"cannot be built: {type(exc).__name__}: {exc}")
            self._stages[key] = built
            return built

    def close(self) -> None:
        """:meth:`aclose` for synchronous callers (from inside an event loop too: then the
        closing runs on a thread of its own, and this call waits for it)."""
        run_coroutine(self.aclose)


def _unavailable(source: Any) -> str | None:
    """Why ``source`` cannot answer yet (its ``unavailable_reason()``), or ``None``."""
    reason_of = getattr(source, "unavailable_reason", None)
    return reason_of() if callable(reason_of) else None


def plugin_settings(model: Any, profile: ProfileConfig, what: str) -> Any:
    """The profile's keys for one plugin, validated by its ``config_model`` (or ``None``)."""
    if model is None:
        return None
    from pydantic import ValidationError

    fields = set(model.model_fields)
    mine = {k: v for k, v in profile.plugin_keys.items() if k in fields}
    try:
        return model.model_validate(mine)
    except ValidationError as exc:
        raise SourceError(
            f"the profile's keys for the {what} are not valid: {exc}; "
            "`kairox config check` says which and how to fix them"
        ) from None


class _UnbuiltStage:
    """Stands in for a stage whose factory raised: each search reports why, and goes on."""

    def __init__(self, name: str, why: str) -> None:
        self.name = name
        self.why = why

    def rerank(self, query: Any, hits: Any) -> Any:
        raise SourceError(self.why)

    def transform(self, query: Any) -> Any:
        raise SourceError(self.why)
