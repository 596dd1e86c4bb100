"""Token-aware chunking: limits, coverage, overlap, boundaries, unicode, validation."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from kairox.context.tokens import get_encoding
from kairox.workspace import chunking
from kairox.workspace.chunking import Chunk, chunk_text, split_sentences


def independent_count(text: str, encoding: str = "o200k_base") -> int:
    return len(get_encoding(encoding).encode(text, disallowed_special=()))


def assert_well_formed(text: str, chunks: list[Chunk], max_tokens: int, encoding: str) -> None:
    """The invariants every chunking must satisfy."""
    covered = [False] * len(text)
    previous_start = -1
    for position, chunk in enumerate(chunks):
        assert chunk.index == position
        assert 0 <= chunk.start < chunk.end <= len(text)
        assert chunk.text == text[chunk.start : chunk.end]
        assert chunk.start > previous_start
        previous_start = chunk.start
        assert chunk.token_count == independent_count(chunk.text, encoding)
        assert chunk.token_count <= max_tokens
        assert not chunk.text.isspace()
        for i in range(chunk.start, chunk.end):
            covered[i] = True
    missed = "".join(ch for ch, seen in zip(text, covered, strict=True) if not seen)
    assert missed.strip() == "", f"characters outside every chunk: {missed!r}"


# Text with the troublesome parts well represented: multi-byte characters that tokens
# split, sentence and line boundaries, runs of whitespace, special-token look-alikes.
PIECES = st.sampled_from(
    [
        "word",
        " ",
        "  ",
        "\n",
        "\n\n",
        "\r\n",
        ". ",
        "! ",
        "?",
        "日本語",
        "。",
        "🎉",
        "👩‍👩‍👧",
        "é",
        "ﷺ",
        "\t",
        "<|endoftext|>",
        "x" * 40,
        "The quick brown fox jumps over the lazy dog.",
    ]
)
MIXED_TEXT = st.lists(PIECES, max_size=120).map("".join)
ANY_TEXT = st.one_of(st.text(max_size=400), MIXED_TEXT)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=ANY_TEXT,
    max_tokens=st.integers(min_value=4, max_value=40),
    overlap_ratio=st.floats(min_value=0.0, max_value=0.9),
    encoding=st.sampled_from(["o200k_base", "cl100k_base"]),
)
def test_chunks_cover_the_text_within_the_token_limit(
    text: str, max_tokens: int, overlap_ratio: float, encoding: str
) -> None:
    overlap = min(int(max_tokens * overlap_ratio), max_tokens - 1)
    chunks = chunk_text(text, max_tokens=max_tokens, overlap_tokens=overlap, encoding=encoding)
    assert_well_formed(text, chunks, max_tokens, encoding)
    if text.strip():
        assert chunks
    else:
        assert chunks == []


@settings(max_examples=100, deadline=None)
@given(
    text=MIXED_TEXT,
    max_tokens=st.integers(min_value=8, max_value=32),
    overlap=st.integers(min_value=1, max_value=7),
)
def test_consecutive_chunks_overlap(text: str, max_tokens: int, overlap: int) -> None:
    assume(not text.isspace())
    chunks = chunk_text(text, max_tokens=max_tokens, overlap_tokens=overlap)
    for before, after in itertools.pairwise(chunks):
        # Whitespace-only windows are dropped, so only neighbours that touch are checked.
        if after.start <= before.end:
            assert after.start < before.end


def test_long_text_chunks_overlap_by_about_the_overlap() -> None:
    text = " ".join(f"word{i}" for i in range(3000))
    chunks = chunk_text(text, max_tokens=64, overlap_tokens=16)
    assert len(chunks) > 10
    assert_well_formed(text, chunks, 64, "o200k_base")
    for before, after in itertools.pairwise(chunks):
        assert after.start < before.end
        shared = independent_count(text[after.start : before.end])
        assert 12 <= shared <= 20


def test_zero_overlap_chunks_tile_the_text() -> None:
    text = "alpha beta gamma delta. " * 200 + "end"
    chunks = chunk_text(text, max_tokens=50, overlap_tokens=0)
    assert chunks[0].start == 0
    assert chunks[-1].end == len(text)
    for before, after in itertools.pairwise(chunks):
        assert after.start == before.end


def test_short_text_is_one_chunk() -> None:
    assert chunk_text("hello world") == [Chunk(0, "hello world", 0, 11, 2)]


@pytest.mark.parametrize("text", ["", " ", "\n\n\t  \r\n"])
def test_empty_or_blank_text_gives_no_chunks(text: str) -> None:
    assert chunk_text(text) == []


def test_prefers_to_end_at_a_paragraph() -> None:
    first = "This is the first paragraph and it talks about apples. " * 3
    text = first.strip() + "\n\n" + "Second paragraph about pears and plums, quite long. " * 10
    boundary = text.index("\n\n") + 2
    tokens_to_boundary = independent_count(text[:boundary])
    # The paragraph ends inside the last fifth of the first window.
    max_tokens = int(tokens_to_boundary / 0.9)
    chunks = chunk_text(text, max_tokens=max_tokens, overlap_tokens=4)
    assert chunks[0].end == boundary
    assert chunks[0].text.endswith(".\n\n")


def test_prefers_to_end_at_a_sentence_over_mid_sentence() -> None:
    text = "Short sentence number one is here. " * 40
    chunks = chunk_text(text, max_tokens=30, overlap_tokens=5)
    for chunk in chunks[:-1]:
        assert chunk.text.endswith("."), chunk.text


def test_cjk_sentences_end_at_the_full_stop() -> None:
    text = "これは日本語の文章です。" * 60
    chunks = chunk_text(text, max_tokens=40, overlap_tokens=4)
    assert_well_formed(text, chunks, 40, "o200k_base")
    assert all(chunk.text.endswith("。") for chunk in chunks)


def test_without_boundaries_cuts_at_the_token_limit() -> None:
    text = "abcdefghij" * 200
    chunks = chunk_text(text, max_tokens=20, overlap_tokens=0)
    assert_well_formed(text, chunks, 20, "o200k_base")
    assert all(chunk.token_count >= 18 for chunk in chunks[:-1])


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_emoji_split_across_tokens_never_halved(encoding: str) -> None:
    # Each of these takes several byte-level tokens, so windows end inside characters.
    text = "🎉👩‍👩‍👧𝔘𝔫𝔦ﷺ" * 50
    for max_tokens in (4, 5, 7, 11):
        chunks = chunk_text(text, max_tokens=max_tokens, overlap_tokens=1, encoding=encoding)
        assert_well_formed(text, chunks, max_tokens, encoding)


def test_tiny_limit_below_one_characters_tokens_keeps_whole_characters() -> None:
    chunks = chunk_text("🎉🎉", max_tokens=1, overlap_tokens=0)
    assert [c.text for c in chunks] == ["🎉", "🎉"]
    assert all(c.token_count == independent_count("🎉") for c in chunks)


def test_special_token_text_is_ordinary_text() -> None:
    text = "before <|endoftext|> after " * 30
    chunks = chunk_text(text, max_tokens=16, overlap_tokens=2)
    assert_well_formed(text, chunks, 16, "o200k_base")


def test_lone_surrogates_keep_offsets_aligned() -> None:
    text = "start \ud800 middle \udfff end. " * 20
    chunks = chunk_text(text, max_tokens=10, overlap_tokens=2)
    for chunk in chunks:
        assert chunk.text == text[chunk.start : chunk.end]
        assert chunk.token_count <= 10
    assert chunks[-1].end == len(text)


def test_leading_whitespace_is_kept_and_blank_tail_dropped() -> None:
    text = "\n\n  indented start of the text. " * 5 + "\n" * 300
    chunks = chunk_text(text, max_tokens=16, overlap_tokens=0)
    assert chunks[0].start == 0
    assert not any(chunk.text.isspace() for chunk in chunks)
    assert chunks[-1].text.rstrip().endswith("text.")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_tokens": 0}, "max_tokens must be a positive integer"),
        ({"max_tokens": -5}, "max_tokens must be a positive integer"),
        ({"max_tokens": 2.5}, "max_tokens must be a positive integer"),
        ({"max_tokens": True}, "max_tokens must be a positive integer"),
        ({"max_tokens": 10, "overlap_tokens": 10}, "less than max_tokens"),
        ({"max_tokens": 10, "overlap_tokens": 11}, "less than max_tokens"),
        ({"overlap_tokens": -1}, "at least 0"),
        ({"overlap_tokens": 1.5}, "overlap_tokens must be an integer"),
        ({"encoding": "nope"}, "unknown tiktoken encoding"),
    ],
)
def test_invalid_arguments_are_clear_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        chunk_text("some text", **kwargs)
    with pytest.raises(ValueError, match=message):
        chunk_text("", **kwargs)  # validated even when there is nothing to chunk


def test_encodes_the_whole_text_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """One full encode; every other encode is of a single chunk's own text."""
    encoding = get_encoding("o200k_base")
    lengths: list[int] = []

    class Spy:
        def __getattr__(self, name: str) -> object:
            return getattr(encoding, name)

        def encode_ordinary(self, text: str) -> list[int]:
            lengths.append(len(text))
            return encoding.encode_ordinary(text)

    monkeypatch.setattr(chunking, "get_encoding", lambda name: Spy())
    text = "Some sentence that repeats. " * 2000
    chunks = chunk_text(text, max_tokens=64, overlap_tokens=8)
    assert lengths.count(len(text)) == 1
    assert len(lengths) <= 1 + 2 * len(chunks)  # rare re-trims aside, one encode per chunk


