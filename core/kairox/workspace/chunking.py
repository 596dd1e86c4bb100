"""Token-aware chunking with overlap, for the workspace RAG index.

The text is encoded once with the profile's tiktoken encoding; windows of ``max_tokens``
tokens are laid over the token sequence, each next window starting ``overlap_tokens`` before
the previous one ended, so a passage cut at a window edge is still whole in one chunk. A
window is ended early at a paragraph, line or sentence boundary when one lies in its last
fifth, so chunks rarely stop mid-sentence.

Chunks are reported with *character* offsets into the original string. Byte-level BPE
tokens can split a multi-byte UTF-8 character (CJK, emoji), so token boundaries are mapped
to characters by counting UTF-8 lead bytes, and a boundary inside a character is moved back
to the start of that character: a chunk never holds half a character.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise

from kairox.context.tokens import DEFAULT_ENCODING, get_encoding

__all__ = ["Chunk", "chunk_text", "split_sentences"]

# Bytes 0x80-0xBF continue a UTF-8 character; every other byte starts one.
_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))
# tiktoken replaces lone surrogates with U+FFFD before encoding; doing it ourselves first
# keeps the token stream and the string the same length in characters.
_SURROGATE = re.compile("[\ud800-\udfff]")
_SENTENCE_END = frozenset(".!?…")
_CJK_SENTENCE_END = frozenset("。！？")
_CLOSERS = "\"')]}»”’」』"
# Only the last fifth of a window is searched for a nicer boundary: cutting earlier would
# waste too much of the token budget.
_BOUNDARY_SEARCH_FRACTION = 5

# Boundary ranks, best first.
_PARAGRAPH, _LINE, _SENTENCE, _NONE = 3, 2, 1, 0


@dataclass(frozen=True)
class Chunk:
    """One window of a text: ``text == original[start:end]`` (character offsets).

    ``token_count`` is the number of tokens of ``text`` encoded on its own, which is what
    an embedder or a prompt will actually see.
    """

    index: int
    text: str
    start: int
    end: int
    token_count: int


def _token_char_offsets(token_bytes: list[bytes]) -> list[int]:
    """Character offset of every token boundary, snapped back to a character start.

    ``offsets[i]`` is where token ``i`` starts (``offsets[-1]`` is the text length). A
    token whose first byte continues a character started in an earlier token belongs to
    that character, so its offset is that character's start.
    """
    offsets: list[int] = []
    chars = 0
    for piece in token_bytes:
        starts_inside = bool(piece) and 0x80 <= piece[0] < 0xC0
        offsets.append(max(0, chars - starts_inside))
        # Characters started in this token = its bytes minus continuation bytes (C speed).
        chars += len(piece.translate(None, _CONTINUATION_BYTES))
    offsets.append(chars)
    return offsets


def _boundary_rank(text: str, pos: int) -> int:
    """How good a place ``pos`` is to end a chunk: paragraph > line > sentence > none."""
    if pos <= 0 or pos >= len(text):
        return _NONE
    before = text[pos - 1]
    if before == "\n":
        # A blank line (possibly holding spaces or \r) just before pos ends a paragraph.
        tail = text[max(0, pos - 16) : pos]
        run = tail[len(tail.rstrip()) :]
        return _PARAGRAPH if run.count("\n") >= 2 else _LINE
    if before in _CJK_SENTENCE_END:
        return _SENTENCE
    # "end." / "end?)" followed by whitespace; the space itself starts the next chunk.
    if text[pos].isspace():
        head = text[max(0, pos - 4) : pos].rstrip(_CLOSERS)
        if head and head[-1] in _SENTENCE_END:
            return _SENTENCE
    return _NONE


def _preferred_end(text: str, offsets: list[int], lo: int, hi: int) -> int:
    """The token index in ``[lo, hi]`` at the best boundary, latest on ties; else ``hi``."""
    best, best_rank = hi, _NONE
    for t in range(hi, lo - 1, -1):
        rank = _boundary_rank(text, offsets[t])
        if rank > best_rank:
            best, best_rank = t, rank
            if rank == _PARAGRAPH:
                break  # nothing ranks higher, and earlier ones would only be shorter
    return best


def chunk_text(
    text: str,
    *,
    max_tokens: int = 256,
    overlap_tokens: int = 32,
    encoding: str = DEFAULT_ENCODING,
) -> list[Chunk]:
    """Split ``text`` into overlapping chunks of at most ``max_tokens`` tokens.

    Consecutive chunks share about ``overlap_tokens`` tokens. Every character of ``text``
    is in at least one chunk, except whitespace-only stretches that would form a chunk of
    their own; empty or whitespace-only text gives ``[]``. A chunk never splits a
    character, so with ``max_tokens`` below 4 a character that alone needs more tokens
    (an emoji can take 4) becomes a chunk that exceeds the limit.

    Cost: one encode of the whole text plus one encode of each chunk (to report its exact
    ``token_count``), i.e. linear in the text length.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0:
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    if isinstance(overlap_tokens, bool) or not isinstance(overlap_tokens, int):
        raise ValueError(f"overlap_tokens must be an integer, got {overlap_tokens!r}")
    if not 0 <= overlap_tokens < max_tokens:
        raise ValueError(
            f"overlap_tokens must be at least 0 and less than max_tokens ({max_tokens}), "
            f"got {overlap_tokens}"
        )
    enc = get_encoding(encoding)
    if not text or text.isspace():
        return []

    work = _SURROGATE.sub("\ufffd", text)
    tokens = enc.encode_ordinary(work)
    offsets = _token_char_offsets(enc.decode_tokens_bytes(tokens))
    if offsets[-1] != len(work):  # would mean tiktoken changed the text behind our back
        raise RuntimeError("token offsets do not line up with the text; please report this")

    n = len(tokens)
    chunks: list[Chunk] = []
    start = 0
    while True:
        end = min(start + max_tokens, n)
        if end < n:
            lo = max(end - max(1, (end - start) // _BOUNDARY_SEARCH_FRACTION), start + 1)
            lo = max(lo, start + overlap_tokens + 1)  # the next window must still advance
            if lo <= end:
                end = _preferred_end(work, offsets, lo, end)
        char_start = offsets[start]
        # A window lying inside one character (tokens splitting an emoji) snaps to an empty
        # span; grow it to hold that whole character.
        while offsets[end] <= char_start:
            end += 1
        char_end = offsets[end]

        # Re-encoding the chunk alone can differ from its slice of the full encoding (a
        # start snapped back into a split character, a word cut mid-token). Trim until the
        # chunk's own count fits, so token_count is exact and never above max_tokens.
        count = len(enc.encode_ordinary(work[char_start:char_end]))
        while count > max_tokens:
            shorter = end - max(1, count - max_tokens)
            if shorter <= start or offsets[shorter] <= char_start:
                # Cannot trim without emptying the chunk: keep the first whole character.
                shorter = start + 1
                while offsets[shorter] <= char_start:
                    shorter += 1
                if shorter >= end:
                    break  # a single character over a tiny max_tokens (documented)
            end = shorter
            char_end = offsets[end]
            count = len(enc.encode_ordinary(work[char_start:char_end]))

        # Tokens starting at char_end (the rest of a character split by the window edge)
        # are not in this chunk: count the overlap back from the last token that is.
        while end - 1 > start and offsets[end - 1] >= char_end:
            end -= 1

        if not work[char_start:char_end].isspace():
            chunks.append(
                Chunk(len(chunks), text[char_start:char_end], char_start, char_end, count)
            )
        if end >= n:
            return chunks
        following = max(end - overlap_tokens, start + 1)
        # Tokens inside one split character share an offset: move on to a later character
        # so chunk starts strictly increase.
        while offsets[following] <= char_start:
            following += 1
        start = following


# Where a sentence may end: after sentence punctuation (and closing quotes or brackets)
# followed by whitespace, after a line break, or after CJK sentence punctuation. Each
# candidate is confirmed by _boundary_rank, the rule chunk_text uses.
_SENTENCE_CANDIDATE = re.compile(r"[.!?…][\"')\]}»”’」』]*(?=\s)|\n|[。！？]")


def split_sentences(
    text: str,
    *,
    min_tokens: int = 8,
    max_tokens: int = 128,
    encoding: str = DEFAULT_ENCODING,
) -> list[Chunk]:
    """Split ``text`` into sentences: the passages a sentence-aware dense index embeds.

    Sentences end where :func:`chunk_text` likes to end a chunk (sentence punctuation
    followed by whitespace, a line break, CJK sentence punctuation). Surrounding whitespace
    is left out of each sentence. A sentence of fewer than ``min_tokens`` tokens (a
    heading, "Methods.", one short line of code) is joined to the one after it, so every
    passage carries some meaning of its own; the last one joins the one before. A sentence
    over ``max_tokens`` is cut with :func:`chunk_text` (no overlap). Empty or
    whitespace-only text gives ``[]``.

    Offsets are characters into ``text``: ``text[c.start:c.end] == c.text``.
    """
    if isinstance(min_tokens, bool) or not isinstance(min_tokens, int) or min_tokens < 0:
        raise ValueError(f"min_tokens must be a non-negative integer, got {min_tokens!r}")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0:
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    if min_tokens > max_tokens:
        raise ValueError(f"min_tokens ({min_tokens}) must not exceed max_tokens ({max_tokens})")
    enc = get_encoding(encoding)

    def count(piece: str) -> int:
        return len(enc.encode_ordinary(_SURROGATE.sub("\ufffd", piece)))

    cuts = [0]
    for match in _SENTENCE_CANDIDATE.finditer(text):
        if _boundary_rank(text, match.end()) >= _SENTENCE:
            cuts.append(match.end())
    cuts.append(len(text))

    spans: list[tuple[int, int, int]] = []  # (start, end, tokens), whitespace trimmed
    for lo, hi in pairwise(cuts):
        piece = text[lo:hi]
        stripped = piece.strip()
        if not stripped:
            continue
        start = lo + (len(piece) - len(piece.lstrip()))
        end = start + len(stripped)
        tokens = count(stripped)
        if spans and spans[-1][2] < min_tokens:
            # The previous sentence is too short to stand alone: extend it over this one.
            prev_start = spans.pop()[0]
            start = prev_start
            tokens = count(text[start:end])
        spans.append((start, end, tokens))
    if len(spans) > 1 and spans[-1][2] < min_tokens:
        last_end = spans.pop()[1]
        prev_start = spans.pop()[0]
        spans.append((prev_start, last_end, count(text[prev_start:last_end])))

    sentences: list[Chunk] = []
    pending = list(reversed(spans))  # a stack, so cut parts keep their order
    while pending:
        start, end, tokens = pending.pop()
        if tokens <= max_tokens:
            sentences.append(Chunk(len(sentences), text[start:end], start, end, tokens))
            continue
        parts = chunk_text(
            text[start:end], max_tokens=max_tokens, overlap_tokens=0, encoding=encoding
        )
        if len(parts) == 1 and parts[0].end - parts[0].start == end - start:
            # Cannot be cut (one character over a tiny limit, as chunk_text documents).
            sentences.append(Chunk(len(sentences), text[start:end], start, end, tokens))
            continue
        trimmed = []
        for part in parts:
            # A cut can leave whitespace at a part's edge: trim it as for whole sentences.
            # Trimming can change how the part tokenizes (" Kud" is one token, "Kud" two),
            # so a trimmed part is checked against the limit again.
            lead = len(part.text) - len(part.text.lstrip())
            stripped = part.text.strip()
            part_start = start + part.start + lead
            trimmed.append((part_start, part_start + len(stripped), count(stripped)))
        pending.extend(reversed(trimmed))
    return sentences
