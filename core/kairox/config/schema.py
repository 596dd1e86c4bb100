"""Kairox configuration (TOML): the schemas, and where the files are.

The schemas here are all a plugin needs (``KnowledgeBaseConfig``, ``PluginSettings``...);
reading and validating files is :mod:`kairox.config.loader` (``load_config``), with
:mod:`kairox.config.files`, :mod:`kairox.config.checks` and :mod:`kairox.config.problems`;
what it returns is :mod:`kairox.config.loaded`, what it raises :mod:`kairox.config.errors`.

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
from collections.abc import Mapping
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
    ValidationInfo,
    field_validator,
)

from kairox.memory.limits import DEFAULT_LIMITS, ProposalLimits
from kairox.support.paths import WORKSPACE_CONFIG_NAME
from kairox.workspace.convert.limits import DEFAULT_MAX_UNPACKED_BYTES
from kairox.workspace.file_roles import Role

if TYPE_CHECKING:
    pass

__all__ = [
    "ALLOWED_TOP_LEVEL",
    "KNOWN_KIND_PACKAGES",
    "SECRET_KEY_SUFFIXES",
    "USER_CONFIG_NAME",
    "WORKSPACE_CONFIG_NAME",
    "KnowledgeBaseConfig",
    "MemoryConfig",
    "PluginSettings",
    "ProfileConfig",
    "RecallConfig",
    "WorkspaceConfig",
    "find_workspace_config",
    "user_config_path",
]

USER_CONFIG_NAME = "config.toml"
ALLOWED_TOP_LEVEL: tuple[str, ...] = (
    "profiles",
    "knowledge_bases",
    "workspace",
    "memory",
    "recall",
)
DEFAULT_PROFILE = "default"

#: First-party knowledge-base kinds and the package that provides each.
KNOWN_KIND_PACKAGES: dict[str, str] = {
    "sqlite-fts": "kairox",
    "tantivy": "kairox-tantivy",
    "bedrock": "kairox-bedrock",
    "pinecone": "kairox-pinecone",
    "weaviate": "kairox-weaviate",
}

#: First-party embedding backends and the package that provides each (for the install hint).
KNOWN_EMBEDDING_PACKAGES: dict[str, str] = dict.fromkeys(
    ("minilm", "minilm-fp32", "minilm-int8", "minilm-int8-ort", "minilm-st"),
    "kairox-sentence-transformers",
)

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
#: ``scheme://user:password@host``: credentials before the host of a URL.
_URL_CREDENTIALS_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s]*@")


# ---------------------------------------------------------------------------
# Schemas
# ---------------------------------------------------------------------------


def _smaller_than(field: str, limit: str) -> Any:
    """A validator refusing a ``field`` value at or above the (earlier) ``limit`` field's."""

    def check(cls: type[BaseModel], value: int, info: ValidationInfo) -> int:
        bound = info.data.get(limit)
        if isinstance(bound, int) and value >= bound:
            raise ValueError(f"{field} ({value}) must be smaller than {limit} ({bound})")
        return value

    return field_validator(field)(classmethod(check))


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
    rerank: StrictStr | None = None
    rerank_depth: StrictInt = Field(default=30, ge=1, le=1000)
    rerank_timeout_ms: StrictInt = Field(default=2000, gt=0, le=600000)
    query_transform: StrictStr | None = None
    query_transform_timeout_ms: StrictInt = Field(default=3000, gt=0, le=600000)
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

    _headroom_below_window = _smaller_than("headroom", "context_window")


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
    ``config_model`` of the :class:`~kairox.plugin_host.registry.KnowledgeBaseKind` they register.
    Every float key of a subclass must be finite too (``inf`` and ``nan`` are refused).
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    kind: StrictStr
    enabled: StrictBool = True
    profile_aliases: list[StrictStr] | None = None
    timeout_ms: StrictInt = Field(default=800, gt=0, le=600000)
    weight: float = Field(default=1.0, ge=0)
    # Always ANDed into this knowledge base's queries (kairox.retrieval.filters): a
    # profile sees only its part of a shared index. JSON form as a table, or text form.
    filter: dict[str, Any] | StrictStr | None = None

    @field_validator("filter")
    @classmethod
    def _filter_parses(cls, value: Any) -> Any:
        from kairox.retrieval.filters import parse_filter

        if value is not None:
            parse_filter(value)  # FilterError is a ValueError: pydantic reports it
        return value

    # How `kairox kb ingest` cuts documents (kairox.runtime.ingest); kinds filled elsewhere ignore it.
    chunk: StrictBool = True
    chunk_tokens: StrictInt = Field(default=256, ge=16, le=8192)
    chunk_overlap: StrictInt = Field(default=32, ge=0)

    _kb_overlap_below_chunk = _smaller_than("chunk_overlap", "chunk_tokens")

    def own_paths(self) -> tuple[str, ...]:
        """The files and folders this knowledge base keeps its data in, as the table writes
        them (relative ones resolve from the config file's folder, ``~`` expanded): the
        workspace index never reads them as workspace files. Kinds that keep local files
        (``path``, ``index_dir``...) override this; remote kinds keep none."""
        return ()