def test_large_text_is_chunked_completely() -> None:
    text = ("def function_%d(x):\n    return x * 2  # comment ünïcode 日本\n\n" * 20000) % tuple(
        range(20000)
    )
    chunks = chunk_text(text, max_tokens=256, overlap_tokens=32)
    assert chunks[0].start == 0 and chunks[-1].end == len(text)
    assert all(a.start < b.start for a, b in itertools.pairwise(chunks))


# -- split_sentences ------------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=ANY_TEXT,
    min_tokens=st.integers(min_value=0, max_value=12),
    max_tokens=st.integers(min_value=12, max_value=60),
)
# Trimming a cut part's leading space re-tokenizes it: " Kud" is one token, "Kud" two.
@example(text="0:0:0:0000:0:0 Kud0000:0000:;0:0000", min_tokens=0, max_tokens=12)
def test_sentences_cover_the_text_in_order_within_the_limit(
    text: str, min_tokens: int, max_tokens: int
) -> None:
    sentences = split_sentences(text, min_tokens=min_tokens, max_tokens=max_tokens)
    covered = [False] * len(text)
    previous_end = 0
    for position, sentence in enumerate(sentences):
        assert sentence.index == position
        assert sentence.text == text[sentence.start : sentence.end]
        assert sentence.text == sentence.text.strip() and sentence.text
        assert sentence.start >= previous_end  # in order, never overlapping
        previous_end = sentence.end
        assert sentence.token_count == independent_count(sentence.text)
        assert sentence.token_count <= max_tokens or len(sentence.text) == 1
        for i in range(sentence.start, sentence.end):
            covered[i] = True
    missed = "".join(ch for ch, seen in zip(text, covered, strict=True) if not seen)
    assert missed.strip() == "", f"characters outside every sentence: {missed!r}"


