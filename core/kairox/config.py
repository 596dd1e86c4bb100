"""Loading and validating Kairox configuration (TOML).

Two files are read, in this order:

1. the user file, ``$XDG_CONFIG_HOME/kairox/config.toml`` (``~/.config/kairox/config.toml``
   when ``XDG_CONFIG_HOME`` is unset), if it exists;
2. the workspace file: the path given with ``--config`` (a missing explicit file is an
   error), else the first ``kairox.toml`` found walking up from the current folder.

Layering is by *table*, not by key. A ``[profiles.<name>]`` or ``[knowledge_bases.<id>]``
table in the workspace file replaces the user file's table of the same name *whole*;
keys are never merged across files. ``[workspace]`` is replaced whole in the same way.
So every table comes from exactly one file, and every error names that file. Tables that
only one file defines are simply kept. A built-in ``default`` profile (all defaults)
always exists unless a file defines ``[profiles.default]``.

Validation collects every problem across both files before raising a single
:class:`ConfigError`, so a user sees everything at once; :func:`load_config` either
returns a complete :class:`KairoxConfig` or raises -- nothing half-loads. Each
:class:`ConfigProblem` names the file, the table, the key, the problem and the fix,
with a did-you-mean for typos.

Secrets are only stored by reference: a key named like a secret (``api_key``, ``token``,
``password``...) must not hold a value; use ``api_key_env = "NAME"`` instead.

A knowledge base whose ``kind`` no installed plugin provides is *not* a load error (so
``kairox config check`` can still show it): its entry is marked unavailable, with a
reason naming the package to install.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from difflib import get_close_matches
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from kairox.paths import WORKSPACE_CONFIG_NAME
from kairox.secrets import register_env_keys

if TYPE_CHECKING:
    from kairox.registry import Registry

__all__ = [
    "ALLOWED_TOP_LEVEL",
    "KNOWN_KIND_PACKAGES",
    "SECRET_KEY_SUFFIXES",
    "USER_CONFIG_NAME",
    "WORKSPACE_CONFIG_NAME",
    "ConfigError",
    "ConfigProblem",
    "KairoxConfig",
    "KnowledgeBaseConfig",
    "KnowledgeBaseEntry",
    "MemoryConfig",
    "PluginSettings",
    "ProfileConfig",
    "WorkspaceConfig",
    "find_workspace_config",
    "load_config",
    "user_config_path",
]

USER_CONFIG_NAME = "config.toml"
ALLOWED_TOP_LEVEL: tuple[str, ...] = ("profiles", "knowledge_bases", "workspace", "memory")
DEFAULT_PROFILE = "default"

#: First-party knowledge-base kinds and the package that provides each.
KNOWN_KIND_PACKAGES: dict[str, str] = {
    "sqlite-fts": "kairox",
    "tantivy": "kairox-tantivy",
    "bedrock": "kairox-bedrock",
    "pinecone": "kairox-pinecone",
    "weaviate": "kairox-weaviate",
}

#: A key whose (lower-cased) name ends in one of these, but not in ``_env``, is a secret.
SECRET_KEY_SUFFIXES: tuple[str, ...] = (
    "api_key",
    "secret",
    "password",
    "token",
    "access_key",
    "secret_access_key",
)

_ID_RE = re.compile(r"[A-Za-z0-9_.-]+")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: ``scheme://user:password@host``: credentials before the host of a URL.
_URL_CREDENTIALS_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s]*@")


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with the configuration, and how to fix it.

    :param file: the file the problem is in (``None`` when not tied to a file).
    :param table: the dotted table name, e.g. ``"knowledge_bases.papers"``.
    :param key: the key inside the table, e.g. ``"profile_aliases"``.
    :param problem: what is wrong.
    :param fix: what to do about it.
    """

    file: Path | None
    table: str | None
    key: str | None
    problem: str
    fix: str

    def __str__(self) -> str:
        parts: list[str] = []
        if self.file is not None:
            parts.append(f"{self.file}:")
        if self.table is not None:
            parts.append(f"[{self.table}]")
        if self.key is not None:
            parts.append(f"{self.key}:")
        parts.append(self.problem)
        text = " ".join(parts)
        if self.fix:
            if not text.endswith((".", "?", "!")):
                text += "."
            text += f" Fix: {self.fix}"
        return text


