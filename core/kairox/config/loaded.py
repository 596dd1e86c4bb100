"""The loaded configuration: :class:`KairoxConfig` (profiles, knowledge bases, the
workspace, memory and recall settings, from :func:`kairox.config.loader.load_config`)
and its :class:`KnowledgeBaseEntry` tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kairox.config.errors import ConfigError, ConfigProblem, _suggest
from kairox.config.schema import (
    KnowledgeBaseConfig,
    MemoryConfig,
    ProfileConfig,
    RecallConfig,
    WorkspaceConfig,
)

__all__ = ["KairoxConfig", "KnowledgeBaseEntry"]


# ---------------------------------------------------------------------------
# The loaded configuration
# ---------------------------------------------------------------------------


@dataclass
class KnowledgeBaseEntry:
    """One ``[knowledge_bases.<id>]`` table after loading.

    :param id: the table's id.
    :param kind: the value of ``kind``.
    :param config: the validated table: an instance of the kind's ``config_model`` when
        the kind is registered, else of :class:`KnowledgeBaseConfig` (common keys only;
        kind-specific keys then stay, unvalidated, in ``raw``).
    :param raw: the table as read from TOML.
    :param origin: the file that defined the table.
    :param provider: the plugin that registered the kind, or ``None``.
    :param available: whether a plugin provides the kind.
    :param unavailable_reason: why not, and the fix, when ``available`` is false.
    """

    id: str
    kind: str
    config: KnowledgeBaseConfig
    raw: dict[str, Any]
    origin: Path
    provider: str | None
    available: bool
    unavailable_reason: str | None = None

    def own_paths(self) -> tuple[Path, ...]:
        """The files and folders this knowledge base keeps its data in
        (:meth:`KnowledgeBaseConfig.own_paths`), absolute: ``~`` expanded, relative ones
        taken from the folder of the file that defined the table."""
        found = []
        for path in self.config.own_paths():
            if path.strip():
                where = Path(path).expanduser()
                found.append(where if where.is_absolute() else self.origin.parent / where)
        return tuple(found)


@dataclass
class KairoxConfig:
    """The complete, validated configuration.

    :param profiles: profile name -> profile (always includes ``default``).
    :param knowledge_bases: knowledge-base id -> entry, in file order.
    :param workspace: the ``[workspace]`` settings.
    :param files: the files actually loaded, user file first.
    :param workspace_file: the workspace file, if one was loaded.
    :param root: the folder of the workspace file, else the current folder.
    :param memory: the ``[memory]`` settings.
    :param recall: the ``[recall]`` settings.
    """

    profiles: dict[str, ProfileConfig]
    knowledge_bases: dict[str, KnowledgeBaseEntry]
    workspace: WorkspaceConfig
    files: list[Path]
    workspace_file: Path | None
    root: Path
    memory: MemoryConfig = field(default_factory=lambda: MemoryConfig())
    recall: RecallConfig = field(default_factory=lambda: RecallConfig())

    def resolve_profile(self, name_or_alias: str) -> tuple[str, ProfileConfig]:
        """The ``(name, profile)`` a profile name or alias refers to.

        A name wins over an alias. Raises :class:`ConfigError` (with a did-you-mean over
        all names and aliases) when nothing matches.
        """
        if name_or_alias in self.profiles:
            return name_or_alias, self.profiles[name_or_alias]
        for name, profile in self.profiles.items():
            if name_or_alias in profile.aliases:
                return name, profile
        candidates = self._profile_names_and_aliases()
        problem = _suggest(
            f"no profile or alias named {name_or_alias!r}", name_or_alias, candidates
        )
        raise ConfigError(
            [
                ConfigProblem(
                    file=None,
                    table="profiles",
                    key=None,
                    problem=problem,
                    fix=(
                        f"use one of: {', '.join(candidates)}; or define [profiles.{name_or_alias}]"
                    ),
                )
            ]
        )

    def visible_knowledge_bases(self, profile_name: str) -> list[KnowledgeBaseEntry]:
        """Enabled knowledge bases the profile (a name or an alias) can see.

        A knowledge base is visible when its ``profile_aliases`` is absent, or lists the
        profile's name or one of its aliases. Entries whose kind is unavailable are
        included (check ``available``); disabled entries are not.
        """
        name, profile = self.resolve_profile(profile_name)
        names = {name, *profile.aliases}
        return [
            entry
            for entry in self.knowledge_bases.values()
            if entry.config.enabled
            and (
                entry.config.profile_aliases is None
                or not names.isdisjoint(entry.config.profile_aliases)
            )
        ]

    def is_visible(self, kb_id: str, profile_name: str) -> bool:
        """Whether the profile sees knowledge base ``kb_id``; ``KeyError`` if no such id."""
        if kb_id not in self.knowledge_bases:
            raise KeyError(f"no knowledge base {kb_id!r} is configured")
        return any(e.id == kb_id for e in self.visible_knowledge_bases(profile_name))

    def _profile_names_and_aliases(self) -> list[str]:
        out: list[str] = []
        for name, profile in self.profiles.items():
            out.append(name)
            out.extend(a for a in profile.aliases if a not in out)
        return out
