"""The short text form of a filter: ``year >= 2020 and lang in (en, de) and not draft``.

Grammar (keywords are case-insensitive; ``and`` binds tighter than ``or``)::

    expr      := conj ("or" conj)*
    conj      := unary ("and" unary)*
    unary     := "not" unary | "(" expr ")" | condition
    condition := field ("=" | "==" | "!=" | ">" | ">=" | "<" | "<=") value
               | field ["not"] "in" "(" value ("," value)* ")"
               | field "contains" value
               | field "exists" | field "missing"
               | field                            -- the field is true
    field     := word | quoted
    value     := number | "true" | "false" | word | quoted
    word      := characters other than space ( ) , = ! < > " '
    quoted    := "..." or '...' (a backslash escapes the next character)

A word that reads as a number is a number; ``2021-03-04`` is a string, which range
comparisons treat as a date. The result is the same expression the JSON form gives.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from kairox.retrieval.filters.canonical import to_canonical
from kairox.retrieval.filters.mapping import MAX_DEPTH, parse_mapping
from kairox.retrieval.filters.model import And, Condition, FilterError, FilterExpr, Not, Or, Scalar

__all__ = ["parse_text"]

_TOKEN = re.compile(
    r"""\s*(?:(?P<op>==|!=|>=|<=|=|>|<)|(?P<punct>[(),])|(?P<quoted>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|(?P<word>[^\s(),=!<>"']+)|(?P<bad>\S))""",
    re.DOTALL,
)
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_OPS = {"=": "$eq", "==": "$eq", "!=": "$ne", ">": "$gt", ">=": "$gte", "<": "$lt", "<=": "$lte"}
_KEYWORDS = {"and", "or", "not", "in", "contains", "exists", "missing"}
#: JSON literals: never a bare field name.
_LITERALS = {"null", "true", "false"}


def _check_depth(depth: int) -> None:
    if depth > MAX_DEPTH:
        raise FilterError(f"nested deeper than {MAX_DEPTH} levels; flatten it", "filter")


class _Token:
    __slots__ = ("kind", "quoted", "text", "where")

    def __init__(self, kind: str, text: str, where: int, quoted: bool = False) -> None:
        self.kind, self.text, self.where, self.quoted = kind, text, where, quoted

    def keyword(self, word: str) -> bool:
        return self.kind == "word" and not self.quoted and self.text.casefold() == word


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        if kind is None:
            continue
        value = match.group(kind)
        if kind == "bad":
            raise FilterError(
                f"unexpected {value!r} at character {match.start(kind)}; quote values that hold it",
                "filter",
            )
        if kind == "quoted":
            out.append(
                _Token("word", re.sub(r"\\(.)", r"\1", value[1:-1]), match.start(kind), True)
            )
        else:
            out.append(_Token(kind, value, match.start(kind)))
    return out


def parse_text(text: str) -> FilterExpr | None:
    """The text form as an expression (``None`` for blank text).

    :raises FilterError: saying where the text stopped making sense and what may come there.
    """
    if len(text) > 65536:
        raise FilterError("the filter text is longer than 65536 characters", "filter")
    tokens = _tokens(text)
    if not tokens:
        return None
    parser = _TextParser(tokens)
    expr = parser.expr(0)
    if parser.pos < len(tokens):
        raise parser.error("'and', 'or' or the end of the filter")
    # The JSON parser's checks (values, limits) apply to the text form too.
    return parse_mapping(to_canonical(expr))


class _TextParser:
    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.peek()
        if token is None:
            raise self.error("more")
        self.pos += 1
        return token

    def error(self, wanted: str) -> FilterError:
        token = self.peek()
        found = "the end" if token is None else f"{token.text!r} at character {token.where}"
        return FilterError(f"expected {wanted}, found {found}", "filter")

    def expr(self, depth: int) -> FilterExpr:
        _check_depth(depth)
        return self.joined("or", self.conj, Or, depth)

    def conj(self, depth: int) -> FilterExpr:
        return self.joined("and", self.unary, And, depth)

    def joined(
        self,
        word: str,
        part: Callable[[int], FilterExpr],
        node: Callable[[tuple[FilterExpr, ...]], FilterExpr],
        depth: int,
    ) -> FilterExpr:
        """One ``part``, or several joined by the keyword ``word`` (as one ``node``)."""
        items = [part(depth)]
        while (token := self.peek()) is not None and token.keyword(word):
            self.pos += 1
            items.append(part(depth))
        return items[0] if len(items) == 1 else node(tuple(items))

    def unary(self, depth: int) -> FilterExpr:
        token = self.peek()
        if token is None:
            raise self.error("a condition")
        if token.keyword("not"):
            self.pos += 1
            # Checked here too: a chain of thousands of `not` would otherwise exhaust
            # Python's recursion limit before any `(` is reached.
            _check_depth(depth + 1)
            return Not(self.unary(depth + 1))
        if token.kind == "punct" and token.text == "(":
            self.pos += 1
            inner = self.expr(depth + 1)
            self.expect(")")
            return inner
        return self.condition()

    def expect(self, punct: str) -> None:
        token = self.peek()
        if token is None or token.kind != "punct" or token.text != punct:
            raise self.error(repr(punct))
        self.pos += 1

    def condition(self) -> FilterExpr:
        token = self.take()
        if token.kind != "word" or (not token.quoted and token.text.casefold() in _KEYWORDS):
            self.pos -= 1
            raise self.error("a field name")
        if not token.quoted and (
            token.text.casefold() in _LITERALS or token.text.startswith(("[", "{"))
        ):
            # `--filter '[]'` or `--filter null` would otherwise test a field named so.
            self.pos -= 1
            raise self.error(
                "a field name (a filter is a JSON object or the text form such as "
                "year >= 2020; quote a field with this name)"
            )
        field = token.text
        nxt = self.peek()
        if (
            nxt is None
            or (nxt.kind == "punct" and nxt.text == ")")
            or nxt.keyword("and")
            or nxt.keyword("or")
        ):
            return Condition(field, "$eq", True)
        if nxt.kind == "op":
            self.pos += 1
            return Condition(field, _OPS[nxt.text], self.value())
        if nxt.keyword("exists") or nxt.keyword("missing"):
            self.pos += 1
            return Condition(field, "$exists", nxt.keyword("exists"))
        if nxt.keyword("contains"):
            self.pos += 1
            return Condition(field, "$contains", self.value())
        negate = nxt.keyword("not")
        if negate:
            self.pos += 1
        token = self.peek()
        if token is None or not token.keyword("in"):
            raise self.error("an operator (= != > >= < <= in, not in, contains, exists, missing)")
        self.pos += 1
        self.expect("(")
        values = [self.value()]
        while (token := self.peek()) is not None and token.kind == "punct" and token.text == ",":
            self.pos += 1
            values.append(self.value())
        self.expect(")")
        return Condition(field, "$nin" if negate else "$in", tuple(values))

    def value(self) -> Scalar:
        if self.peek() is None:
            raise self.error("a value")
        token = self.take()
        if token.kind != "word":
            self.pos -= 1
            raise self.error("a value")
        if token.quoted:
            return token.text
        lowered = token.text.casefold()
        if lowered in ("true", "false"):
            return lowered == "true"
        if _NUMBER.fullmatch(token.text):
            number = float(token.text)
            if re.fullmatch(r"[+-]?\d+", token.text):
                return int(token.text)
            return number
        return token.text