class ConfigError(Exception):
    """The configuration is invalid; ``problems`` lists everything that is wrong."""

    def __init__(self, problems: Iterable[ConfigProblem]) -> None:
        self.problems: list[ConfigProblem] = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.problems,))


# ---------------------------------------------------------------------------
# Schemas
# ---------------------------------------------------------------------------


class ProfileConfig(BaseModel):
    """A model profile: ``[profiles.<name>]``, the keys every profile shares.

    The other keys of the table belong to the profile's model backend or summariser and
    are validated by that plugin's ``config_model`` (a :class:`PluginSettings`); they
    are kept, as written, in :attr:`plugin_keys`.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    model: StrictStr = "gpt-4o"
    encoding: Literal["o200k_base", "cl100k_base"] = "o200k_base"
    context_window: StrictInt = Field(default=128000, gt=0)
    headroom: StrictInt = Field(default=4096, ge=0)
    aliases: list[StrictStr] = Field(default_factory=list)
    backend: StrictStr = "openai-compatible"
    summarizer: StrictStr = "extractive"
    auto_compact: StrictBool = True
    system_prompt: StrictStr = "You are a helpful assistant."
    _plugin_keys: dict[str, Any] = PrivateAttr(default_factory=dict)

    @property
    def plugin_keys(self) -> dict[str, Any]:
        """The table's keys for its backend and summariser (``base_url``...), as written."""
        return dict(self._plugin_keys)

    def with_plugin_keys(self, keys: Mapping[str, Any]) -> ProfileConfig:
        """A copy whose backend and summariser keys are ``keys``."""
        copy = self.model_copy()
        copy._plugin_keys = dict(keys)
        return copy

    @field_validator("headroom")
    @classmethod
    def _headroom_below_window(cls, value: int, info: ValidationInfo) -> int:
        window = info.data.get("context_window")
        if isinstance(window, int) and value >= window:
            raise ValueError(f"headroom ({value}) must be smaller than context_window ({window})")
        return value


class PluginSettings(BaseModel):
    """Base of a model backend's or summariser's ``config_model``: its keys in a profile.

    Subclass it with the plugin's own keys (defaults included) and register it as the
    spec's ``config_model``; ``kairox config check`` then reports a wrong key or value in
    ``[profiles.<name>]`` with the file, table, key and fix, like any built-in key.
    Float keys must be finite (``inf`` and ``nan`` are refused).
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class KnowledgeBaseConfig(BaseModel):
    """The keys every ``[knowledge_bases.<id>]`` table shares.

    Plugins subclass this to add their kind-specific keys; the subclass is the
    ``config_model`` of the :class:`~kairox.registry.KnowledgeBaseKind` they register.
    Every float key of a subclass must be finite too (``inf`` and ``nan`` are refused).
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    kind: StrictStr
    enabled: StrictBool = True
    profile_aliases: list[StrictStr] | None = None
    timeout_ms: StrictInt = Field(default=800, gt=0, le=600000)
    weight: float = Field(default=1.0, ge=0)