def test_sentences_end_at_punctuation_and_line_breaks() -> None:
    text = (
        "Vitamin D deficiency is common in northern latitudes. "
        "Supplementation did not reduce fracture risk (p = 0.4).\n"
        "A second cohort confirmed the null result in older adults!"
    )
    assert [s.text for s in split_sentences(text)] == [
        "Vitamin D deficiency is common in northern latitudes.",
        "Supplementation did not reduce fracture risk (p = 0.4).",
        "A second cohort confirmed the null result in older adults!",
    ]


def test_decimal_points_and_abbreviations_without_space_do_not_split() -> None:
    text = "Coverage was 24.7-fold (12.3-fold per strand) across the whole methylome."
    assert [s.text for s in split_sentences(text)] == [text]


def test_short_sentences_join_the_next_and_a_short_last_joins_the_previous() -> None:
    text = "Methods. We sequenced every sample twice at high depth. Done."
    sentences = split_sentences(text, min_tokens=4)
    assert [s.text for s in sentences] == [text]
    text = "Background. Mice lacking the receptor gained weight on a normal diet. Results differed."
    assert [s.text for s in split_sentences(text, min_tokens=3)] == [
        "Background. Mice lacking the receptor gained weight on a normal diet.",
        "Results differed.",
    ]


def test_a_sentence_over_the_limit_is_cut() -> None:
    text = " ".join(["word"] * 300) + "."
    sentences = split_sentences(text, max_tokens=64)
    assert len(sentences) > 1
    assert all(s.token_count <= 64 for s in sentences)
    assert "".join(s.text + " " for s in sentences).split() == text.split()


def test_cjk_text_splits_at_full_stops() -> None:
    text = "今日は晴れです。明日は雨が降るでしょう。"
    assert [s.text for s in split_sentences(text, min_tokens=1)] == [
        "今日は晴れです。",
        "明日は雨が降るでしょう。",
    ]


@pytest.mark.parametrize("text", ["", "   ", "\n\n"])
def test_blank_text_has_no_sentences(text: str) -> None:
    assert split_sentences(text) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_tokens": -1}, "min_tokens must be a non-negative integer"),
        ({"max_tokens": 0}, "max_tokens must be a positive integer"),
        ({"max_tokens": True}, "max_tokens must be a positive integer"),
        ({"min_tokens": 20, "max_tokens": 10}, "must not exceed max_tokens"),
    ],
)
def test_invalid_sentence_limits_are_clear_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        split_sentences("Some text.", **kwargs)
