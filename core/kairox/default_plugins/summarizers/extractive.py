"""The ``extractive`` summariser: sentences sorted into fixed sections and scored, no model."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from kairox.context.summarizer import SummaryReport
from kairox.context.tokens import count_tokens
from kairox.default_plugins.summarizers.budget import (
    _SENTENCE_END,
    fit_to_budget,
    kept_facts_first,
)
from kairox.default_plugins.summarizers.common import (
    CARRIED_SUMMARY,
    SECTION_DECISIONS,
    SECTION_GOAL,
    SECTION_OPEN_QUESTIONS,
    SECTION_RECENT,
    SECTION_TOOLS,
    _is_user,
    clip,
)
from kairox.default_plugins.summarizers.kept_facts import (
    Ledger,
    ledger_report,
    strip_kept_section,
)
from kairox.support.models import ChatMessage

#: The order sections are rendered in; fixed, so summaries of different turns line up.
_EXTRACTIVE_SECTIONS = (
    SECTION_GOAL,
    SECTION_DECISIONS,
    SECTION_TOOLS,
    SECTION_OPEN_QUESTIONS,
    SECTION_RECENT,
)

# Abbreviations whose trailing period does not end a sentence ("Dr. Alvarez" is one name).
_ABBREVIATIONS = frozenset(
    {
        "dr", "mr", "mrs", "ms", "prof", "st", "jr", "sr", "vs", "etc", "e.g", "i.e", "no",
        "fig", "approx", "inc", "ltd", "co", "dept", "mt", "gen", "col", "capt", "sgt",
        "rev", "hon", "cf", "al", "ca", "vol", "p", "pp",
    }
)  # fmt: skip
_LIST_MARKER = re.compile(r"^\s*(?:#{1,6}\s+|[-*•>]+\s+|\d{1,3}[.)]\s+)")
_WORD = re.compile(r"\S+")

_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:[.,:]\d+)*(?:%|[a-zA-Z]{1,3}\b)?")
_QUOTED = re.compile(
    r"\"[^\"\n]{1,200}\"|(?<!\w)'[^'\n]{1,200}'(?!\w)|`[^`\n]{1,200}`|“[^”\n]{1,200}”"
)
_PATH = re.compile(
    r"https?://\S+"
    r"|(?<![\w/])(?:~|\.{1,2})?/?[\w.-]+(?:/[\w.-]+)+/?"
    r"|[A-Za-z]:\\[\w\\.-]+"
    r"|\b[\w-]+\.(?:py|pyi|js|mjs|ts|tsx|jsx|json|toml|ya?ml|md|rst|txt|rs|go|java|kt|c|h"
    r"|cc|cpp|hpp|cs|rb|php|sh|sql|html|css|cfg|ini|lock|csv|log|env|xml|proto)\b"
)
_IDENTIFIER = re.compile(
    r"\b[A-Za-z]\w*_\w+\b"  # snake_case, CONSTANT_CASE
    r"|\b[a-z]+[A-Z]\w*\b"  # camelCase
    r"|\b[A-Z][a-z0-9]+[A-Z]\w*\b"  # PascalCase with inner capitals (PostgreSQL)
    r"|\b[A-Z]{2,}\d*\b"  # acronyms and units (API, MB, S3)
    r"|\b\w+\(\)?"  # calls: fetch() or fetch(x)
    r"|\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b"  # dotted names: os.path.join
)
_MONTHS = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
    rf"|\b{_MONTHS}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTHS}\b"
    r"|\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|today|tomorrow"
    r"|yesterday|tonight|next week|end of (?:day|week|month|quarter))\b"
    r"|\bq[1-4]\b|\b\d{1,2}(?::\d{2})?\s?(?:am|pm)\b",
    re.IGNORECASE,
)
# Words that mark a decision or a constraint: what a later turn must not contradict.
_DECISION_CUE = re.compile(
    r"\b(?:decided?|decision|agreed?|agreement|chose|chosen|choose|going with|go with"
    r"|settled on|picked|prefer(?:s|red)?|approved?|confirmed?|use|uses|using|switch(?:ed)? to"
    r"|must(?:n't| not)?|never|always|don'?t|do not|should(?:n'?t| not)?|requires?|required"
    r"|requirements?|deadline|due|limits?|limited|budget|at most|at least|no more than"
    r"|maximum|minimum|max|min|cannot|can'?t|only|exceed(?:s|ed)?|forbidden|allowed"
    r"|mandatory|constraints?|policy|rule)\b",
    re.IGNORECASE,
)
# A later user message with one of these restates or changes the goal.
_GOAL_CUE = re.compile(
    r"\b(?:my|our|the|new) (?:goal|aim|objective|task|plan)\b|\bi (?:want|need|would like)\b"
    r"|\bi'd like\b|\bwe (?:want|need)\b|\binstead\b|\bchange of plans?\b|\bfrom now on\b"
    r"|\bactually\b|\blet'?s (?:instead|now|switch)\b",
    re.IGNORECASE,
)
# An assistant sentence reporting a tool call it made.
_TOOL_MENTION = re.compile(
    r"\b(?:call(?:s|ed|ing)?|invok(?:e|es|ed|ing)|ran|execut(?:e|es|ed|ing)|tool|queried)\b",
    re.IGNORECASE,
)
_TOOL_ERROR = re.compile(r"\b(?:\w*error|\w*exception|failed|failure|fatal)\b", re.IGNORECASE)
_SALIENT = re.compile(r"[^\W\d_]{4,}|\d+")
_STOPWORDS = frozenset(
    {
        "what", "which", "where", "when", "would", "could", "should", "there", "their",
        "about", "with", "from", "this", "that", "have", "does", "will", "your", "they",
        "them", "then", "than", "into", "also", "just", "like", "make", "more", "some",
        "such", "were", "been", "being", "here", "only", "over", "very", "want", "need",
        "please", "know", "think",
    }
)  # fmt: skip
# Words capitalised anywhere, hence no sign of a proper name.
_NOT_NAMES = frozenset({"I", "I'm", "I'll", "I've", "I'd", "OK", "Ok"})

#: Longest text one bullet keeps; a longer sentence is cut at a word boundary.
_MAX_ITEM_CHARS = 400
#: Longest tool outcome kept, so one verbose tool output cannot crowd out the rest.
_MAX_OUTCOME_CHARS = 160
#: Share of the budget the verbatim recent user messages may take.
_RECENT_SHARE = 0.3
#: A first user message shorter than this many words ("hi") does not state a goal alone.
_SHORT_GOAL_WORDS = 5


def _split_sentences(content: str) -> list[str]:
    """Sentences of ``content``, one line at a time; list markers and headings stripped."""
    sentences: list[str] = []
    for raw_line in content.splitlines():
        line = _LIST_MARKER.sub("", raw_line).strip()
        if not line:
            continue
        start = 0
        for match in _SENTENCE_END.finditer(line):
            if match.group().startswith(".") and match.group().rstrip("\"'”’)]") == ".":
                before = line[start : match.start()].rsplit(None, 1)
                word = before[-1].lower() if before else ""
                # "Dr. Alvarez", "e.g. this", "J. Smith": the period is not an ending.
                if word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
                    continue
            sentence = line[start : match.end()].strip()
            if sentence:
                sentences.append(sentence)
            start = match.end()
        tail = line[start:].strip()
        if tail:
            sentences.append(tail)
    return sentences


def _proper_names(sentence: str) -> int:
    """Capitalised words not at the sentence start: the usual shape of a name."""
    words = _WORD.findall(sentence)
    count = 0
    for index, word in enumerate(words[1:], start=1):
        word = word.strip("\"'“”‘’()[]{},;:!?")
        if not word or word in _NOT_NAMES or not word[0].isupper():
            continue
        # After a colon a capital starts a clause, not a name.
        if words[index - 1].endswith(":"):
            continue
        count += 1
    return count


def _fact_score(text: str) -> float:
    """How much ``text`` carries the exact details later questions ask about.

    Each kind of detail is capped so one list of numbers cannot outrank everything else.
    Paths, quoted strings and dates weigh most: they are the hardest to reconstruct.
    """
    return (
        3 * min(len(_NUMBER.findall(text)), 3)
        + 3 * min(_proper_names(text), 3)
        + 3 * min(len(_QUOTED.findall(text)), 2)
        + 4 * min(len(_PATH.findall(text)), 2)
        + 2 * min(len(_IDENTIFIER.findall(text)), 3)
        + 3 * min(len(_DATE.findall(text)), 2)
    )


def _salient_words(text: str) -> set[str]:
    return {w for w in (m.casefold() for m in _SALIENT.findall(text)) if w not in _STOPWORDS}


@dataclass(frozen=True, slots=True)
class _Item:
    """One candidate bullet: its section, where it came from, and how much it matters."""

    section: str
    position: tuple[int, int]  # (message index, sentence index): the original order
    text: str
    score: float


def _goal_messages(messages: Sequence[ChatMessage]) -> set[int]:
    """Indices of the user messages that state the goal: the first ones, until one is
    substantial (a bare "hi" does not state a goal)."""
    chosen: set[int] = set()
    for index, message in enumerate(messages):
        if not _is_user(message) or not message.content.strip():
            continue
        chosen.add(index)
        if len(message.content.split()) >= _SHORT_GOAL_WORDS:
            break
    return chosen


def _open_question(
    question: str, index: int, messages: Sequence[ChatMessage], words: Sequence[set[str]]
) -> bool:
    """Whether no later message from the other side answers ``question``.

    "Answers" is approximated deterministically: a later user/assistant message from the
    other party that shares a salient word with the question (or, for a question without
    salient words, any later message from the other party).
    """
    asker_is_user = _is_user(messages[index])
    wanted = _salient_words(question)
    for later in range(index + 1, len(messages)):
        message = messages[later]
        if message.role not in ("user", "assistant") or _is_user(message) == asker_is_user:
            continue
        if not wanted or wanted & words[later]:
            return False
    return True


def _tool_outcome(message: ChatMessage) -> str:
    """``name: outcome``, the shortest form that says what happened.

    The outcome is the last line reporting an error when there is one (a traceback's
    first line says nothing, its last says what failed), else the first non-empty line.
    """
    lines = [line.strip() for line in message.content.splitlines() if line.strip()]
    errors = [line for line in lines if _TOOL_ERROR.search(line)]
    line = errors[-1] if errors else lines[0] if lines else ""
    outcome = clip(line, _MAX_OUTCOME_CHARS) if line else "(no output)"
    return f"{message.name or 'tool'}: {outcome}"


def _candidates(messages: Sequence[ChatMessage], skip: set[int]) -> list[_Item]:
    """Every sentence worth a bullet, sorted into its section and scored.

    Messages in ``skip`` are already quoted verbatim; only their goal sentences are kept,
    because the goal section must make sense on its own.
    """
    goal_indices = _goal_messages(messages)
    substantial = {i for i in goal_indices if len(messages[i].content.split()) >= _SHORT_GOAL_WORDS}
    words = [_salient_words(m.content) for m in messages]
    total = max(len(messages), 1)
    items: list[_Item] = []
    seen: set[str] = set()
    for index, message in enumerate(messages):
        # A small bonus for later messages: a later decision usually supersedes an earlier one.
        recency = index / total
        if message.name == CARRIED_SUMMARY:
            items.extend(_carried_items(message.content, index, seen))
            continue
        if message.role == "tool":
            text = _tool_outcome(message)
            if text.casefold() not in seen:
                seen.add(text.casefold())
                items.append(_Item(SECTION_TOOLS, (index, 0), text, 4 + _fact_score(text)))
            continue
        for number, sentence in enumerate(_split_sentences(message.content)):
            key = " ".join(sentence.casefold().split())
            if key in seen:
                continue
            text = clip(sentence, _MAX_ITEM_CHARS)
            facts = _fact_score(sentence)
            cue = _DECISION_CUE.search(sentence) is not None
            if index in goal_indices:
                # The first sentence of the first message is usually the request itself; a
                # greeting before it ("hi") is kept only when there is room to spare.
                base = 20 - min(number, 10) if index in substantial else 1
                item = _Item(SECTION_GOAL, (index, number), text, base + facts)
            elif _is_user(message) and _GOAL_CUE.search(sentence):
                item = _Item(SECTION_GOAL, (index, number), text, 12 + facts + recency)
            elif index in skip:
                continue
            elif message.role == "assistant" and _TOOL_MENTION.search(sentence):
                item = _Item(SECTION_TOOLS, (index, number), text, 3 + facts + recency)
            elif sentence.rstrip("\"'”’)]").endswith("?"):
                if not _open_question(sentence, index, messages, words):
                    continue  # answered: the answer carries the content
                item = _Item(SECTION_OPEN_QUESTIONS, (index, number), text, 5 + facts + recency)
            elif cue or facts:
                item = _Item(SECTION_DECISIONS, (index, number), text, 2 * cue + facts + recency)
            else:
                continue  # filler: no cue, no detail a later turn could need
            seen.add(key)
            items.append(item)
    return items


def _carried_items(content: str, index: int, seen: set[str]) -> list[_Item]:
    """The bullets of an earlier summary, back in their sections, ahead of new detail.

    They were chosen once already; re-ranking them against fresh chatter each compaction
    would wear the early facts away one summary at a time.
    """
    items: list[_Item] = []
    section = SECTION_DECISIONS
    for number, line in enumerate(strip_kept_section(content).splitlines()):
        stripped = line.strip()
        if stripped.startswith("## "):
            heading = stripped[3:].strip()
            section = heading if heading in _EXTRACTIVE_SECTIONS else SECTION_DECISIONS
            if section == SECTION_RECENT:  # earlier "recent" messages are history now
                section = SECTION_DECISIONS
            continue
        text = stripped.removeprefix("- ").strip()
        key = " ".join(text.casefold().split())
        if not text or key in seen:
            continue
        seen.add(key)
        bonus = 120 if section == SECTION_GOAL else 100
        items.append(
            _Item(section, (index, number), clip(text, _MAX_ITEM_CHARS), bonus + _fact_score(text))
        )
    return items


def _render(chosen: Sequence[_Item], recent: Sequence[str]) -> str:
    """The summary text: non-empty sections in fixed order, bullets in original order."""
    blocks: list[str] = []
    for section in _EXTRACTIVE_SECTIONS:
        if section == SECTION_RECENT:
            lines = [f"- {content}" for content in recent]
        else:
            items = sorted((i for i in chosen if i.section == section), key=lambda i: i.position)
            lines = [f"- {item.text}" for item in items]
        if lines:
            blocks.append(f"## {section}\n" + "\n".join(lines))
    return "\n\n".join(blocks)


class ExtractiveSummarizer:
    """Deterministic, model-free summary in fixed sections (the default summariser).

    Sentences are sorted into *Goal* (the first user messages and later ones that restate
    or change the goal), *Decisions and constraints* (decision or constraint cues, or exact
    details such as numbers and names), *Tool calls and outcomes* (each tool message's
    name and outcome, and assistant sentences reporting calls), *Open questions*
    (questions the other side never took up) and *Recent user messages* (the last one or
    two user messages verbatim, when they fit in 30 % of the budget). The highest-scoring
    bullets that fit are kept, shown in their original order; empty sections are left out.
    """

    name = "extractive"

    async def summarize(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, encoding: str
    ) -> str:
        return self.summarize_sync(messages, max_tokens=max_tokens, encoding=encoding)

    async def summarize_with_report(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, encoding: str
    ) -> tuple[str, SummaryReport]:
        return self.summarize_report_sync(messages, max_tokens=max_tokens, encoding=encoding)

    def summarize_sync(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, encoding: str
    ) -> str:
        """The summary, computed synchronously (it never waits on anything)."""
        return self.summarize_report_sync(messages, max_tokens=max_tokens, encoding=encoding)[0]

    def summarize_report_sync(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, encoding: str
    ) -> tuple[str, SummaryReport]:
        """The summary and what it kept and dropped: the ledger first, under its own
        share of the budget, then the sections in what is left."""
        start = kept_facts_first(messages, max_tokens, encoding)
        if start is None:
            return "", SummaryReport()
        ledger, head, room = start
        rest = self._sections(messages, room, encoding, ledger) if room > 0 else ""
        text = fit_to_budget("\n\n".join(p for p in (head, rest) if p), max_tokens, encoding)
        return text, ledger_report(ledger)

    def _sections(
        self, messages: Sequence[ChatMessage], max_tokens: int, encoding: str, ledger: Ledger
    ) -> str:
        recent_indices, recent = self._recent(messages, max_tokens, encoding)
        keep = [not ledger.holds_stale(text) for text in recent]
        recent_indices = [i for i, ok in zip(recent_indices, keep, strict=True) if ok]
        recent = [text for text, ok in zip(recent, keep, strict=True) if ok]
        items = [
            item
            for item in _candidates(messages, set(recent_indices))
            if " ".join(item.text.casefold().split()) not in ledger.covered
            and not ledger.holds_stale(item.text)
        ]
        chosen = self._choose(items, recent, max_tokens, encoding)
        text = _render(chosen, recent)
        # Token counts of joined lines are not exactly additive; drop the weakest bullets
        # (then the verbatim messages) until the real count fits.
        by_rank = sorted(chosen, key=lambda i: (-i.score, i.position))
        while count_tokens(text, encoding) > max_tokens and (by_rank or recent):
            if by_rank:
                by_rank.pop()
            else:
                recent = recent[1:]
            text = _render(by_rank, recent)
        return fit_to_budget(text, max_tokens, encoding)

    @staticmethod
    def _recent(
        messages: Sequence[ChatMessage], max_tokens: int, encoding: str
    ) -> tuple[list[int], list[str]]:
        """The last one or two user messages that fit, verbatim, oldest first."""
        allowance = int(max_tokens * _RECENT_SHARE) - count_tokens(
            f"## {SECTION_RECENT}\n\n\n", encoding
        )
        indices: list[int] = []
        used = 0
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if not _is_user(message) or not message.content.strip():
                continue
            cost = count_tokens(f"- {message.content}\n", encoding)
            if used + cost > allowance:
                break  # an older message in place of a newer one would mislead
            indices.insert(0, index)
            used += cost
            if len(indices) == 2:
                break
        return indices, [messages[i].content for i in indices]

    @staticmethod
    def _choose(
        items: Sequence[_Item], recent: Sequence[str], max_tokens: int, encoding: str
    ) -> list[_Item]:
        """The best items whose estimated cost fits next to the verbatim messages."""
        used = count_tokens(_render((), recent), encoding)
        opened: set[str] = set()
        chosen: list[_Item] = []
        for item in sorted(items, key=lambda i: (-i.score, i.position)):
            cost = count_tokens(f"- {item.text}\n", encoding)
            if item.section not in opened:
                cost += count_tokens(f"## {item.section}\n\n", encoding)
            if used + cost > max_tokens:
                continue  # a shorter, lower-ranked item may still fit
            used += cost
            opened.add(item.section)
            chosen.append(item)
        return chosen
