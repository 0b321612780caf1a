"""The SearchFlows query language, parsed and evaluated over plain records.

Dex Server hands queries to its visibility store, whose language is SQL-like:
comparisons of a field with a literal (``=``, ``!=``, ``<>``, ``<``, ``<=``, ``>``,
``>=``), ``IN (...)``, ``BETWEEN a AND b``, ``STARTS_WITH``, ``IS [NOT] NULL``,
combined with ``AND``, ``OR``, ``NOT`` and parentheses, and an optional
``ORDER BY field [ASC|DESC], ...``. Fields are system fields (``FlowId``,
``RunId``, ``FlowType``, ``ExecutionStatus``, ``StartTime``, ``CloseTime``; the
Temporal names ``WorkflowId`` and ``WorkflowType`` work too) and Attribute index
keys. This module knows nothing about the engine: a record is a dict from field
name to value, and the caller says which fields exist.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

Record = Mapping[str, Any]
Predicate = Callable[[Record], bool]

FIELD_ALIASES = {
    "workflowid": "FlowId",
    "flowid": "FlowId",
    "runid": "RunId",
    "workflowtype": "FlowType",
    "flowtype": "FlowType",
    "executionstatus": "ExecutionStatus",
    "flowstatus": "ExecutionStatus",
    "starttime": "StartTime",
    "closetime": "CloseTime",
}
_KEYWORDS = {"and", "or", "not", "in", "between", "starts_with", "is", "null", "order", "by"}
_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
      | (?P<number>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
      | (?P<op><=|>=|!=|<>|=|<|>)
      | (?P<punct>[(),])
      | (?P<word>`[^`]+`|[A-Za-z_][A-Za-z0-9_.\-]*)
    )""",
    re.VERBOSE,
)


class QueryError(ValueError):
    """A query that does not parse, or names a field that does not exist."""


@dataclass(frozen=True)
class Order:
    """One ``ORDER BY`` term."""

    field: str
    descending: bool


@dataclass(frozen=True)
class Query:
    """A parsed query: a predicate over records and the requested order."""

    matches: Predicate
    order: tuple[Order, ...]


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str


def parse(text: str, known_field: Callable[[str], str | None]) -> Query:
    """Parse ``text``; ``known_field`` maps a field name to its canonical name or None."""
    parser = _Parser(_tokenize(text), known_field)
    return parser.query()


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise QueryError(f"unexpected text at {position}: {text[position : position + 20]!r}")
        kind = match.lastgroup or ""
        tokens.append(_Token(kind, match.group(kind)))
        position = match.end()
    return tokens


class _Parser:
    def __init__(self, tokens: Sequence[_Token], known_field: Callable[[str], str | None]) -> None:
        self.tokens = tokens
        self.position = 0
        self.known_field = known_field

    def query(self) -> Query:
        """The whole query: an optional condition, then an optional ORDER BY."""
        matches: Predicate = _always
        if self._peek() is not None and not self._at_word("order"):
            matches = self._or()
        order: list[Order] = []
        if self._at_word("order"):
            self._next()
            self._expect_word("by")
            while True:
                field = self._field()
                descending = False
                if self._at_word("asc"):
                    self._next()
                elif self._at_word("desc"):
                    self._next()
                    descending = True
                order.append(Order(field, descending))
                if not self._at_punct(","):
                    break
                self._next()
        token = self._peek()
        if token is not None:
            raise QueryError(f"unexpected {token.text!r}")
        return Query(matches, tuple(order))

    def _or(self) -> Predicate:
        terms = [self._and()]
        while self._at_word("or"):
            self._next()
            terms.append(self._and())
        if len(terms) == 1:
            return terms[0]
        return lambda record: any(term(record) for term in terms)

    def _and(self) -> Predicate:
        terms = [self._not()]
        while self._at_word("and"):
            self._next()
            terms.append(self._not())
        if len(terms) == 1:
            return terms[0]
        return lambda record: all(term(record) for term in terms)

    def _not(self) -> Predicate:
        if self._at_word("not"):
            self._next()
            return _negate(self._not())
        if self._at_punct("("):
            self._next()
            inner = self._or()
            self._expect_punct(")")
            return inner
        return self._comparison()

    def _comparison(self) -> Predicate:
        field = self._field()
        token = self._peek()
        if token is None:
            raise QueryError(f"{field} needs a comparison")
        if token.kind == "op":
            self._next()
            return _compare(field, token.text, self._literal())
        negated = False
        if self._at_word("not"):
            self._next()
            negated = True
        if self._at_word("in"):
            self._next()
            self._expect_punct("(")
            values = [self._literal()]
            while self._at_punct(","):
                self._next()
                values.append(self._literal())
            self._expect_punct(")")
            test = _member(field, values)
        elif self._at_word("between"):
            self._next()
            low = self._literal()
            self._expect_word("and")
            high = self._literal()
            test = _between(field, low, high)
        elif self._at_word("starts_with"):
            self._next()
            test = _starts_with(field, str(self._literal()))
        elif self._at_word("is"):
            self._next()
            is_not = False
            if self._at_word("not"):
                self._next()
                is_not = True
            self._expect_word("null")
            test = _is_null(field, negated=is_not)
        else:
            raise QueryError(f"unexpected {token.text!r} after {field}")
        if negated:
            return _negate(test)
        return test

    def _field(self) -> str:
        token = self._next()
        if token.kind != "word" or token.text.lower() in _KEYWORDS:
            raise QueryError(f"expected a field name, found {token.text!r}")
        name = token.text.strip("`")
        canonical = FIELD_ALIASES.get(name.lower()) or self.known_field(name)
        if canonical is None:
            raise QueryError(f"unknown search field {name!r}")
        return canonical

    def _literal(self) -> Any:
        token = self._next()
        if token.kind == "string":
            body = token.text[1:-1]
            return re.sub(r"\\(.)", r"\1", body)
        if token.kind == "number":
            number = float(token.text)
            return int(number) if number.is_integer() and "." not in token.text else number
        if token.kind == "word" and token.text.lower() in ("true", "false"):
            return token.text.lower() == "true"
        raise QueryError(f"expected a value, found {token.text!r}")

    def _peek(self) -> _Token | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _next(self) -> _Token:
        token = self._peek()
        if token is None:
            raise QueryError("the query ends too early")
        self.position += 1
        return token

    def _at_word(self, word: str) -> bool:
        token = self._peek()
        return token is not None and token.kind == "word" and token.text.lower() == word

    def _at_punct(self, mark: str) -> bool:
        token = self._peek()
        return token is not None and token.kind == "punct" and token.text == mark

    def _expect_word(self, word: str) -> None:
        if not self._at_word(word):
            raise QueryError(f"expected {word.upper()}")
        self._next()

    def _expect_punct(self, mark: str) -> None:
        if not self._at_punct(mark):
            raise QueryError(f"expected {mark!r}")
        self._next()


