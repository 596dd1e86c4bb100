"""The *Kept facts* ledger: the part of a summary that carries the thread.

A compaction summary opens with a ``## Kept facts`` section: the user's goal, what was
decided or constrained, names, identifiers, numbers with their units, dates, paths, and
the outcomes of tool calls, one bullet each, under their own share of the summary budget.
The ledger is rebuilt at every compaction from the previous summary's ledger (carried
forward first: it was chosen already) and the new messages, so the first compaction is
no ceiling on what survives.

Corrections supersede. A sentence that corrects an earlier one ("GRCh38, not the older
build", "actually, move it to port 9443", a tool outcome with the same subject and a new
value) replaces the fact it corrects, found by the stale value it names or else by the
subject words the two share. The superseded value is dropped from the whole summary; the
correction keeps the old sentence's wording with its values elided, so its referent
("it") still reads.

Everything here is rules, no model: same input, same ledger.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from kairox.context.summarizer import SummaryReport
from kairox.context.tokens import count_tokens
from kairox.default_plugins.summarizers.common import clip
from kairox.support.models import ChatMessage

__all__ = [
    "KEPT_SHARE",
    "SECTION_KEPT",
    "Fact",
    "Ledger",
    "build_ledger",
    "ledger_report",
    "strip_kept_section",
]

SECTION_KEPT = "Kept facts"
#: The share of a summary's budget the ledger may use; the sections after it get the rest.
KEPT_SHARE = 0.7
#: Longest sentence one fact keeps, so one rambling message cannot crowd out the rest.
_MAX_FACT_CHARS = 200
_MAX_CONTEXT_CHARS = 90
#: The extractive sections clip a tool outcome the same way (one key for both).
_MAX_OUTCOME_CHARS = 160

# Tiers: what survives when the ledger is over its share (higher first).
GOAL, USER, TOOL, ASSISTANT, DETAIL = 5, 4, 3, 2, 1
_LABELS = {GOAL: "goal", USER: "user", TOOL: "tool", ASSISTANT: "assistant", DETAIL: "detail"}
_TIERS = {label: tier for tier, label in _LABELS.items()}
_LINE = re.compile(r"^- (goal|user|tool|assistant|detail)(?: \(replaces: ([^)]*)\))?: (.+)$")

# -- what a detail looks like ------------------------------------------------------------------

_UNITS = (
    r"ms|s|secs?|seconds?|min|minutes?|h|hours?|days?|weeks?|months?|years?|[KMGT]i?B|kB"
    r"|EUR|USD|GBP|CHF|JPY|requests?|req|rps|tokens?|cores?|users?|nodes?|replicas?|px|%"
    r"|percent|GHz|MHz|kg|g|km|m|cm|mm|items?|rows?|files?|retries|attempts|times"
    r"|[a-z]{2,}s"  # any plural count: "16 threads", "1,284 samples"
)
_DETAIL = re.compile(
    r"https?://\S+"  # URLs
    r"|\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"  # e-mail addresses
    r"|(?<![\w/])~?/?[\w.-]+(?:/[\w.-]+)+/?"  # paths
    r"|\b\d{4}-\d{2}-\d{2}\b"  # ISO dates
    r"|\b[A-Za-z]+[-_][\w-]*\d[\w-]*\b|\b\w*\d\w*[-_][\w-]+\b"  # ids: KX-4471-B, orion-stg-2
    r"|\b[A-Za-z_]\w*_\w+\b"  # snake_case names
    r"|\b[a-z]+[A-Z]\w*\b|\b[A-Z][a-z0-9]+[A-Z]\w*\b|\b[A-Z]{2,}\w*\b"  # camel, acronyms
    r"|\"[^\"\n]{1,80}\"|`[^`\n]{1,80}`"  # quoted
    r"|(?<![\w.])[-+]?\d+(?:[.,:]\d+)*(?:%|[a-zA-Z]{1,3}\b|\s(?:" + _UNITS + r")\b)?"  # numbers
)
_STRONG = re.compile(
    r"[/\\]|\d{4}-\d{2}-\d{2}|[A-Za-z]\w*[-_]\w*\d|\d\w*[-_][A-Za-z]|\d+\.\d+|^[\"`]"
    r"|[A-Z]\w*[A-Z]|\w_\w"
)
_VALUE = re.compile(r"\d|/|@|[\"`]")
_NAME = re.compile(
    r"\b(?:Dr|Mr|Mrs|Ms|Prof)\. [A-Z][a-z]+(?: [A-Z][a-z]+)*"
    r"|(?<=\s)[A-Z][a-z]+(?: [A-Z][a-z]+)+"
)
_MONTH_DATE = re.compile(
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d{1,2}(?:st|nd|rd|th)?"
    r"(?:,? \d{4})?\b",
    re.IGNORECASE,
)

# -- what makes a sentence a fact ---------------------------------------------------------------

_CUE = re.compile(
    r"\b(?:decided?|decision|agreed?|chose|chosen|going with|settled on|picked|approved?"
    r"|confirmed?|must(?:n't| not)?|never|always|don'?t|do not|should(?:n'?t| not)?|requires?"
    r"|required|deadline|due|limits?|budget|at most|at least|no more than|maximum|minimum"
    r"|cannot|can'?t|only|exceed|forbidden|allowed|mandatory|policy|rule|goal|use|uses"
    r"|called|named|stays?|remains?)\b",
    re.IGNORECASE,
)
_GOAL_CHANGE = re.compile(
    r"\b(?:my|our|the) (?:new )?(?:goal|aim|objective)\b"
    r"|\bi (?:now )?(?:want|need) (?:it|you|this) to\b|\bfrom now on\b",
    re.IGNORECASE,
)
_PROHIBITION = re.compile(r"\b(?:must|never|always|do not|don'?t|no one)\b", re.IGNORECASE)
_REQUEST = re.compile(
    r"^(?:can|could|would|will|shall|please|let'?s|how|what|why|which|who|where|when|do you"
    r"|any idea)\b",
    re.IGNORECASE,
)
# Words that say a sentence corrects an earlier value.
_CORRECTION = re.compile(
    r"\b(?:actually|correction|instead|rather than|no longer|not anymore|scratch that"
    r"|change of plans?|changed? (?:it |that |this )?to|switch(?:ed)? (?:it |that )?to"
    r"|move (?:it|that|this|them)? ?to|moved to|update[sd]?:|i meant|i mean|wrong"
    r"|from now on|replaced? by|now (?:is|are|uses?|at|on)|update (?:\w+ ){0,8}to)\b"
    r"|,\s*not\b|\bnot\s+the\b",
    re.IGNORECASE,
)
# The stale value a correction names: "X, not Y", "instead of Y", "rather than Y", "was Y".
_STALE = re.compile(
    r"(?:,\s*not|\binstead of|\brather than|\bno longer|\bnot)\s+(?:the\s+)?((?:[^,.;:!?]|[.,:](?=\w)){1,60})",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W\d_]{3,}")
_STOP_WORDS = """the and for that this with from have has had are was were will would could should
    about into onto over under than then them they their there here what which where when
    who how why our ours your yours you we us its it's also just like make more some such
    been being very only need want please know think now not one all any each every let's
    lets can may might must shall use uses used using is be to of on in at by as an or
    actually instead rather longer anymore correction change changed changes plan plans
    switch switched move moved moving update updated updates meant mean wrong scratch
    going keep kept stays stay remain remains still older old new newer earlier later
    value right sorry okay noted sure per out"""
_STOP = frozenset(_STOP_WORDS.split())


def _details(text: str) -> list[str]:
    found = [m.group().strip().rstrip(".,;:") for m in _DETAIL.finditer(text)]
    found += [m.group() for m in _NAME.finditer(text)]
    found += [m.group() for m in _MONTH_DATE.finditer(text)]
    # Single digits ("2 stages") are too common to identify a fact by.
    return [d for d in found if d and not (d.isdigit() and len(d) < 2)]


def _subject(text: str, details: Iterable[str]) -> frozenset[str]:
    """The words that say what a fact is about, its values left out."""
    for detail in sorted(set(details), key=len, reverse=True):
        text = text.replace(detail, " ")
    return frozenset(w for w in (m.casefold() for m in _WORD.findall(text)) if w not in _STOP)


def _elide(text: str, values: Iterable[str]) -> str:
    """``text`` with its values (numbers, paths, addresses, quotes) elided, names kept."""
    for value in sorted({v for v in values if _VALUE.search(v)}, key=len, reverse=True):
        text = text.replace(value, "…")
    return text


def _key(text: str) -> str:
    return " ".join(text.casefold().split())


@dataclass
class Fact:
    """One kept fact: its sentence, who established it, and what it is about."""

    text: str
    tier: int
    order: int
    context: str = ""
    """For a correction: the corrected sentence with its stale values elided."""
    subject: frozenset[str] = frozenset()
    details: tuple[str, ...] = ()

    @property
    def cue(self) -> bool:
        """Whether the sentence says a decision, constraint or correction was made."""
        return bool(self.context or _CUE.search(self.text))

    @property
    def strong(self) -> bool:
        """Whether it holds a value no one could guess back: an id, a path, a date, a
        version, a quoted string (not just a count or a name)."""
        return any(_STRONG.search(d) for d in self.details)

    @property
    def line(self) -> str:
        replaces = f" (replaces: {self.context})" if self.context else ""
        return f"- {_LABELS[self.tier]}{replaces}: {self.text}"


def _fact(text: str, tier: int, order: int, context: str = "") -> Fact:
    details = tuple(_details(text))
    subject = _subject(f"{text} {context}", details)
    return Fact(text, tier, order, context, subject, details)


@dataclass
class Ledger:
    """The kept facts after one compaction, and what became of the others."""

    facts: list[Fact] = field(default_factory=list)
    superseded: list[tuple[Fact, Fact]] = field(default_factory=list)
    """``(old, new)`` pairs: ``old`` was corrected by ``new``."""
    over_budget: list[Fact] = field(default_factory=list)
    stale_values: frozenset[str] = frozenset()
    """Values only superseded facts held: nothing in the summary may present them."""
    covered: frozenset[str] = frozenset()
    """Normalised sentences the ledger stands for (kept or superseded)."""

    def render(self) -> str:
        if not self.facts:
            return ""
        lines = [f.line for f in sorted(self.facts, key=lambda f: f.order)]
        return f"## {SECTION_KEPT}\n" + "\n".join(lines)

    def holds_stale(self, text: str) -> bool:
        """Whether ``text`` carries a value a correction replaced."""
        return any(value in text for value in self.stale_values)

    def dropped(self) -> list[tuple[str, str]]:
        """``(fact, why)`` for every fact not kept: superseded or over the ledger's share."""
        out = [(old.text, f"superseded by: {new.text}") for old, new in self.superseded]
        out += [
            (f.text, "over the kept-facts share of the summary budget") for f in self.over_budget
        ]
        return out


