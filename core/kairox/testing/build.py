"""Registering a plugin and building its sources in tests the way Kairox does, and an
embedder that counts what it is asked to embed."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kairox.plugin_host.manager import KairoxPluginManager, PluginInfo, get_plugin_manager
from kairox.plugin_host.registry import BuildContext, KnowledgeBaseKind
from kairox.retrieval.embedding import EmbeddingBackend

if TYPE_CHECKING:
    from kairox.config.schema import WorkspaceConfig

__all__ = [
    "CountingEmbedder",
    "ModelHoldingEmbedder",
    "build_source",
    "check_kind_registration",
    "registered_plugin",
]

Embedders = Mapping[str, EmbeddingBackend] | Callable[[str], EmbeddingBackend]


@contextlib.contextmanager
def registered_plugin(
    plugin: object, name: str, pm: KairoxPluginManager | None = None
) -> Iterator[KairoxPluginManager]:
    """Register ``plugin`` for the duration of a ``with`` block, and always unregister it."""
    manager = pm if pm is not None else get_plugin_manager()
    manager.add_plugin(plugin, PluginInfo(name, package=None, version=None, builtin=False))
    try:
        yield manager
    finally:
        manager.remove_plugin(name)


def check_kind_registration(plugin: object, kind: str) -> KnowledgeBaseKind:
    """Assert that ``plugin`` registers the knowledge-base ``kind`` cleanly; return it."""
    from kairox.config.schema import KnowledgeBaseConfig

    pm = KairoxPluginManager()
    with registered_plugin(plugin, "plugin-under-test", pm):
        failures = pm.failures()
        assert not failures, f"plugin failed to register: {failures[0].error}"
        registry = pm.registry
        assert kind in registry.knowledge_base_kinds, (
            f"kind {kind!r} not registered; got {sorted(registry.knowledge_base_kinds)}"
        )
        registered = registry.knowledge_base_kinds[kind]
    assert issubclass(registered.config_model, KnowledgeBaseConfig), (
        "config_model must subclass kairox.config.schema.KnowledgeBaseConfig"
    )
    assert callable(registered.factory)
    return registered


def build_source(
    plugin: object,
    kind: str,
    kb_id: str = "papers",
    *,
    base_dir: Path | str | None = None,
    embedders: Embedders | None = None,
    workspace: WorkspaceConfig | None = None,
    **options: Any,
) -> Any:
    """A source built as Kairox builds one from a ``[knowledge_bases.<kb_id>]`` table.

    Checks that ``plugin`` registers ``kind`` cleanly, validates ``options`` (the table's
    keys but ``kind``) with the kind's config model, and calls its factory with a
    :class:`~kairox.plugin_host.registry.BuildContext`.

    :param base_dir: the folder relative paths resolve against (the config file's folder),
        also used as workspace root and state folder; default the current folder.
    :param embedders: the embedding backends the factory may ask for, by name (a mapping,
        or a function of the name); asking for another is a ``KeyError`` naming it.
    :param workspace: the ``[workspace]`` settings the factory sees, if any.
    """
    registered = check_kind_registration(plugin, kind)
    config = registered.config_model(kind=kind, **options)
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    ctx = BuildContext(
        workspace_root=base,
        state_dir=base,
        base_dir=base,
        embedding_backend=_lookup(embedders),
        workspace=workspace,
    )
    return registered.factory(kb_id, config, ctx)


def _lookup(embedders: Embedders | None) -> Callable[[str], EmbeddingBackend]:
    if callable(embedders):
        return embedders
    known = dict(embedders or {})

    def backend(name: str) -> EmbeddingBackend:
        if name not in known:
            raise KeyError(
                f"no embedding backend {name!r} in this test; pass embedders={{{name!r}: ...}}"
            )
        return known[name]

    return backend


class CountingEmbedder:
    """An embedding backend that records every batch it is asked to embed.

    It wraps ``inner`` (by default the built-in hashing backend of width ``dim``); with
    ``fill`` instead, every vector is ``dim`` copies of ``fill`` (a backend whose answers
    do not matter). Safe to call from several threads at once.

    :attr calls: each batch of texts, oldest first (``[]`` when nothing was embedded).
    """

    def __init__(
        self,
        inner: EmbeddingBackend | None = None,
        *,
        dim: int = 384,
        name: str | None = None,
        fill: float | None = None,
    ) -> None:
        if inner is None and fill is None:
            from kairox.default_plugins.hashing_embedder import HashingEmbedder

            inner = HashingEmbedder(dim)
        self.inner = inner
        self.fill = fill
        self.dim = inner.dim if inner is not None else dim
        self.name = name or (inner.name if inner is not None else f"counting-{dim}")
        self.calls: list[list[str]] = []
        self._lock = threading.Lock()

    @property
    def texts_embedded(self) -> int:
        """How many texts were embedded, over every batch."""
        with self._lock:
            return sum(len(batch) for batch in self.calls)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            self.calls.append(list(texts))
        if self.inner is None:
            return np.full((len(texts), self.dim), self.fill, dtype=np.float32)
        return self.inner.embed(texts)


class ModelHoldingEmbedder(CountingEmbedder):
    """A :class:`CountingEmbedder` with a model to hold: the first non-empty ``embed``
    "loads" it (``loaded``), ``release()`` drops it, as a real backend's does.

    :attr events: ``"embed"`` for each non-empty batch and ``"release"`` for each
        release, oldest first.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.loaded = False
        self.events: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts):
            with self._lock:
                self.loaded = True
                self.events.append("embed")
        return super().embed(texts)

    def release(self) -> None:
        with self._lock:
            self.loaded = False
            self.events.append("release")