class WorkspaceConfig(BaseModel):
    """Workspace-wide settings: ``[workspace]``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    embedding_backend: StrictStr = "hashing"
    disabled_retrievers: list[StrictStr] = Field(default_factory=list)
    chunk_tokens: StrictInt = Field(default=256, ge=16, le=8192)
    chunk_overlap: StrictInt = Field(default=32, ge=0)
    max_file_bytes: StrictInt = Field(default=2_000_000, gt=0)
    # What one Office file (a ZIP of XML parts) may unpack to: a ZIP bomb is skipped.
    max_unpacked_bytes: StrictInt = Field(default=DEFAULT_MAX_UNPACKED_BYTES, gt=0)
    timeout_ms: StrictInt = Field(default=2000, gt=0, le=600000)
    # Unset: the embedder's own (kairox.retrieval.vectors.default_sentence_weight: hashing
    # 0, i.e. no sentence vectors, others 0.5; not imported: config stays free of numpy).
    sentence_weight: float | None = Field(default=None, ge=0, le=1)
    # Store the vectors once, in a memory-mapped pack next to the database (fast cold
    # search); false keeps them as float32 rows of the database; kairox.workspace.index_packs.
    vector_pack: StrictBool = True
    # How the pack stores each vector (kairox.workspace.vector_pack.FORMATS): float16 is
    # half the bytes of float32 for rankings alike within its rounding (docs/vectors.md).
    vector_format: Literal["float32", "float16", "int8"] = "float16"
    # Embed and store the workspace's vectors at all. Unset: the embedder's own
    # ``workspace_vectors`` (hashing: false, words only: its vectors bought no measurable
    # quality for 10-20x the disk and 6-8x the indexing CPU; docs/vectors.md), else true.
    vectors: StrictBool | None = None
    # Cut code at function/class boundaries where a tree-sitter grammar is installed
    # (every one is, with kairox); false: whole-line windows for every file.
    syntax_chunks: StrictBool = True
    # The workspace vector source's convex-fusion weight against FTS; unset: the
    # embedder's own default (hashing 0.05, others 1.0; benchmarks/README.md).
    vector_weight: float | None = Field(default=None, ge=0)
    # How workspace hits are ranked as files (kairox.workspace.file_ranking): a weight per
    # file role over the built-in ones, what a role the query names counts at least and
    # how much its files whose path spells the query's other words gain (ASKED_ROLE_WEIGHT,
    # ASKED_PATH_BONUS there; not imported: config stays free of the ranking), how much
    # a file's further chunks add to its best, and the fixed candidate depth each source
    # is asked for and fused before the cut to k (so the top ranks never depend on k).
    role_weights: dict[StrictStr, float] = Field(default_factory=dict)
    asked_role_weight: float = Field(default=1.5, ge=0)
    asked_path_bonus: float = Field(default=1.0, ge=0)
    file_evidence: float = Field(default=0.2, ge=0)
    candidate_depth: StrictInt = Field(default=100, ge=1, le=1000)
    # gitignore-syntax patterns relative to the workspace root (kairox.workspace.selection).
    include: list[StrictStr] = Field(default_factory=list)
    exclude: list[StrictStr] = Field(default_factory=list)

    @field_validator("include", "exclude")
    @classmethod
    def _gitignore_patterns(cls, value: list[str]) -> list[str]:
        from pathspec import GitIgnoreSpec

        for pattern in value:
            try:
                GitIgnoreSpec.from_lines([pattern])
            except ValueError as exc:
                raise ValueError(f"{pattern!r} is not a gitignore pattern ({exc})") from None
        return value

    @field_validator("role_weights")
    @classmethod
    def _known_roles(cls, value: dict[str, float]) -> dict[str, float]:
        roles = [role.value for role in Role]
        for role, weight in value.items():
            if role not in roles:
                raise ValueError(f"{role!r} is not a file role; the roles are {', '.join(roles)}")
            if not weight >= 0:
                raise ValueError(f"the weight of {role!r} must be >= 0, got {weight!r}")
        return value

    _overlap_below_chunk = _smaller_than("chunk_overlap", "chunk_tokens")


class MemoryConfig(BaseModel):
    """How proposed memories are handled: ``[memory]``."""

    model_config = ConfigDict(extra="forbid")

    max_proposals_per_turn: StrictInt = Field(default=5, ge=0, le=100)
    # A session memory proposed in a turn whose prompt held tool output or retrieved
    # text waits for approval instead of being accepted at once.
    hold_tainted_session: StrictBool = True
    # The bounds of kairox.memory.limits: body size on every path, proposals from outside
    # a chat turn (MCP, the Python API) per session and per minute, pending per origin.
    max_body_chars: StrictInt = Field(default=DEFAULT_LIMITS.max_body_chars, ge=16, le=100_000)
    max_proposals_per_session: StrictInt = Field(
        default=DEFAULT_LIMITS.max_per_session, ge=0, le=100_000
    )
    max_proposals_per_minute: StrictInt = Field(
        default=DEFAULT_LIMITS.max_per_minute, ge=0, le=10_000
    )
    max_pending_per_origin: StrictInt = Field(
        default=DEFAULT_LIMITS.max_pending_per_origin, ge=0, le=10_000
    )

    def limits(self) -> ProposalLimits:
        """The bounds as :class:`~kairox.memory.limits.ProposalLimits`."""
        return ProposalLimits(
            max_body_chars=self.max_body_chars,
            max_per_session=self.max_proposals_per_session,
            max_per_minute=self.max_proposals_per_minute,
            max_pending_per_origin=self.max_pending_per_origin,
        )


class RecallConfig(BaseModel):
    """What each turn recalls of earlier conversation: ``[recall]``."""

    model_config = ConfigDict(extra="forbid")

    # Whose messages a session may recall: its own, every session of the workspace, none.
    sessions: Literal["own", "workspace", "none"] = "workspace"
    # The least share of the budget recall gets when history wants the room.
    share: float = Field(default=0.75, ge=0, le=1)
    # The most tokens recalled messages take in one prompt.
    max_tokens: StrictInt = Field(default=8000, ge=0)


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
    "rerank": 'use a reranker name, e.g. rerank = "mmr" (see `kairox plugins --all`)',
    "rerank_depth": "use a whole number from 1 to 1000, e.g. rerank_depth = 30",
    "rerank_timeout_ms": "use a whole number of milliseconds from 1 to 600000",
    "query_transform": 'use a query transform name, e.g. query_transform = "multi-query"',
    "query_transform_timeout_ms": "use a whole number of milliseconds from 1 to 600000",
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
    "max_unpacked_bytes": "use a whole number of bytes, e.g. max_unpacked_bytes = 67108864",
    "sentence_weight": (
        "use a number from 0 (whole chunks only) to 1 (best sentence only), "
        "e.g. sentence_weight = 0.5"
    ),
    "vector_pack": "use true or false (no quotes), e.g. vector_pack = false",
    "vectors": "use true or false (no quotes), e.g. vectors = true",
    "vector_weight": "use a number >= 0, e.g. vector_weight = 1.0 (0 leaves vector hits out)",
    "syntax_chunks": "use true or false (no quotes), e.g. syntax_chunks = false",
    "role_weights": (
        "use a table of file roles and weights >= 0, e.g. role_weights = "
        "{ test = 0.2, docs = 0.25 } (roles: implementation, test, docs, changelog, example, "
        "benchmark, config, generated, vendored)"
    ),
    "asked_role_weight": (
        "use a number >= 0, e.g. asked_role_weight = 1.5 (1: a role the query names "
        "counts as much as implementation)"
    ),
    "asked_path_bonus": (
        "use a number >= 0, e.g. asked_path_bonus = 1.0 (0: a file's path adds nothing)"
    ),
    "file_evidence": "use a number >= 0, e.g. file_evidence = 0.2 (0: a file's best chunk alone)",
    "candidate_depth": "use a whole number from 1 to 1000, e.g. candidate_depth = 100",
    "include": 'use a list of gitignore patterns, e.g. include = ["src/", "docs/*.md"]',
    "exclude": 'use a list of gitignore patterns, e.g. exclude = ["build/", "*.min.js"]',
    "max_proposals_per_turn": "use a whole number from 0 to 100, e.g. max_proposals_per_turn = 5",
    "hold_tainted_session": "use true or false (no quotes), e.g. hold_tainted_session = true",
    "max_body_chars": "use a whole number of characters from 16 to 100000, e.g. max_body_chars = 8000",
    "max_proposals_per_session": (
        "use a whole number from 0 to 100000, e.g. max_proposals_per_session = 100"
    ),
    "max_proposals_per_minute": "use a whole number from 0 to 10000, e.g. max_proposals_per_minute = 20",
    "max_pending_per_origin": "use a whole number from 0 to 10000, e.g. max_pending_per_origin = 20",
    "sessions": 'use one of "workspace" (every session), "own" (this session), "none"',
    "share": "use a number from 0 to 1, e.g. share = 0.75",
    "max_tokens": "use a whole number of tokens, 0 or more, e.g. max_tokens = 8000",
}
_BUILTIN_MODELS: tuple[type[BaseModel], ...] = (
    ProfileConfig,
    PluginSettings,
    KnowledgeBaseConfig,
    WorkspaceConfig,
    MemoryConfig,
    RecallConfig,
)


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