# -- reading facts ------------------------------------------------------------------------------


def _carried(content: str) -> list[tuple[str, int, str]]:
    """``(text, tier, context)`` of each bullet under an earlier summary's *Kept facts*."""
    out: list[tuple[str, int, str]] = []
    inside = False
    for line in content.splitlines():
        stripped = line.strip()
        if stripped.startswith("## "):
            inside = stripped[3:].strip() == SECTION_KEPT
            continue
        match = _LINE.match(stripped) if inside else None
        if match:
            out.append((match.group(3), _TIERS[match.group(1)], match.group(2) or ""))
    return out


def strip_kept_section(content: str) -> str:
    """``content`` without its *Kept facts* section (the ledger carries it separately)."""
    kept: list[str] = []
    inside = False
    for line in content.splitlines():
        stripped = line.strip()
        if stripped.startswith("## "):
            inside = stripped[3:].strip() == SECTION_KEPT
        if not inside:
            kept.append(line)
    return "\n".join(kept).strip()


def _sentences(content: str) -> list[str]:
    out: list[str] = []
    for line in content.splitlines():
        line = re.sub(r"^\s*(?:#{1,6}\s+|[-*•>]+\s+|\d{1,3}[.)]\s+)", "", line).strip()
        # Split after . ! ? followed by a space and a capital or digit ("Dr. Alvarez" holds).
        for part in re.split(
            r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])(?<!Dr\. )(?<!Mr\. )(?<!Ms\. )", line
        ):
            if part.strip():
                out.append(part.strip())
    return out