def _always(record: Record) -> bool:
    return True


def _values(record: Record, field: str) -> list[Any]:
    """A field's values: a list field (KEYWORD_ARRAY) matches by any element."""
    value = record.get(field)
    if value is None:
        return []
    if isinstance(value, list):
        return list(value)  # pyright: ignore[reportUnknownArgumentType]
    return [value]


def _comparable(value: Any, literal: Any) -> tuple[Any, Any] | None:
    """Both sides as one comparable type, or None when they cannot be compared."""
    if isinstance(value, datetime):
        if isinstance(literal, str):
            try:
                moment = datetime.fromisoformat(literal.replace("Z", "+00:00"))
            except ValueError:
                return None
            if moment.tzinfo is None and value.tzinfo is not None:
                moment = moment.replace(tzinfo=value.tzinfo)
            return value, moment
        return None
    if isinstance(value, bool) or isinstance(literal, bool):
        if isinstance(value, bool) and isinstance(literal, bool):
            return value, literal
        return None
    if isinstance(value, int | float) and isinstance(literal, int | float):
        return value, literal
    if isinstance(value, str) and isinstance(literal, str):
        return value, literal
    return None


def _compare(field: str, operator: str, literal: Any) -> Predicate:
    def test(record: Record) -> bool:
        for value in _values(record, field):
            pair = _comparable(value, literal)
            if pair is None:
                continue
            left, right = pair
            if (
                (operator == "=" and left == right)
                or (operator in ("!=", "<>") and left != right)
                or (operator == "<" and left < right)
                or (operator == "<=" and left <= right)
                or (operator == ">" and left > right)
                or (operator == ">=" and left >= right)
            ):
                return True
        return False

    return test


def _member(field: str, literals: Sequence[Any]) -> Predicate:
    tests = [_compare(field, "=", literal) for literal in literals]
    return lambda record: any(test(record) for test in tests)


def _between(field: str, low: Any, high: Any) -> Predicate:
    lower, upper = _compare(field, ">=", low), _compare(field, "<=", high)
    return lambda record: lower(record) and upper(record)


def _starts_with(field: str, prefix: str) -> Predicate:
    def test(record: Record) -> bool:
        return any(
            isinstance(value, str) and value.startswith(prefix) for value in _values(record, field)
        )

    return test


def _is_null(field: str, *, negated: bool) -> Predicate:
    return lambda record: (record.get(field) is None) != negated


def _negate(test: Predicate) -> Predicate:
    return lambda record: not test(record)


def sort_key(order: Order) -> Callable[[Record], tuple[int, Any]]:
    """A key that sorts records by one field, missing values last."""

    def key(record: Record) -> tuple[int, Any]:
        value = record.get(order.field)
        return (0, value) if value is not None else (1, 0)

    return key
