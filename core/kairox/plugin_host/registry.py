"""The typed records plugins register, and the registry that collects them.

Plugins never touch the registry directly: they receive a ``register`` callback from a
``kairox_register_*`` hook (see :mod:`kairox.plugin_host.hookspecs`). The registry remembers which
plugin registered each name so a clash can name both plugins.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kairox.workspace.convert.base import ConverterSpec

if TYPE_CHECKING:
    from pydantic import BaseModel

    from kairox.config.schema import KnowledgeBaseConfig, ProfileConfig, WorkspaceConfig
    from kairox.retrieval import Source
    from kairox.retrieval.embedding import EmbeddingBackend
    from kairox.support.models import ModelBackend
    from kairox.workspace.convert.converters import Converters

R = TypeVar("R")
C = TypeVar("C")  # the context a factory receives


class SourceGroup(StrEnum):
    """Where a source's hits go in the prompt: the workspace section or a knowledge base's.

    Declared by the spec that registers the source, never guessed from its name.
    """

    WORKSPACE = "workspace"
    KNOWLEDGE_BASE = "knowledge_base"


def _build_unshared(key: str, build: Callable[[], R]) -> R:
    return build()


@dataclass(frozen=True, slots=True)
class BuildContext:
    """What a factory needs to build a source: where things live, and shared backends.

    :param workspace_root: the root of the current workspace.
    :param state_dir: ``$KAIROX_HOME``, where Kairox keeps its own databases.
    :param base_dir: the folder relative paths in this source's config resolve against
        (the folder of the file that defined the table).
    :param embedding_backend: returns the (shared, cached) embedding backend of a name,
        so a query is embedded once per backend rather than once per source.
    :param workspace: the ``[workspace]`` settings (embedding backend, chunking), when
        a configuration is loaded.
    :param converters: the document converters in force (registered through
        ``kairox_register_converters``), or ``None`` for the built-in set.
    :param shared: ``shared(key, build)`` returns the object stored under ``key``, calling
        ``build()`` the first time: sources built by one facade share it (the two built-in
        workspace retrievers share one index this way). The facade closes shared objects
        that have a ``close()`` when it closes. Without a facade, every call builds anew.
    :param owned_paths: files and folders Kairox keeps its own data in (``$KAIROX_HOME``,
        local knowledge bases' ``path``): never indexed as workspace files.
    """

    workspace_root: Path
    state_dir: Path
    base_dir: Path
    embedding_backend: Callable[[str], EmbeddingBackend]
    workspace: WorkspaceConfig | None = None
    shared: Callable[[str, Callable[[], Any]], Any] = _build_unshared
    owned_paths: tuple[Path, ...] = ()
    #: the registered document converters (``None``: the built-in ones).
    converters: Converters | None = None

    def resolve(self, path: str | Path) -> Path:
        """A path from the config as an absolute path: ``~`` expanded, and a relative one
        taken from :attr:`base_dir` (the folder of the file that set it)."""
        resolved = Path(path).expanduser()
        return resolved if resolved.is_absolute() else self.base_dir / resolved


@dataclass(frozen=True, slots=True)
class EmbeddingBackendSpec:
    """An embedding backend by name; ``factory()`` builds it on first use."""

    name: str
    factory: Callable[[], EmbeddingBackend]
    description: str = ""


@dataclass(frozen=True, slots=True)
class WorkspaceRetrieverSpec:
    """A retriever over the current workspace; ``factory(ctx)`` builds it.

    :param group: where its hits go in the prompt (the workspace section by default; a
        retriever over, say, a wiki mirrored into the workspace may say knowledge base).
    """

    name: str
    factory: Callable[[BuildContext], Source]
    description: str = ""
    group: SourceGroup = SourceGroup.WORKSPACE


@dataclass(frozen=True, slots=True)
class KnowledgeBaseKind:
    """A configurable knowledge-base kind.

    :param name: the value of ``kind`` in ``[knowledge_bases.<id>]``.
    :param config_model: a :class:`~kairox.config.schema.KnowledgeBaseConfig` subclass that
        validates the table, kind-specific keys included.
    :param factory: ``factory(kb_id, config, ctx)`` returns a
        :class:`~kairox.retrieval.Source` named ``kb_id``.
    :param group: where its hits go in the prompt (a knowledge base's own section).
    """

    name: str
    config_model: type[KnowledgeBaseConfig]
    factory: Callable[[str, Any, BuildContext], Source]
    description: str = ""
    group: SourceGroup = SourceGroup.KNOWLEDGE_BASE


@dataclass(frozen=True, slots=True)
class ModelBackendContext:
    """What a model backend's factory receives.

    :param profile_name: the profile the backend serves.
    :param profile: the profile's common keys (``model``, ``encoding``, ...).
    :param settings: the profile's keys for this backend, validated by the spec's
        ``config_model`` (``None`` when the spec has none).
    :param options: set by the caller for this one backend, not by the config file
        (``kairox chat --script FILE`` gives the scripted backend its ``script``).
    """

    profile_name: str
    profile: ProfileConfig
    settings: Any = None
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SummarizerContext:
    """What a summariser's factory receives.

    :param profile: the profile whose history is summarised (its ``model`` and encoding).
    :param settings: the profile's keys for this summariser, validated by the spec's
        ``config_model`` (``None`` when the spec has none).
    :param model_backend: returns the profile's model backend (built on first call), for
        summarisers that ask a model.
    """

    profile: ProfileConfig
    model_backend: Callable[[], ModelBackend]
    settings: Any = None


@dataclass(frozen=True, slots=True)
class _ProfileSpec(Generic[C]):
    """What every kind of thing a profile picks by name registers (a model backend, a
    summariser, a search stage): a name, ``factory(ctx)`` building it from its context,
    and the optional ``config_model`` (a :class:`kairox.config.schema.PluginSettings` subclass)
    validating its own keys in ``[profiles.<name>]``, or ``None`` (no keys). ``kairox
    config check`` reports the schema's errors like any other."""

    name: str
    factory: Callable[[C], Any]
    description: str = ""
    config_model: type[BaseModel] | None = None


@dataclass(frozen=True, slots=True)
class SummarizerSpec(_ProfileSpec[SummarizerContext]):
    """A history summariser used by compaction; ``factory(ctx)`` builds it from a
    :class:`SummarizerContext`."""


@dataclass(frozen=True, slots=True)
class ModelBackendSpec(_ProfileSpec[ModelBackendContext]):
    """A chat model backend; ``factory(ctx)`` builds it from a :class:`ModelBackendContext`
    (its ``config_model`` takes keys such as ``base_url`` and ``api_key_env``)."""


@dataclass(frozen=True, slots=True)
class StageContext:
    """What a reranker's or query transform's factory receives.

    :param profile_name: the profile whose searches the stage serves.
    :param profile: the profile's common keys (``rerank_depth``, ``model``...).
    :param settings: the profile's keys for this stage, validated by the spec's
        ``config_model`` (``None`` when the spec has none).
    :param model_backend: returns the profile's model backend (built on first call), for
        stages that ask a model.
    :param embedding_backend: returns the shared embedding backend of a name.
    :param embedding_name: the workspace's embedding backend (``[workspace]
        embedding_backend``), the natural one for a stage that compares passages.
    """

    profile_name: str
    profile: ProfileConfig
    model_backend: Callable[[], ModelBackend]
    embedding_backend: Callable[[str], EmbeddingBackend]
    embedding_name: str = "hashing"
    settings: Any = None


@dataclass(frozen=True, slots=True)
class _StageSpec(_ProfileSpec[StageContext]):
    """What both kinds of search stage register: their factory takes a
    :class:`StageContext`."""


@dataclass(frozen=True, slots=True)
class RerankerSpec(_StageSpec):
    """A reranker: reorders the fused candidates of a search; ``factory(ctx)`` builds it.

    The built object has ``rerank(query, hits) -> list[FusedHit]`` (sync or async), returning
    some of the given hits, best first (see :mod:`kairox.retrieval.stages`).
    """


@dataclass(frozen=True, slots=True)
class QueryTransformSpec(_StageSpec):
    """A query transform: rewrites a query before retrieval; ``factory(ctx)`` builds it.

    The built object has ``transform(query) -> TransformedQuery`` (sync or async): the
    texts to search for, and optionally a text to embed for dense sources instead of the
    user's (see :mod:`kairox.retrieval.stages`).
    """


T = TypeVar("T")


def registers(*specs: Any) -> Callable[[Callable[[Any], None]], None]:
    """A ``kairox_register_*`` hook implementation that registers ``specs``, in order.

    Assign it to the hook's name in a plugin module instead of writing the hook out::

        kairox_register_rerankers = registers(
            RerankerSpec(name="mine", factory=build, config_model=MySettings),
        )

    The records are made when the module loads, so a factory should still import its
    heavy libraries itself. A record of the wrong kind for the hook is rejected when the
    hook is called, naming the plugin.
    """
    import pluggy

    def register_all(register: Callable[[Any], None]) -> None:
        for spec in specs:
            register(spec)

    # The marker kairox.hookimpl is, made here: the package root sits above this module.
    return pluggy.HookimplMarker("kairox")(register_all)


@dataclass(frozen=True, slots=True)
class Registered(Generic[T]):
    """One registered item and the plugin that registered it."""

    item: T
    plugin: str


class DuplicateNameError(ValueError):
    """Two plugins registered the same name for the same kind of thing."""


@dataclass
class Table(Generic[T]):
    """Name -> registered item for one hook, remembering who registered what."""

    what: str  # "embedding backend", "knowledge-base kind", ...
    spec_type: type
    entries: dict[str, Registered[T]] = field(default_factory=dict)

    def add(self, item: T, plugin: str) -> None:
        if not isinstance(item, self.spec_type):
            raise TypeError(
                f"plugin {plugin!r} registered {item!r} as a {self.what}; "
                f"expected a kairox.plugin_host.registry.{self.spec_type.__name__}"
            )
        name = item.name  # type: ignore[attr-defined]
        if not isinstance(name, str) or not name:
            raise ValueError(f"plugin {plugin!r} registered a {self.what} with an empty name")
        if name in self.entries:
            first = self.entries[name].plugin
            raise DuplicateNameError(
                f"{self.what} {name!r} is registered by two plugins: {first!r} and "
                f"{plugin!r}. Uninstall one of them, or limit loading with "
                f"KAIROX_LOAD_PLUGINS."
            )
        self.entries[name] = Registered(item, plugin)

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def __getitem__(self, name: str) -> T:
        return self.entries[name].item

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, name: str) -> T | None:
        entry = self.entries.get(name)
        return entry.item if entry else None

    def provider(self, name: str) -> str | None:
        entry = self.entries.get(name)
        return entry.plugin if entry else None


@dataclass
class Registry:
    """Everything the plugins registered, one table per hook."""

    embedding_backends: Table[EmbeddingBackendSpec] = field(
        default_factory=lambda: Table("embedding backend", EmbeddingBackendSpec)
    )
    workspace_retrievers: Table[WorkspaceRetrieverSpec] = field(
        default_factory=lambda: Table("workspace retriever", WorkspaceRetrieverSpec)
    )
    knowledge_base_kinds: Table[KnowledgeBaseKind] = field(
        default_factory=lambda: Table("knowledge-base kind", KnowledgeBaseKind)
    )
    summarizers: Table[SummarizerSpec] = field(
        default_factory=lambda: Table("summarizer", SummarizerSpec)
    )
    model_backends: Table[ModelBackendSpec] = field(
        default_factory=lambda: Table("model backend", ModelBackendSpec)
    )
    rerankers: Table[RerankerSpec] = field(default_factory=lambda: Table("reranker", RerankerSpec))
    query_transforms: Table[QueryTransformSpec] = field(
        default_factory=lambda: Table("query transform", QueryTransformSpec)
    )
    converters: Table[ConverterSpec] = field(
        default_factory=lambda: Table("converter", ConverterSpec)
    )