def _tool_output(content: str) -> tuple[str, str] | None:
    """``(tool, output)`` when ``content`` is a tool result folded into the history."""
    match = re.match(r"^\[tool ([^\]\s]+) returned\]\n?(.*)$", content, re.DOTALL)
    return (match.group(1), match.group(2)) if match else None


def _outcome_lines(tool: str, output: str) -> list[str]:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if re.search(r"error|exception|failed|fatal", line, re.I)]
    chosen = errors[-1:] if errors else [line for line in lines if _details(line)][:3] or lines[:1]
    # The extractive sections' own wording, so a fact the ledger holds is not said twice.
    return [f"{tool}: {clip(line, _MAX_OUTCOME_CHARS)}" for line in chosen] or [
        f"{tool}: (no output)"
    ]


def _classify(message: ChatMessage, first_goal: bool) -> list[tuple[str, int]]:
    """The ``(sentence, tier)`` facts one message states."""
    tool = _tool_output(message.content) if message.role == "assistant" else None
    if message.role == "tool" or tool is not None:
        name, output = tool or (message.name or "tool", message.content)
        return [(line, TOOL) for line in _outcome_lines(name, output)]
    out: list[tuple[str, int]] = []
    for number, sentence in enumerate(_sentences(message.content)):
        if sentence.rstrip("\"')]").endswith("?"):
            continue
        details = _details(sentence)
        if message.role == "user":
            if (first_goal and number == 0) or _GOAL_CHANGE.search(sentence):
                out.append((sentence, GOAL))
            elif _REQUEST.search(sentence) and not _CORRECTION.search(sentence):
                continue
            elif details or _PROHIBITION.search(sentence):
                # A statement with a value in it, or a prohibition (which needs none).
                out.append((sentence, USER))
        elif message.role == "assistant" and details:
            out.append((sentence, ASSISTANT))
    return out


