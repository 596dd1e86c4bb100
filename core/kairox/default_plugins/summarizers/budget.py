"""Budget fitting shared by all three summarisers: cutting text to ``max_tokens`` tokens."""

from __future__ import annotations

import re
from collections.abc import Sequence

from kairox.context.tokens import count_tokens, get_encoding
from kairox.default_plugins.summarizers.common import CARRIED_SUMMARY
from kairox.default_plugins.summarizers.kept_facts import KEPT_SHARE, Ledger, build_ledger
from kairox.support.models import ChatMessage

# Places where cutting a text leaves whole sentences: after . ! ? (plus closing quotes or
# brackets) followed by whitespace.
_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s)")


def _longest_fitting_cut(
    text: str, cuts: Sequence[int], max_tokens: int, encoding: str
) -> int | None:
    """The largest position in ``cuts`` (ascending) whose prefix fits, or ``None``.

    Binary search keeps this at O(log n) token counts. Token counts of prefixes are not
    strictly monotonic in their length, so the answer is re-checked by the caller's own
    count rather than trusted.
    """
    low, high, best = 0, len(cuts) - 1, None
    while low <= high:
        mid = (low + high) // 2
        if count_tokens(text[: cuts[mid]].rstrip(), encoding) <= max_tokens:
            best = cuts[mid]
            low = mid + 1
        else:
            high = mid - 1
    return best


def fit_to_budget(text: str, max_tokens: int, encoding: str) -> str:
    """``text`` if it fits in ``max_tokens``, else its longest prefix that does.

    The cut prefers the end of a line or sentence, then a word boundary, and only then any
    character, so a truncated summary ends on a whole line or sentence whenever that keeps
    any text.
    The result is guaranteed to count at most ``max_tokens`` tokens (``""`` when the budget
    is zero or negative).
    """
    if max_tokens <= 0 or not text:
        return ""
    if count_tokens(text, encoding) <= max_tokens:
        return text
    lines = {m.start() for m in re.finditer(r"\n", text)}
    sentences = sorted(lines | {m.end() for m in _SENTENCE_END.finditer(text)})
    words = [m.start() for m in re.finditer(r"\s", text)]
    for cuts in (sentences, words, range(1, len(text))):
        cut = _longest_fitting_cut(text, cuts, max_tokens, encoding)
        if cut is not None:
            candidate = text[:cut].rstrip()
            # Only a non-empty prefix counts: a boundary at position 0 keeps nothing, and a
            # finer-grained cut may still keep something.
            if candidate and count_tokens(candidate, encoding) <= max_tokens:
                return candidate
    return ""


def _check_budget(max_tokens: int) -> None:
    # bool is an int; a True budget is a caller bug worth naming, not one token.
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise TypeError(f"max_tokens must be an int, got {max_tokens!r}")


def kept_facts_first(
    messages: Sequence[ChatMessage], max_tokens: int, encoding: str
) -> tuple[Ledger, str, int] | None:
    """What every summary starts with: the kept facts (their share of ``max_tokens``),
    rendered, and the tokens left for the rest. ``None`` when there is nothing to say.

    Checks the budget and the encoding first, so a bad one fails before any work.
    """
    _check_budget(max_tokens)
    get_encoding(encoding)
    if max_tokens <= 0 or not any(m.content.strip() for m in messages):
        return None
    ledger = build_ledger(
        messages,
        max_tokens=int(max_tokens * KEPT_SHARE),
        encoding=encoding,
        carried_name=CARRIED_SUMMARY,
    )
    head = ledger.render()
    room = max_tokens - (count_tokens(head + "\n\n", encoding) if head else 0)
    return ledger, head, room
