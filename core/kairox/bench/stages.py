"""Search stages on benchmark systems: ``SYSTEM+rerank:NAME`` and ``SYSTEM+transform:NAME``.

``hybrid+rerank:mmr`` is the ``hybrid`` system with the ``mmr`` reranker after it, built
through the same registry specs and :class:`~kairox.retrieval.stages.StagedRetrieval` a
profile's search uses, so a user measures what a stage buys on their data. A stage that
needs a model (``llm``, ``multi-query``, ``hyde``) gets the ``openai-compatible`` backend of
the default profile unless a profile is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kairox.config.schema import ProfileConfig
from kairox.plugin_host.registry import Registry, StageContext
from kairox.retrieval.stages import StagedRetrieval
from kairox.support.errors import KairoxError

__all__ = ["STAGE_TABLES", "build_staged", "split_staged"]

#: ``rerank`` -> the registry table of rerankers, ``transform`` -> query transforms.
STAGE_TABLES = {"rerank": "rerankers", "transform": "query_transforms"}
#: Benchmarks wait for a stage as long as it takes: they measure it, they do not guard.
_NO_DEADLINE_MS = 600_000


class StageSpecError(KairoxError, ValueError):
    """A ``+rerank:``/``+transform:`` suffix names nothing installed (the message says what)."""


def split_staged(name: str) -> tuple[str, list[tuple[str, str]]]:
    """``"hybrid+rerank:mmr"`` -> ``("hybrid", [("rerank", "mmr")])``."""
    base, *suffixes = name.split("+")
    stages: list[tuple[str, str]] = []
    for suffix in suffixes:
        kind, _, stage = suffix.partition(":")
        if kind not in STAGE_TABLES or not stage:
            raise StageSpecError(
                f"{name!r}: {suffix!r} is not a stage; write SYSTEM+rerank:NAME or "
                "SYSTEM+transform:NAME (e.g. hybrid+rerank:mmr)"
            )
        stages.append((kind, stage))
    if len({kind for kind, _ in stages}) != len(stages):
        raise StageSpecError(f"{name!r}: at most one reranker and one query transform")
    return base, stages


def check_stages(stages: list[tuple[str, str]], registry: Registry) -> None:
    for kind, stage in stages:
        specs = getattr(registry, STAGE_TABLES[kind])
        if stage not in specs:
            installed = ", ".join(sorted(specs)) or "none"
            raise StageSpecError(f"no {specs.what} named {stage!r}; installed: {installed}")


def build_staged(
    base: Any,
    stages: list[tuple[str, str]],
    registry: Registry,
    *,
    embedding_backend: Callable[[str], Any],
    embedding_name: str,
    candidates: int,
    profile: ProfileConfig | None = None,
) -> StagedRetrieval:
    """``base`` (a composite, or one source that is wrapped in one) with the stages after it."""
    from kairox.retrieval.composite import CompositeWorkspaceRetriever

    profile = profile or ProfileConfig()
    if not hasattr(base, "run_sync"):
        base = CompositeWorkspaceRetriever(
            [base], default_timeout_ms=_NO_DEADLINE_MS, candidates=candidates
        )
    built: dict[str, Any] = {}
    for kind, stage in stages:
        specs = getattr(registry, STAGE_TABLES[kind])
        spec = specs[stage]
        settings = spec.config_model() if spec.config_model is not None else None
        built[kind] = spec.factory(
            StageContext(
                profile_name="bench",
                profile=profile,
                model_backend=lambda: _default_model(registry, profile),
                embedding_backend=embedding_backend,
                embedding_name=embedding_name,
                settings=settings,
            )
        )
    return StagedRetrieval(
        base,
        transform=built.get("transform"),
        transform_timeout_ms=_NO_DEADLINE_MS,
        reranker=built.get("rerank"),
        rerank_depth=profile.rerank_depth,
        rerank_timeout_ms=_NO_DEADLINE_MS,
    )


def _default_model(registry: Registry, profile: ProfileConfig) -> Any:
    from kairox.plugin_host.registry import ModelBackendContext

    spec = registry.model_backends.get(profile.backend)
    if spec is None:
        raise StageSpecError(f"no model backend named {profile.backend!r} for the stage")
    settings = spec.config_model() if spec.config_model is not None else None
    return spec.factory(ModelBackendContext("bench", profile, settings))