class WorkspaceConfig(BaseModel):
    """Workspace-wide settings: ``[workspace]``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    embedding_backend: StrictStr = "hashing"
    disabled_retrievers: list[StrictStr] = Field(default_factory=list)
    chunk_tokens: StrictInt = Field(default=256, ge=16, le=8192)
    chunk_overlap: StrictInt = Field(default=32, ge=0)
    max_file_bytes: StrictInt = Field(default=2_000_000, gt=0)
    timeout_ms: StrictInt = Field(default=2000, gt=0, le=600000)
    # kairox.retrieval.vectors.SENTENCE_WEIGHT (not imported: config stays free of numpy)
    sentence_weight: float = Field(default=0.5, ge=0, le=1)
    # Keep a memory-mappable copy of the vectors next to the database (fast cold search,
    # about the vectors' size again on disk); kairox.workspace.vector_pack.
    vector_pack: StrictBool = True

    @field_validator("chunk_overlap")
    @classmethod
    def _overlap_below_chunk(cls, value: int, info: ValidationInfo) -> int:
        size = info.data.get("chunk_tokens")
        if isinstance(size, int) and value >= size:
            raise ValueError(f"chunk_overlap ({value}) must be smaller than chunk_tokens ({size})")
        return value


class MemoryConfig(BaseModel):
    """How proposed memories are handled: ``[memory]``."""

    model_config = ConfigDict(extra="forbid")

    max_proposals_per_turn: StrictInt = Field(default=5, ge=0, le=100)
    # A session memory proposed in a turn whose prompt held tool output or retrieved
    # text waits for approval instead of being accepted at once.
    hold_tainted_session: StrictBool = True


_COMMON_KB_KEYS: frozenset[str] = frozenset(KnowledgeBaseConfig.model_fields)
_PROFILE_KEYS: tuple[str, ...] = tuple(ProfileConfig.model_fields)

# What each built-in key expects, used as the fix for a type or range error.
_FIELD_FIXES: dict[str, str] = {
    "model": 'use the model name in quotes, e.g. model = "gpt-4o"',
    "encoding": 'use one of "o200k_base", "cl100k_base"',
    "context_window": "use a whole number of tokens greater than 0, e.g. context_window = 128000",
    "headroom": (
        "use a whole number of tokens from 0 up to (not including) context_window, "
        "e.g. headroom = 4096"
    ),
    "aliases": 'use a list of names in quotes, e.g. aliases = ["smart"]',
    "backend": 'use a model backend name, e.g. backend = "openai-compatible" or "scripted"',
    "base_url": 'use the API root, e.g. base_url = "http://127.0.0.1:11434/v1" for Ollama',
    "summarizer": 'use a summarizer name, e.g. summarizer = "extractive"',
    "auto_compact": "use true or false (no quotes)",
    "kind": 'use the kind name in quotes, e.g. kind = "sqlite-fts"',
    "enabled": "use true or false (no quotes)",
    "profile_aliases": (
        'use a list of profile names or aliases, e.g. profile_aliases = ["default"], '
        "or leave the key out so every profile sees this knowledge base"
    ),
    "timeout_ms": ("use a whole number of milliseconds from 1 to 600000, e.g. timeout_ms = 800"),
    "weight": "use a number >= 0, e.g. weight = 1.0",
    "embedding_backend": 'use a backend name in quotes, e.g. embedding_backend = "hashing"',
    "disabled_retrievers": 'use a list of retriever names, e.g. disabled_retrievers = ["git"]',
    "chunk_tokens": "use a whole number of tokens from 16 to 8192, e.g. chunk_tokens = 256",
    "chunk_overlap": "use a whole number of tokens below chunk_tokens, e.g. chunk_overlap = 32",
    "max_file_bytes": "use a whole number of bytes, e.g. max_file_bytes = 2000000",
    "sentence_weight": (
        "use a number from 0 (whole chunks only) to 1 (best sentence only), "
        "e.g. sentence_weight = 0.5"
    ),
    "vector_pack": "use true or false (no quotes), e.g. vector_pack = false",
    "max_proposals_per_turn": "use a whole number from 0 to 100, e.g. max_proposals_per_turn = 5",
    "hold_tainted_session": "use true or false (no quotes), e.g. hold_tainted_session = true",
}
_BUILTIN_MODELS: tuple[type[BaseModel], ...] = (
    ProfileConfig,
    PluginSettings,
    KnowledgeBaseConfig,
    WorkspaceConfig,
    MemoryConfig,
)


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
    """

    profiles: dict[str, ProfileConfig]
    knowledge_bases: dict[str, KnowledgeBaseEntry]
    workspace: WorkspaceConfig
    files: list[Path]
    workspace_file: Path | None
    root: Path
    memory: MemoryConfig = field(default_factory=lambda: MemoryConfig())

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
        problem = f"no profile or alias named {name_or_alias!r}"
        suggestion = _did_you_mean(name_or_alias, candidates)
        if suggestion:
            problem += f"; did you mean {suggestion!r}?"
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


# ---------------------------------------------------------------------------
# Finding files
# ---------------------------------------------------------------------------


def user_config_path() -> Path:
    """``$XDG_CONFIG_HOME/kairox/config.toml``, default ``~/.config/kairox/config.toml``."""
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".config"
    return base / "kairox" / USER_CONFIG_NAME


