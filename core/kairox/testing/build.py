"""Building sources in a plugin's tests the way Kairox builds them, and an embedder that
counts what it is asked to embed."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kairox.embedding import EmbeddingBackend
from kairox.registry import BuildContext

if TYPE_CHECKING:
    from kairox.config import WorkspaceConfig

__all__ = ["CountingEmbedder", "build_source"]

Embedders = Mapping[str, EmbeddingBackend] | Callable[[str], EmbeddingBackend]


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
    :class:`~kairox.registry.BuildContext`.

    :param base_dir: the folder relative paths resolve against (the config file's folder),
        also used as workspace root and state folder; default the current folder.
    :param embedders: the embedding backends the factory may ask for, by name (a mapping,
        or a function of the name); asking for another is a ``KeyError`` naming it.
    :param workspace: the ``[workspace]`` settings the factory sees, if any.
    """
    from kairox.testing import check_kind_registration

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