# -- building the ledger --------------------------------------------------------------------------


def _corrected(new: Fact, facts: Sequence[Fact], sentence: str) -> Fact | None:
    """The earlier fact ``new`` corrects, if it is one."""
    # A goal is corrected only through a value it holds ("port 8080"), never by a new
    # wish ("actually, I also want videos"): that one is a goal of its own.
    candidates = [
        f
        for f in facts
        if f.details and (f.tier != GOAL or any(_VALUE.search(d) for d in f.details))
    ]
    is_correction = bool(_CORRECTION.search(sentence))
    if is_correction:
        for match in _STALE.finditer(sentence):
            stale = match.group(1).strip().casefold()
            words = {w.casefold() for w in _WORD.findall(stale)} - _STOP
            for fact in reversed(candidates):
                low = fact.text.casefold()
                if any(d.casefold() in stale for d in fact.details) or (
                    words and words <= set(_WORD.findall(low))
                ):
                    return fact
        # The correction names an old value outright ("...; 16 threads is out").
        named = set(new.details)
        for fact in reversed(candidates):
            if any(d in named and _VALUE.search(d) for d in fact.details):
                return fact
    best, overlap, score = None, 0, 0
    kinds = _shapes(new.details)
    for fact in reversed(candidates):  # newest first: the value a correction revises
        shared = len(new.subject & fact.subject)
        # A value of the same kind ("24 threads" for "16 threads") weighs most.
        weight = shared + 2 * len(kinds & _shapes(fact.details))
        if weight > score:
            best, overlap, score = fact, shared, weight
    if best is None:
        return None
    if is_correction and overlap >= 1:
        return best
    # No correction words: a same-subject update (a tool re-run, a re-stated value) only
    # when the subjects nearly coincide and the values differ.
    union = len(new.subject | best.subject) or 1
    same = overlap / union >= 0.6 and new.tier in (best.tier, TOOL)
    # ... and about the same thing: every identifier of the old one is in the new one
    # ("srv-001 has 3 GB" is no update of "srv-002 has 6 GB").
    ids = {d for d in best.details if _STRONG.search(d)}
    same = same and ids <= set(new.details)
    return best if same and set(new.details) != set(best.details) else None


def _shapes(details: Iterable[str]) -> set[str]:
    """What kind of value each detail is: its digits masked ("16 threads" -> "9 threads")."""
    return {re.sub(r"\d+", "9", d) for d in details if _VALUE.search(d)}


def _without_stale_clause(text: str, stale: Sequence[str], fresh: Sequence[str]) -> str:
    """``text`` without the "instead of Y" / ", not Y" clause naming a replaced value,
    so the correction never repeats the old value."""

    def drop(match: re.Match[str]) -> str:
        return "" if any(value in match.group(0) for value in stale) else match.group(0)

    cleaned = re.sub(r"\s+(?=[.!;])", "", _STALE.sub(drop, text)).strip()
    # A clause that names only the old value ("; 8080 is out") goes as well.
    clauses = re.split(r"(?<=[;,])\s+", cleaned)
    kept = [
        c for c in clauses if any(v in c for v in fresh) or not any(v in c for v in stale)
    ] or clauses
    cleaned = " ".join(kept).rstrip(" ;,")
    return cleaned or text


