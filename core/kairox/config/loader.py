"""Reading, layering and validating the configuration files into a :class:`KairoxConfig`.

:func:`load_config` reads the user file and the workspace file (:mod:`kairox.config.schema` says
which, and how tables layer), checks every table against its schema, the plugin registry's
kinds and backends and the secret rules, and either returns the whole configuration or
raises one :class:`~kairox.config.errors.ConfigError` listing every problem.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kairox.config.checks import TableChecks, sanitize_id, table_name
from kairox.config.errors import ConfigError, ConfigProblem, _rename_or, _suggest
from kairox.config.files import Table, same_file
from kairox.config.loaded import KairoxConfig, KnowledgeBaseEntry
from kairox.config.problems import model_keys
from kairox.config.schema import (
    _COMMON_KB_KEYS,
    _FIELD_FIXES,
    _ID_RE,
    _PROFILE_KEYS,
    DEFAULT_PROFILE,
    KNOWN_EMBEDDING_PACKAGES,
    KNOWN_KIND_PACKAGES,
    KnowledgeBaseConfig,
    MemoryConfig,
    ProfileConfig,
    RecallConfig,
    WorkspaceConfig,
    find_workspace_config,
    user_config_path,
)
from kairox.support.secrets import register_env_keys

if TYPE_CHECKING:
    from kairox.plugin_host.registry import Registry

__all__ = ["load_config"]


@dataclass
class _Loader(TableChecks):
    registry: Registry
    problems: list[ConfigProblem] = field(default_factory=list)

    # -- sections ---------------------------------------------------------

    def profiles(self, tables: dict[str, Table]) -> dict[str, ProfileConfig]:
        out: dict[str, ProfileConfig] = {}
        for ident, t in tables.items():
            self.check_id("profiles", ident, t.origin)
            if not self.check_is_table("profiles", ident, t):
                continue
            table = table_name("profiles", ident)
            skip = self.check_secrets(t.raw, t.origin, table)
            common = {k: v for k, v in t.raw.items() if k in _PROFILE_KEYS}
            rest = {k: v for k, v in t.raw.items() if k not in _PROFILE_KEYS}
            profile = self.validate(ProfileConfig, common, t.origin, table, skip=skip)
            if isinstance(profile, ProfileConfig):
                self.plugin_keys(profile, rest, t.origin, table, skip)
                profile = profile.with_plugin_keys(rest)
                for i, alias in enumerate(profile.aliases):
                    if not _ID_RE.fullmatch(alias):
                        self.add(
                            t.origin,
                            table,
                            f"aliases[{i}]",
                            f"invalid alias {alias!r}: it must be non-empty and use only "
                            "letters, digits, '_', '.' and '-'",
                            f'use e.g. "{sanitize_id(alias)}"',
                        )
                out[ident] = profile
        return out

    def plugin_keys(
        self,
        profile: ProfileConfig,
        keys: dict[str, Any],
        origin: Path,
        table: str,
        skip: set[str],
    ) -> None:
        """Validate the keys the profile's backend, summariser and the installed search stages
        own; report the rest.

        While either of them is not installed, keys nobody claims are left alone: they
        may be that plugin's (its commands fail with an install hint when used).
        """
        owners: list[tuple[Any, str, str]] = [
            (self.registry.model_backends, profile.backend, "model backend"),
            (self.registry.summarizers, profile.summarizer, "summarizer"),
        ]
        stages = (
            (self.registry.rerankers, profile.rerank, "reranker", "rerank"),
            (
                self.registry.query_transforms,
                profile.query_transform,
                "query transform",
                "query_transform",
            ),
        )
        for specs, name, what, key in stages:
            if name is None:
                continue
            if name not in specs:
                # A stage is named by the user here, so an unknown name is this file's error.
                self.not_installed(origin, table, key, f"no {what} named {name!r}", name, specs)
        # Every installed stage owns its keys, named or not: `kairox search --rerank NAME`
        # picks a stage for one search, and its settings must be able to wait in the profile.
        for specs, _, what, _ in stages:
            owners.extend((specs, name, what) for name in specs)
        claimed: set[str] = set()
        known = list(_PROFILE_KEYS)
        resolved = True
        for specs, name, what in owners:
            spec = specs.get(name)
            if spec is None:
                resolved = False
                continue
            model = spec.config_model
            if model is None:
                continue
            fields = set(model_keys(model))
            known += sorted(fields - set(known))
            claimed |= fields
            mine = {k: v for k, v in keys.items() if k in fields}
            settings = self.validate(
                model,
                mine,
                origin,
                table,
                skip=skip,
                plugin=specs.provider(name),
                kind=f"{what} {name}",
            )
            if settings is not None:
                # The backend's secret variables, defaults included, to keep out of errors.
                register_env_keys(settings.model_dump())
        if not resolved:
            return
        for key in sorted(set(keys) - claimed - skip):
            problem, fix = _rename_or(
                f"unknown key {key!r}",
                key,
                known,
                f"remove it; the keys of this profile are: {', '.join(known)}",
            )
            self.add(origin, table, key, problem, fix)

    def alias_collisions(
        self, profiles: dict[str, ProfileConfig], tables: dict[str, Table]
    ) -> None:
        def where(name: str) -> str:
            t = tables.get(name)
            return f" (in {t.origin})" if t else " (built in)"

        alias_owner: dict[str, str] = {}
        for name, profile in profiles.items():
            t = tables.get(name)
            origin = t.origin if t else None
            table = table_name("profiles", name)
            for alias in dict.fromkeys(profile.aliases):
                if alias == name:
                    continue
                if alias in profiles:
                    self.add(
                        origin,
                        table,
                        "aliases",
                        f"alias {alias!r} of profile {name!r} is already the name of "
                        f"profile {alias!r}{where(alias)}",
                        f"remove {alias!r} from the aliases of profile {name!r}, "
                        f"or rename profile {alias!r}",
                    )
                elif alias in alias_owner:
                    other = alias_owner[alias]
                    self.add(
                        origin,
                        table,
                        "aliases",
                        f"alias {alias!r} of profile {name!r} is also an alias of "
                        f"profile {other!r}{where(other)}",
                        f"keep {alias!r} in the aliases of only one of the profiles "
                        f"{other!r} and {name!r}",
                    )
                else:
                    alias_owner[alias] = name

    def knowledge_bases(
        self, tables: dict[str, Table], profile_refs: list[str]
    ) -> dict[str, KnowledgeBaseEntry]:
        kinds = self.registry.knowledge_base_kinds
        out: dict[str, KnowledgeBaseEntry] = {}
        for ident, t in tables.items():
            self.check_id("knowledge_bases", ident, t.origin)
            if not self.check_is_table("knowledge_bases", ident, t):
                continue
            raw: dict[str, Any] = t.raw
            table = table_name("knowledge_bases", ident)
            skip = set(self.check_secrets(raw, t.origin, table))

            kind = raw.get("kind")
            if "kind" not in raw:
                known = sorted({*kinds, *KNOWN_KIND_PACKAGES})
                self.add(
                    t.origin,
                    table,
                    "kind",
                    "missing `kind`: every knowledge base needs one",
                    f'add e.g. kind = "sqlite-fts" (kinds: {", ".join(known)})',
                )
                kind = None
            elif not isinstance(kind, str) or not kind:
                self.add(
                    t.origin, table, "kind", "must be a non-empty string", _FIELD_FIXES["kind"]
                )
                kind = None
            if kind is None:
                skip.add("kind")

            spec = kinds.get(kind) if kind is not None else None
            provider = kinds.provider(kind) if kind is not None else None
            if spec is not None:
                config = self.validate(
                    spec.config_model,
                    raw,
                    t.origin,
                    table,
                    skip=skip,
                    plugin=provider,
                    kind=kind,
                )
                if config is not None and not isinstance(config, KnowledgeBaseConfig):
                    self.add(
                        t.origin,
                        table,
                        None,
                        f"the config schema of kind {kind!r} from plugin {provider!r} is not "
                        "a kairox.config.schema.KnowledgeBaseConfig subclass (a bug in the plugin)",
                        f"report it to the authors of plugin {provider!r}",
                    )
                    config = None
            else:
                common = {k: v for k, v in raw.items() if k in _COMMON_KB_KEYS}
                if kind is None:
                    common["kind"] = ""
                config = self.validate(KnowledgeBaseConfig, common, t.origin, table, skip=skip)

            if isinstance(config, KnowledgeBaseConfig) and config.profile_aliases:
                for i, ref in enumerate(config.profile_aliases):
                    if ref in profile_refs:
                        continue
                    self.add(
                        t.origin,
                        table,
                        f"profile_aliases[{i}]",
                        _suggest(f"no profile or alias named {ref!r}", ref, profile_refs),
                        f"use one of: {', '.join(profile_refs)}; or define [profiles.{ref}]",
                    )

            if kind is None or not isinstance(config, KnowledgeBaseConfig):
                continue
            reason = None if spec is not None else _unavailable_reason(kind, kinds)
            out[ident] = KnowledgeBaseEntry(
                id=ident,
                kind=kind,
                config=config,
                raw=raw,
                origin=t.origin,
                provider=provider,
                available=spec is not None,
                unavailable_reason=reason,
            )
        return out

    def memory(self, t: Table | None) -> MemoryConfig:
        if t is None or not self.check_is_table("memory", None, t):
            return MemoryConfig()
        skip = self.check_secrets(t.raw, t.origin, "memory")
        found = self.validate(MemoryConfig, t.raw, t.origin, "memory", skip=skip)
        return found if isinstance(found, MemoryConfig) else MemoryConfig()

    def recall(self, t: Table | None) -> RecallConfig:
        if t is None or not self.check_is_table("recall", None, t):
            return RecallConfig()
        found = self.validate(RecallConfig, t.raw, t.origin, "recall")
        return found if isinstance(found, RecallConfig) else RecallConfig()

    def workspace(self, t: Table | None) -> WorkspaceConfig:
        if t is None:
            return WorkspaceConfig()
        if not self.check_is_table("workspace", None, t):
            return WorkspaceConfig()
        skip = self.check_secrets(t.raw, t.origin, "workspace")
        ws = self.validate(WorkspaceConfig, t.raw, t.origin, "workspace", skip=skip)
        if not isinstance(ws, WorkspaceConfig):
            return WorkspaceConfig()
        backends = self.registry.embedding_backends
        # With nothing registered (a bare registry) names are not checked at all.
        named: list[tuple[str, str, Any, str]] = []
        if "embedding_backend" in t.raw and len(backends):
            named.append(("embedding_backend", ws.embedding_backend, backends, "embedding backend"))
        retrievers = self.registry.workspace_retrievers
        if len(retrievers):
            named += [
                (f"disabled_retrievers[{i}]", name, retrievers, "workspace retriever")
                for i, name in enumerate(ws.disabled_retrievers)
            ]
        for key, name, specs, what in named:
            if name not in specs:
                package = (
                    KNOWN_EMBEDDING_PACKAGES.get(name) if what == "embedding backend" else None
                )
                if package is not None:
                    self.add(
                        t.origin,
                        "workspace",
                        key,
                        f"{name} is provided by {package}, which is not installed",
                        f"kairox install {package}",
                    )
                    continue
                problem = f"no installed plugin provides the {what} {name!r}"
                self.not_installed(t.origin, "workspace", key, problem, name, specs)
        return ws

    def not_installed(
        self,
        origin: Path,
        table: str,
        key: str,
        problem: str,
        name: str,
        known: Iterable[str],
    ) -> None:
        """Report a plugin name no installed plugin provides, with the ones that are."""
        installed = ", ".join(sorted(known)) or "none"
        self.add(
            origin,
            table,
            key,
            _suggest(problem, name, known),
            f"use one of: {installed}; or install the plugin that provides it",
        )


def load_config(
    *,
    cwd: Path | None = None,
    config_path: Path | None = None,
    registry: Registry,
) -> KairoxConfig:
    """Load, layer and validate the user and workspace config files.

    :param cwd: where to start looking for ``kairox.toml`` (default: the current folder).
    :param config_path: an explicit workspace file (``--config``); it must exist.
    :param registry: the plugin registry (``get_plugin_manager().registry``; the facade
        passes its own). Configuration sits below the plugin host, so it never finds one.
    :raises ConfigError: listing every problem found, in all files.
    """
    here = Path(os.path.abspath(cwd if cwd is not None else Path.cwd()))
    loader = _Loader(registry)

    workspace_file: Path | None
    if config_path is not None:
        workspace_file = Path(os.path.abspath(here / Path(config_path).expanduser()))
    else:
        workspace_file = find_workspace_config(here)

    user_file = user_config_path()
    candidates: list[Path] = []
    if user_file.is_file() and (workspace_file is None or not same_file(user_file, workspace_file)):
        candidates.append(user_file)
    if workspace_file is not None:
        if config_path is not None and not workspace_file.exists():
            loader.add(
                workspace_file,
                None,
                None,
                "config file not found",
                "check the path given with --config",
            )
        else:
            candidates.append(workspace_file)

    docs: list[tuple[Path, dict[str, Any]]] = []
    for path in candidates:
        doc = loader.read(path)
        if doc is not None:
            docs.append((path, doc))

    profile_tables, kb_tables, singles = loader.layer(docs)
    profiles = loader.profiles(profile_tables)
    if DEFAULT_PROFILE not in profile_tables:
        profiles = {DEFAULT_PROFILE: ProfileConfig(), **profiles}
    loader.alias_collisions(profiles, profile_tables)
    knowledge_bases = loader.knowledge_bases(kb_tables, _profile_refs(profile_tables))
    workspace = loader.workspace(singles.get("workspace"))
    memory = loader.memory(singles.get("memory"))
    recall = loader.recall(singles.get("recall"))

    if loader.problems:
        raise ConfigError(loader.problems)
    # Every variable a *_env key names (defaults too) holds a secret to keep out of errors;
    # a profile's backend keys were registered as they were validated, and the defaults of
    # its backend's schema count too (the built-in default profile has no table at all).
    for entry in knowledge_bases.values():
        register_env_keys(entry.config.model_dump())
    for profile in profiles.values():
        spec = registry.model_backends.get(profile.backend)
        if spec is not None and spec.config_model is not None:
            fields = spec.config_model.model_fields
            register_env_keys({key: field.default for key, field in fields.items()})
    return KairoxConfig(
        profiles=profiles,
        knowledge_bases=knowledge_bases,
        workspace=workspace,
        memory=memory,
        recall=recall,
        files=[path for path, _ in docs],
        workspace_file=workspace_file,
        root=workspace_file.parent if workspace_file is not None else here,
    )


def _profile_refs(tables: dict[str, Table]) -> list[str]:
    """Every profile name and alias, read leniently from the raw tables (plus default).

    Read from the raw tables so that one broken profile does not also make every
    ``profile_aliases`` that names it look wrong.
    """
    refs: list[str] = []
    if DEFAULT_PROFILE not in tables:
        refs.append(DEFAULT_PROFILE)
    for name, t in tables.items():
        refs.append(name)
        aliases = t.raw.get("aliases") if isinstance(t.raw, dict) else None
        if isinstance(aliases, list):
            refs.extend(a for a in aliases if isinstance(a, str))
    return list(dict.fromkeys(refs))


def _unavailable_reason(kind: str, kinds: Any) -> str:
    package = KNOWN_KIND_PACKAGES.get(kind)
    if package == "kairox":
        return (
            f"kind {kind!r} is built into kairox, but its plugin is not loaded. "
            "Fix: check `kairox plugins` and the KAIROX_LOAD_PLUGINS setting"
        )
    if package is not None:
        return (
            f"kind {kind!r} is provided by the plugin package {package}, which is not "
            f"installed. Fix: kairox install {package}"
        )
    known = sorted({*kinds, *KNOWN_KIND_PACKAGES})
    reason = _suggest(f"no installed plugin provides kind {kind!r}", kind, known)
    return reason + " Fix: install the plugin that provides it, or correct `kind`"
