"""Every hook a Kairox plugin can implement, with its call semantics.

The ``kairox_register_<things>`` hooks are *register-callbacks* (the ``llm``/``datasette``
habit): when the plugin manager builds its registries it calls every plugin's
implementation once, with a ``register`` function bound to that plugin. The host collects
what is registered, validates it, and rejects a name that another plugin already
registered (the error names both plugins); a plugin registers all of its names or none.
``kairox_register_commands`` is the exception: it is called when the CLI starts and is
given the CLI itself. Implementations return nothing; a return value is ignored.

What a profile picks by name (a model backend, summariser, query transform or reranker)
may carry a ``config_model`` on its record, a :class:`~kairox.config.schema.PluginSettings`
subclass that validates its own keys in ``[profiles.<name>]``.

Built-in plugins in :mod:`kairox.default_plugins` register through exactly these hooks,
so they can be listed (``kairox plugins --all``), traced and replaced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from collections.abc import Callable

    import click

    from kairox.plugin_host import registry

hookspec = pluggy.HookspecMarker("kairox")


# -------------------------------------------------------------------------
# Embedding
# -------------------------------------------------------------------------


@hookspec
def kairox_register_embedding_backends(
    register: Callable[[registry.EmbeddingBackendSpec], None],
) -> None:
    """Register embedding backends by name.

    Called as a register-callback (see above), before any backend is built.
    Register an :class:`~kairox.plugin_host.registry.EmbeddingBackendSpec` whose ``factory`` builds the
    backend on first use, so heavy libraries (torch) are imported only when a user picks
    that backend.

    :param register: call ``register(EmbeddingBackendSpec(name=..., factory=...))`` once
        per backend.

    .. versionadded:: 0.1
    """


# -------------------------------------------------------------------------
# Sources: workspace retrievers and knowledge-base kinds
# -------------------------------------------------------------------------


@hookspec
def kairox_register_workspace_retrievers(
    register: Callable[[registry.WorkspaceRetrieverSpec], None],
) -> None:
    """Register retrievers over the current workspace that every profile gets.

    Called as a register-callback; the factories run when a profile's sources are built.
    Each registered :class:`~kairox.plugin_host.registry.WorkspaceRetrieverSpec` has a ``factory``
    taking a :class:`~kairox.plugin_host.registry.BuildContext` and returning a
    :class:`~kairox.retrieval.Source`. The built-in workspace RAG index is one;
    a plugin could add code-symbol or git-history search. Its hits go to the prompt's
    workspace section (the spec's ``group``, :class:`~kairox.plugin_host.registry.SourceGroup`). The
    factory runs once per facade; the source is reused for every search and closed (its
    ``close()``, if any) when the facade closes. Users disable one with
    ``[workspace] disabled_retrievers = ["name"]``.

    :param register: call ``register(WorkspaceRetrieverSpec(name=..., factory=...))``.

    .. versionadded:: 0.1
    """


@hookspec
def kairox_register_knowledge_base_kinds(
    register: Callable[[registry.KnowledgeBaseKind], None],
) -> None:
    """Register configurable knowledge-base kinds (``sqlite-fts``, ``tantivy``, ...).

    Called as a register-callback, before any configuration is validated (a kind's schema
    checks its tables). A :class:`~kairox.plugin_host.registry.KnowledgeBaseKind` carries the kind's name, its config
    schema (a subclass of :class:`~kairox.config.schema.KnowledgeBaseConfig` that validates the
    kind-specific keys of a ``[knowledge_bases.<id>]`` table) and a factory that builds a
    :class:`~kairox.retrieval.Source` from one validated table.

    :param register: call ``register(KnowledgeBaseKind(name=..., config_model=...,
        factory=...))``.

    .. versionadded:: 0.1
    """


@hookspec
def kairox_register_converters(register: Callable[[registry.ConverterSpec], None]) -> None:
    """Register document converters: file types read as text plus structure.

    Called as a register-callback. A :class:`~kairox.plugin_host.registry.ConverterSpec` claims file
    suffixes (``(".pdf",)``) and has ``convert(data, filename)`` return a
    :class:`~kairox.workspace.convert.base.Converted`: the text, its heading sections and
    labelled regions (pages, slides, sheets, cells). ``kairox index`` and ``kairox kb
    ingest`` read every claimed file through its converter and chunk along that
    structure. A file the converter cannot read (it raises
    :class:`~kairox.workspace.convert.base.ConversionError`) is skipped with the reason;
    the run goes on. When two plugins claim a suffix, the later-loaded one's wins, so an
    installed plugin replaces a built-in converter.

    :param register: call ``register(ConverterSpec(name=..., suffixes=..., convert=...))``.

    .. versionadded:: 0.2
    """


# -------------------------------------------------------------------------
# Search stages: query transforms and rerankers
# -------------------------------------------------------------------------


@hookspec
def kairox_register_query_transforms(
    register: Callable[[registry.QueryTransformSpec], None],
) -> None:
    """Register query transforms: rewrites of a query before the sources are asked.

    Called as a register-callback; a transform is built when a profile that names it
    (``query_transform = "NAME"``) first searches. It runs under the profile's
    ``query_transform_timeout_ms``: one that times out or raises leaves the user's query as
    it was, and the search's stage report says ``timeout`` or ``error``.

    :param register: call ``register(QueryTransformSpec(name=..., factory=...))``; the
        factory takes a :class:`~kairox.plugin_host.registry.StageContext`.

    .. versionadded:: 0.2
    """


@hookspec
def kairox_register_rerankers(register: Callable[[registry.RerankerSpec], None]) -> None:
    """Register rerankers: they reorder the fused candidates of a search.

    Called as a register-callback; a reranker is built when a profile that names it
    (``rerank = "NAME"``, or ``kairox search --rerank NAME``) first searches. It receives the
    best ``rerank_depth`` fused hits and runs under ``rerank_timeout_ms``: one that times out,
    raises or returns hits it was not given leaves the fused ranking as it was, and the
    search's stage report says ``timeout`` or ``error``.

    :param register: call ``register(RerankerSpec(name=..., factory=...))``; the factory
        takes a :class:`~kairox.plugin_host.registry.StageContext`.

    .. versionadded:: 0.2
    """


# -------------------------------------------------------------------------
# Context: summarisers and model backends
# -------------------------------------------------------------------------


@hookspec
def kairox_register_summarizers(register: Callable[[registry.SummarizerSpec], None]) -> None:
    """Register history summarisers used by compaction.

    Called as a register-callback; a summariser is built when a session first compacts.

    :param register: call ``register(SummarizerSpec(name=..., factory=...))``; the
        factory takes a :class:`~kairox.plugin_host.registry.SummarizerContext`.

    .. versionadded:: 0.1
    """


@hookspec
def kairox_register_model_backends(register: Callable[[registry.ModelBackendSpec], None]) -> None:
    """Register chat model backends (scripted, OpenAI-compatible HTTP, ...).

    Called as a register-callback; a backend is built when a profile's model is first used.

    :param register: call ``register(ModelBackendSpec(name=..., factory=...))``; the
        factory takes a :class:`~kairox.plugin_host.registry.ModelBackendContext` (the profile, its
        validated ``settings``, per-call ``options``).

    .. versionadded:: 0.1
    """


# -------------------------------------------------------------------------
# Command line
# -------------------------------------------------------------------------


@hookspec
def kairox_register_commands(cli: click.Group) -> None:
    """Add commands or command groups to the ``kairox`` CLI.

    Called once per plugin when the CLI starts (not a register-callback). A plugin
    whose hook raises is reported on stderr and its commands are missing; the rest of
    the CLI keeps working. A command name the CLI already has is rejected.

    :param cli: the root :class:`click.Group`; use ``@cli.command()`` or
        ``cli.add_command(...)``.

    .. versionadded:: 0.1
    """
