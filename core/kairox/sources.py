"""Turning configuration into retrievers: which sources a profile gets, built once each.

``SourceFactory`` resolves embedding backends (one shared instance per name, so a
query is embedded once per backend), builds the workspace retrievers every profile gets
and the knowledge bases visible to a profile, and hands the composite everything it
needs: sources, per-source deadlines and weights, and the sources it must report as
skipped (with the reason and the fix).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kairox.errors import KairoxError
from kairox.registry import BuildContext

if TYPE_CHECKING:
    from kairox.config import KairoxConfig, KnowledgeBaseEntry
    from kairox.embedding import EmbeddingBackend
    from kairox.registry import Registry
    from kairox.retrieval import WorkspaceRetriever
    from kairox.retrieval.composite import CompositeWorkspaceRetriever


class SourceError(KairoxError, RuntimeError):
    """A source cannot be built as configured (the message says how to fix it)."""


@dataclass
class SourcePlan:
    """The sources one profile searches, with their settings."""

    sources: list[WorkspaceRetriever] = field(default_factory=list)
    timeouts_ms: dict[str, int] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


class SourceFactory:
    """Builds retrievers from a loaded configuration and the plugin registry."""

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

    def embedding_backend(self, name: str) -> EmbeddingBackend:
        """The shared backend registered under ``name``, built on first use."""
        if name not in self._backends:
            spec = self.registry.embedding_backends.get(name)
            if spec is None:
                known = ", ".join(sorted(self.registry.embedding_backends)) or "none"
                hint = (
                    " (install it: kairox install kairox-sentence-transformers)"
                    if name == "minilm"
                    else ""
                )
                raise SourceError(
                    f"no embedding backend named {name!r}{hint}; installed backends: {known}"
                )
            self._backends[name] = spec.factory()
        return self._backends[name]

    def context(self, base_dir: Path | None = None) -> BuildContext:
        return BuildContext(
            workspace_root=self.workspace_root,
            state_dir=self.state_dir,
            base_dir=base_dir or self.workspace_root,
            embedding_backend=self.embedding_backend,
            workspace=self.config.workspace,
        )

    def workspace_retriever(self, name: str) -> WorkspaceRetriever:
        spec = self.registry.workspace_retrievers.get(name)
        if spec is None:
            known = ", ".join(sorted(self.registry.workspace_retrievers)) or "none"
            raise SourceError(f"no workspace retriever named {name!r}; installed: {known}")
        return spec.factory(self.context())

    def knowledge_base(self, entry: KnowledgeBaseEntry) -> WorkspaceRetriever:
        """Build one knowledge base; :class:`SourceError` when its kind is missing."""
        if not entry.available:
            raise SourceError(entry.unavailable_reason or f"kind {entry.kind!r} is unavailable")
        kind = self.registry.knowledge_base_kinds[entry.kind]
        return kind.factory(entry.id, entry.config, self.context(entry.origin.parent))

    def plan(self, profile: str, *, only: set[str] | None = None) -> SourcePlan:
        """Every source ``profile`` sees (workspace retrievers, then knowledge bases).

        A source that cannot be built, or says it cannot answer yet, is listed in
        ``skipped`` with the reason rather than failing the whole search.
        """
        plan = SourcePlan()
        disabled = set(self.config.workspace.disabled_retrievers)
        for name in self.registry.workspace_retrievers:
            if name in disabled or (only is not None and name not in only):
                continue
            self._add(plan, name, lambda n=name: self.workspace_retriever(n))
            plan.timeouts_ms[name] = self.config.workspace.timeout_ms
        for entry in self.config.visible_knowledge_bases(profile):
            if only is not None and entry.id not in only:
                continue
            self._add(plan, entry.id, lambda e=entry: self.knowledge_base(e))
            plan.timeouts_ms[entry.id] = entry.config.timeout_ms
            plan.weights[entry.id] = entry.config.weight
        return plan

    def _add(self, plan: SourcePlan, name: str, build: object) -> None:
        try:
            source = build()  # type: ignore[operator]
        except Exception as exc:  # a broken source is reported, never fatal
            plan.skipped[name] = f"{type(exc).__name__}: {exc}"
            return
        reason_of = getattr(source, "unavailable_reason", None)
        reason = reason_of() if callable(reason_of) else None
        if reason:
            plan.skipped[name] = reason
        else:
            plan.sources.append(source)

    def composite(
        self,
        profile: str,
        *,
        fusion: str | None = None,
        only: set[str] | None = None,
    ) -> CompositeWorkspaceRetriever:
        """A composite over every source ``profile`` sees, ready to ``retrieve``."""
        from kairox.retrieval.composite import CompositeWorkspaceRetriever
        from kairox.retrieval.fusion import DEFAULT_FUSION

        plan = self.plan(profile, only=only)
        # Load models now, outside the per-source deadlines of the first query.
        warmed: set[str] = set()
        for source in plan.sources:
            embedder = getattr(source, "embedder", None)
            if embedder is not None and embedder.name not in warmed:
                embedder.embed(["warm-up"])
                warmed.add(embedder.name)
        return CompositeWorkspaceRetriever(
            plan.sources,
            timeouts_ms=plan.timeouts_ms,
            weights=plan.weights,
            fusion=fusion or DEFAULT_FUSION,
            skipped=plan.skipped,
        )