def build_ledger(
    messages: Sequence[ChatMessage],
    *,
    max_tokens: int,
    encoding: str,
    carried_name: str = "summary",
) -> Ledger:
    """The kept facts of ``messages`` (an earlier summary's ledger first), within
    ``max_tokens``."""
    facts: list[Fact] = []
    superseded: list[tuple[Fact, Fact]] = []
    seen: set[str] = set()
    order = 0
    goal_found = False

    def add(fact: Fact, sentence: str) -> None:
        nonlocal order
        old = _corrected(fact, facts, sentence)
        if old is not None:
            facts.remove(old)
            superseded.append((old, fact))
            # Every other fact stating the replaced value about the same subject goes too:
            # "port 8080" said by the user and repeated by the assistant is one value.
            explicit = bool(_CORRECTION.search(sentence))
            replaced = {d for d in old.details if _VALUE.search(d)} - set(fact.details)
            for other in [f for f in facts if explicit]:
                if replaced & set(other.details) and other.subject & (fact.subject | old.subject):
                    facts.remove(other)
                    superseded.append((other, fact))
            if _CORRECTION.search(sentence):
                # Said as a correction: it keeps the corrected sentence's wording (values
                # elided) so "move it to 9443" still says what moved, and its standing.
                context = old.context or clip(
                    _elide(old.text, old.details), _MAX_CONTEXT_CHARS
                ).replace("(", "").replace(")", "")
                values = [d for d in old.details if _VALUE.search(d)]
                fresh = [d for d in fact.details if d not in old.details]
                text = _without_stale_clause(fact.text, values, fresh)
                fact = _fact(text, max(fact.tier, min(old.tier, USER)), order, context)
        facts.append(fact)
        order += 1

    for message in messages:
        if message.name == carried_name:
            for text, tier, context in _carried(message.content):
                if _key(text) not in seen:
                    seen.add(_key(text))
                    facts.append(_fact(text, tier, order, context))
                    order += 1
                    goal_found = goal_found or tier == GOAL
            continue
        first_goal = message.role == "user" and not goal_found and len(message.content.split()) >= 5
        for sentence, tier in _classify(message, first_goal):
            goal_found = goal_found or tier == GOAL
            text = clip(sentence, _MAX_FACT_CHARS)
            if _key(text) in seen:
                continue
            seen.add(_key(text))
            add(_fact(text, tier, order), sentence)
    return _fit(facts, superseded, seen, max_tokens, encoding)


def _rank(fact: Fact) -> tuple[int, bool, int]:
    """By who established it (goal, user, tool, assistant), decisions and corrections
    first within, then the oldest: a fact established early stays unless corrected."""
    # A tool's outcome is as authoritative as the user's word; the assistant's is not.
    standing = USER if fact.tier == TOOL else fact.tier
    return (-standing, not fact.cue, fact.order)


def _fit(
    facts: list[Fact],
    superseded: list[tuple[Fact, Fact]],
    seen: set[str],
    max_tokens: int,
    encoding: str,
) -> Ledger:
    """Keep the facts that fit, by tier, then the oldest (established first, kept first)."""
    heading = count_tokens(f"## {SECTION_KEPT}\n", encoding)
    used = heading
    kept: list[Fact] = []
    over: list[Fact] = []
    for fact in sorted(facts, key=_rank):
        cost = count_tokens(fact.line + "\n", encoding)
        if used + cost <= max_tokens:
            kept.append(fact)
            used += cost
        else:
            over.append(fact)
    ledger = Ledger(kept, superseded, over)
    # Token counts of joined lines are not exactly additive: drop the weakest until it fits.
    while kept and count_tokens(ledger.render(), encoding) > max_tokens:
        over.append(kept.pop())
    live = {d for f in facts for d in f.details}
    stale = {d for old, _ in superseded for d in old.details if d not in live and len(d) > 1}
    return replace(
        ledger,
        stale_values=frozenset(stale),
        covered=frozenset(_key(f.text) for f in kept)
        | frozenset(_key(old.text) for old, _ in superseded),
    )


def ledger_report(ledger: Ledger, extra: Iterable[tuple[str, str]] = ()) -> SummaryReport:
    """The :class:`SummaryReport` of ``ledger`` (plus ``extra`` drops, e.g. by a model)."""
    kept = tuple(f.line for f in sorted(ledger.facts, key=lambda f: f.order))
    return SummaryReport(kept=kept, dropped=tuple([*ledger.dropped(), *extra]))