def find_workspace_config(start: Path) -> Path | None:
    """The first ``kairox.toml`` in ``start`` or one of its parents, up to ``/``.

    Anything by that name counts, so that a folder called ``kairox.toml`` is reported
    when it is read instead of being passed over for a file further up.
    """
    here = Path(os.path.abspath(start))
    if here.is_file():
        here = here.parent
    for folder in (here, *here.parents):
        candidate = folder / WORKSPACE_CONFIG_NAME
        if os.path.lexists(candidate):
            return candidate
    return None


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------


@dataclass
class _Table:
    """A table after layering: its raw content and the file it came from."""

    raw: Any
    origin: Path


@dataclass
class _Loader:
    registry: Registry
    problems: list[ConfigProblem] = field(default_factory=list)

    def add(
        self, file: Path | None, table: str | None, key: str | None, problem: str, fix: str
    ) -> None:
        self.problems.append(ConfigProblem(file, table, key, problem, fix))

    # -- files ------------------------------------------------------------

    def read(self, path: Path) -> dict[str, Any] | None:
        if path.is_dir():
            self.add(
                path,
                None,
                None,
                "is a folder, not a config file",
                f"rename or remove the folder, or put the settings in a file named "
                f"{WORKSPACE_CONFIG_NAME}",
            )
            return None
        try:
            text = path.read_bytes().decode("utf-8")
        except FileNotFoundError:
            self.add(path, None, None, "config file not found", "check the path, or create it")
            return None
        except UnicodeDecodeError as exc:
            self.add(path, None, None, f"not UTF-8 text ({exc.reason})", "save it as UTF-8")
            return None
        except OSError as exc:
            self.add(
                path,
                None,
                None,
                f"cannot read the file ({exc.strerror or exc})",
                "check that it is a readable file",
            )
            return None
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            self.add(
                path,
                None,
                None,
                f"invalid TOML: {exc}",
                "correct the syntax there (strings need quotes; tables look like "
                "[knowledge_bases.<id>])",
            )
            return None

    def layer(
        self,
        docs: list[tuple[Path, dict[str, Any]]],
    ) -> tuple[dict[str, _Table], dict[str, _Table], dict[str, _Table]]:
        profiles: dict[str, _Table] = {}
        kbs: dict[str, _Table] = {}
        singles: dict[str, _Table] = {}  # [workspace], [memory]: one table each
        for path, doc in docs:
            for top, value in doc.items():
                if top not in ALLOWED_TOP_LEVEL:
                    self._unknown_top_level(path, top)
                    continue
                if top in ("workspace", "memory"):
                    singles[top] = _Table(value, path)
                    continue
                if not isinstance(value, dict):
                    self.add(
                        path,
                        None,
                        top,
                        f"{top!r} must be a table of tables",
                        f"write each entry as its own table, e.g. [{top}.<name>]",
                    )
                    continue
                target = profiles if top == "profiles" else kbs
                for ident, table in value.items():
                    target[ident] = _Table(table, path)
        return profiles, kbs, singles

    def _unknown_top_level(self, path: Path, top: str) -> None:
        suggestion = _did_you_mean(top, ALLOWED_TOP_LEVEL)
        problem = f"unknown top-level table or key {top!r}"
        if suggestion:
            problem += f"; did you mean {suggestion!r}?"
            fix = f"rename it to {suggestion!r}"
        else:
            fix = (
                "remove it; the allowed tables are [profiles.<name>], "
                "[knowledge_bases.<id>], [workspace] and [memory]"
            )
        self.add(path, top, None, problem, fix)

    # -- per-table checks -------------------------------------------------

    def check_id(self, section: str, ident: str, origin: Path) -> None:
        if not _ID_RE.fullmatch(ident):
            what = "profile name" if section == "profiles" else "knowledge-base id"
            self.add(
                origin,
                _table_name(section, ident),
                None,
                f"invalid {what} {ident!r}: it must be non-empty and use only letters, "
                "digits, '_', '.' and '-'",
                f"rename the table, e.g. [{section}.{_sanitize_id(ident)}]",
            )

    def check_is_table(self, section: str, ident: str | None, t: _Table) -> bool:
        if isinstance(t.raw, dict):
            return True
        if ident is None:
            self.add(t.origin, None, section, f"{section!r} must be a table", f"use [{section}]")
        else:
            self.add(
                t.origin,
                section,
                ident,
                f"{ident!r} must be a table, not a {type(t.raw).__name__}",
                f"write it as a table: [{_table_name(section, ident)}]",
            )
        return False

    def check_secrets(self, raw: dict[str, Any], origin: Path, table: str) -> set[str]:
        """Report inline secrets and bad ``*_env`` names; return the flagged keys."""
        flagged: set[str] = set()
        for key, value, dotted in _walk_keys(raw):
            lower = key.lower()
            if lower.endswith("_env"):
                if not isinstance(value, str) or not _ENV_NAME_RE.fullmatch(value):
                    flagged.add(dotted)
                    example = key[: -len("_env")].upper() or "NAME"
                    self.add(
                        origin,
                        table,
                        dotted,
                        "must be the name of an environment variable (letters, digits "
                        "and '_', not starting with a digit), not its value",
                        f'name the variable that holds the value, e.g. {key} = "{example}"',
                    )
            elif lower.endswith(SECRET_KEY_SUFFIXES) and not isinstance(value, (dict, bool)):
                flagged.add(dotted)
                self.add(
                    origin,
                    table,
                    dotted,
                    "secrets are not stored in config files",
                    "set the secret in an environment variable and reference it: "
                    f'{key}_env = "NAME"',
                )
            elif isinstance(value, str) and _URL_CREDENTIALS_RE.match(value.strip()):
                flagged.add(dotted)
                self.add(
                    origin,
                    table,
                    dotted,
                    "the URL holds credentials (user:password@ before the host); secrets "
                    "are not stored in config files",
                    "remove them from the URL and give the secret through an environment "
                    'variable named by the table\'s *_env key, e.g. api_key_env = "NAME"',
                )
        return flagged

    def validate(
        self,
        model: type[BaseModel],
        data: dict[str, Any],
        origin: Path,
        table: str,
        *,
        skip: set[str] | frozenset[str] = frozenset(),
        plugin: str | None = None,
        kind: str | None = None,
    ) -> BaseModel | None:
        """Validate ``data`` with ``model``; report errors and return ``None`` on failure."""
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            for err in exc.errors(include_url=False):
                problem = _translate(err, model, origin, table, plugin=plugin, kind=kind)
                if problem is not None and problem.key not in skip:
                    self.problems.append(problem)
            return None
        except Exception as exc:
            who = f"plugin {plugin!r}" if plugin else "its plugin"
            self.add(
                origin,
                table,
                None,
                f"the config schema of kind {kind!r} from {who} failed with "
                f"{type(exc).__name__}: {exc} (a bug in the plugin, not in your file)",
                f"report it to the authors of {who}; until it is fixed, remove this table "
                "or stop loading the plugin with KAIROX_LOAD_PLUGINS",
            )
            return None

    # -- sections ---------------------------------------------------------

    def profiles(self, tables: dict[str, _Table]) -> dict[str, ProfileConfig]:
        out: dict[str, ProfileConfig] = {}
        for ident, t in tables.items():
            self.check_id("profiles", ident, t.origin)
            if not self.check_is_table("profiles", ident, t):
                continue
            table = _table_name("profiles", ident)
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
                            f'use e.g. "{_sanitize_id(alias)}"',
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
        """Validate the keys the profile's backend and summariser own; report the rest.

        While either of them is not installed, keys nobody claims are left alone: they
        may be that plugin's (its commands fail with an install hint when used).
        """
        owners = (
            (self.registry.model_backends, profile.backend, "model backend"),
            (self.registry.summarizers, profile.summarizer, "summarizer"),
        )
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
            fields = set(_model_keys(model))
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
            suggestion = _did_you_mean(key, known)
            problem = f"unknown key {key!r}"
            if suggestion:
                problem += f"; did you mean {suggestion!r}?"
            self.add(
                origin,
                table,
                key,
                problem,
                f"rename it to {suggestion!r}"
                if suggestion
                else f"remove it; the keys of this profile are: {', '.join(known)}",
            )

    def alias_collisions(
        self, profiles: dict[str, ProfileConfig], tables: dict[str, _Table]
    ) -> None:
        def where(name: str) -> str:
            t = tables.get(name)
            return f" (in {t.origin})" if t else " (built in)"

        alias_owner: dict[str, str] = {}
        for name, profile in profiles.items():
            t = tables.get(name)
            origin = t.origin if t else None
            table = _table_name("profiles", name)
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
        self, tables: dict[str, _Table], profile_refs: list[str]
    ) -> dict[str, KnowledgeBaseEntry]:
        kinds = self.registry.knowledge_base_kinds
        out: dict[str, KnowledgeBaseEntry] = {}
        for ident, t in tables.items():
            self.check_id("knowledge_bases", ident, t.origin)
            if not self.check_is_table("knowledge_bases", ident, t):
                continue
            raw: dict[str, Any] = t.raw
            table = _table_name("knowledge_bases", ident)
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
                        "a kairox.config.KnowledgeBaseConfig subclass (a bug in the plugin)",
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
                    problem = f"no profile or alias named {ref!r}"
                    suggestion = _did_you_mean(ref, profile_refs)
                    if suggestion:
                        problem += f"; did you mean {suggestion!r}?"
                    self.add(
                        t.origin,
                        table,
                        f"profile_aliases[{i}]",
                        problem,
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

    def memory(self, t: _Table | None) -> MemoryConfig:
        if t is None or not self.check_is_table("memory", None, t):
            return MemoryConfig()
        skip = self.check_secrets(t.raw, t.origin, "memory")
        found = self.validate(MemoryConfig, t.raw, t.origin, "memory", skip=skip)
        return found if isinstance(found, MemoryConfig) else MemoryConfig()

    def workspace(self, t: _Table | None) -> WorkspaceConfig:
        if t is None:
            return WorkspaceConfig()
        if not self.check_is_table("workspace", None, t):
            return WorkspaceConfig()
        skip = self.check_secrets(t.raw, t.origin, "workspace")
        ws = self.validate(WorkspaceConfig, t.raw, t.origin, "workspace", skip=skip)
        if not isinstance(ws, WorkspaceConfig):
            return WorkspaceConfig()
        backends = self.registry.embedding_backends
        if "embedding_backend" in t.raw and len(backends) and ws.embedding_backend not in backends:
            self._not_registered(
                t.origin,
                "embedding_backend",
                ws.embedding_backend,
                list(backends),
                "embedding backend",
            )
        retrievers = self.registry.workspace_retrievers
        if len(retrievers):
            for i, name in enumerate(ws.disabled_retrievers):
                if name not in retrievers:
                    self._not_registered(
                        t.origin,
                        f"disabled_retrievers[{i}]",
                        name,
                        list(retrievers),
                        "workspace retriever",
                    )
        return ws

    def _not_registered(
        self, origin: Path, key: str, name: str, known: list[str], what: str
    ) -> None:
        problem = f"no installed plugin provides the {what} {name!r}"
        suggestion = _did_you_mean(name, known)
        if suggestion:
            problem += f"; did you mean {suggestion!r}?"
        self.add(
            origin,
            "workspace",
            key,
            problem,
            f"use one of: {', '.join(sorted(known))}; or install the plugin that provides it",
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
    if user_file.is_file() and (
        workspace_file is None or not _same_file(user_file, workspace_file)
    ):
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
        files=[path for path, _ in docs],
        workspace_file=workspace_file,
        root=workspace_file.parent if workspace_file is not None else here,
    )


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def _did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    matches = get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def _table_name(section: str, ident: str) -> str:
    if _ID_RE.fullmatch(ident):
        return f"{section}.{ident}"
    escaped = ident.replace("\\", "\\\\").replace('"', '\\"')
    return f'{section}."{escaped}"'


def _sanitize_id(ident: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", ident).strip("-")
    return cleaned or "name"


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _walk_keys(raw: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any, str]]:
    """Yield ``(key, value, dotted_key)`` for every key, descending into sub-tables."""
    for key, value in raw.items():
        dotted = f"{prefix}{key}"
        yield key, value, dotted
        if isinstance(value, dict):
            yield from _walk_keys(value, f"{dotted}.")


def _profile_refs(tables: dict[str, _Table]) -> list[str]:
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
    reason = f"no installed plugin provides kind {kind!r}"
    suggestion = _did_you_mean(kind, sorted({*kinds, *KNOWN_KIND_PACKAGES}))
    if suggestion:
        reason += f"; did you mean {suggestion!r}?"
    return reason + " Fix: install the plugin that provides it, or correct `kind`"


def _render_loc(loc: tuple[int | str, ...]) -> str | None:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or None


def _translate(
    err: Mapping[str, Any],
    model: type[BaseModel],
    origin: Path,
    table: str,
    *,
    plugin: str | None,
    kind: str | None,
) -> ConfigProblem | None:
    """Turn one pydantic error into a :class:`ConfigProblem`."""
    loc: tuple[int | str, ...] = tuple(err.get("loc", ()))
    key = _render_loc(loc)
    etype: str = err.get("type", "")
    ctx: Mapping[str, Any] = err.get("ctx") or {}
    msg: str = str(err.get("msg", "invalid value"))
    name = loc[-1] if loc else None

    if etype == "extra_forbidden":
        fields = _model_keys(model) if len(loc) == 1 else []
        suggestion = _did_you_mean(str(name), fields) if fields else None
        if suggestion:
            problem = f"unknown key {name!r}; did you mean {suggestion!r}?"
            fix = f"rename it to {suggestion!r}"
        else:
            problem = f"unknown key {name!r}"
            fix = "remove it" + (
                f"; the allowed keys here are: {', '.join(fields)}" if fields else ""
            )
        return ConfigProblem(origin, table, key, problem, fix)

    if etype == "missing":
        return ConfigProblem(
            origin, table, key, "required key is missing", f"add {key} = ... to the table"
        )

    problem = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    field_name = loc[0] if loc and isinstance(loc[0], str) else None
    fix: str | None = None
    if field_name == "headroom" and etype == "value_error":
        fix = "make headroom smaller than context_window (it is reserved for the reply)"
    elif etype == "literal_error":
        fix = f"use one of: {ctx.get('expected', '')}"
    elif field_name in _FIELD_FIXES and _is_builtin_field(model, field_name):
        fix = _FIELD_FIXES[field_name]
    else:
        fix = _generic_fix(etype, ctx)
    if fix is None:
        doc = f"kind {kind!r}" if kind else "this table"
        fix = f"see the documentation of {doc}" + (f" (plugin {plugin!r})" if plugin else "")
    return ConfigProblem(origin, table, key, problem, fix)


def _model_keys(model: type[BaseModel]) -> list[str]:
    keys: list[str] = []
    for fname, info in model.model_fields.items():
        keys.append(info.alias or fname)
    return keys


def _is_builtin_field(model: type[BaseModel], field_name: str) -> bool:
    """True when ``field_name`` is declared by one of this module's schemas."""
    return any(
        issubclass(model, base) and field_name in base.model_fields for base in _BUILTIN_MODELS
    )


def _generic_fix(etype: str, ctx: Mapping[str, Any]) -> str | None:
    if etype.startswith("int_"):
        return "use a whole number (no quotes, no decimal point)"
    if etype.startswith("float_"):
        return "use a number (no quotes)"
    if etype == "finite_number":
        return "use a finite number (not inf or nan)"
    if etype.startswith("bool_"):
        return "use true or false (no quotes)"
    if etype.startswith("string_"):
        return "use a string in quotes"
    if etype.startswith("list_") or etype in {"tuple_type", "set_type"}:
        return 'use a list, e.g. ["a", "b"]'
    if etype in {"dict_type", "model_type", "model_attributes_type"}:
        return "use a table"
    bounds = {
        "greater_than": ("gt", "greater than"),
        "greater_than_equal": ("ge", "at least"),
        "less_than": ("lt", "less than"),
        "less_than_equal": ("le", "at most"),
    }
    if etype in bounds:
        ctx_key, words = bounds[etype]
        return f"use a value {words} {ctx.get(ctx_key)}"
    if etype == "enum":
        return f"use one of: {ctx.get('expected', '')}"
    return None
