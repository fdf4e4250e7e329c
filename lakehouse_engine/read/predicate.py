"""Predicates: built as in pypaimon, used both to prune files by statistics and to filter rows."""

from __future__ import annotations

import decimal
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.errors import SchemaError

_COMPARISONS = ("equal", "notEqual", "lessThan", "lessOrEqual", "greaterThan", "greaterOrEqual")


@dataclass(frozen=True)
class Predicate:
    """A leaf (`method` on `field` with `literals`) or a compound (`and`/`or` of `children`)."""

    method: str
    field: str | None = None
    literals: tuple[Any, ...] = ()
    children: tuple[Predicate, ...] = ()
    arrow_type: pa.DataType | None = None

    def _coerce(self, value: Any) -> Any:
        """A Python literal Arrow can hold as the field's type (numbers for a DECIMAL field as Decimal)."""
        if (self.arrow_type is not None and pa.types.is_decimal(self.arrow_type)
                and isinstance(value, int | float) and not isinstance(value, bool)):
            return decimal.Decimal(str(value))
        return value

    def _literal(self, value: Any) -> Any:
        """A literal as a scalar of the field's type, so comparisons need no implicit cast."""
        if self.arrow_type is None or value is None:
            return value
        try:
            return pa.scalar(self._coerce(value), type=self.arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
            return value

    def fields(self) -> set[str]:
        """Every field the predicate reads."""
        if self.children:
            out: set[str] = set()
            for c in self.children:
                out |= c.fields()
            return out
        return {self.field} if self.field else set()

    # ---- rows --------------------------------------------------------------------
    def to_arrow(self) -> pc.Expression:
        """The predicate as an Arrow compute expression (SQL semantics: null compares false)."""
        m = self.method
        if m == "and":
            expr = self.children[0].to_arrow()
            for c in self.children[1:]:
                expr = expr & c.to_arrow()
            return expr
        if m == "or":
            expr = self.children[0].to_arrow()
            for c in self.children[1:]:
                expr = expr | c.to_arrow()
            return expr
        f = pc.field(self.field)
        lit = self._literal(self.literals[0]) if self.literals else None
        if m == "equal":
            return f == lit
        if m == "notEqual":
            return f != lit
        if m == "lessThan":
            return f < lit
        if m == "lessOrEqual":
            return f <= lit
        if m == "greaterThan":
            return f > lit
        if m == "greaterOrEqual":
            return f >= lit
        if m == "isNull":
            return f.is_null()
        if m == "isNotNull":
            return f.is_valid()
        if m == "in":
            return f.isin(self._value_set())
        if m == "notIn":
            return ~f.isin(self._value_set()) & f.is_valid()
        if m == "between":
            return (f >= self._literal(self.literals[0])) & (f <= self._literal(self.literals[1]))
        if m == "startsWith":
            return pc.starts_with(f, pattern=str(lit))
        raise SchemaError(f"unknown predicate method {m!r}")

    def _value_set(self) -> Any:
        if self.arrow_type is None:
            return list(self.literals)
        try:
            return pa.array([self._coerce(v) for v in self.literals], type=self.arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
            return list(self.literals)

    def filter_table(self, table: pa.Table) -> pa.Table:
        return table.filter(self.to_arrow())

    # ---- statistics ------------------------------------------------------------------
    def may_match(self, ranges: Mapping[str, tuple[Any, Any]]) -> bool:
        """False only when no row with values in `ranges` (field -> (min, max)) can satisfy this.

        Fields missing from `ranges` are unknown and may match anything.
        """
        m = self.method
        if m == "and":
            return all(c.may_match(ranges) for c in self.children)
        if m == "or":
            return any(c.may_match(ranges) for c in self.children)
        if self.field is None or self.field not in ranges:
            return True
        lo, hi = ranges[self.field]
        if _is_nan(lo) or _is_nan(hi):
            return True  # a NaN bound orders nowhere under IEEE comparison: no pruning
        try:
            return _leaf_may_match(m, lo, hi, self.literals)
        except TypeError:
            return True


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _leaf_may_match(m: str, lo: Any, hi: Any, literals: tuple[Any, ...]) -> bool:
    if m == "isNull":
        return lo is None or hi is None
    if m == "isNotNull":
        return not (lo is None and hi is None)
    if lo is None or hi is None:
        return m in ("notEqual", "notIn")
    if m == "in":
        return any(v is not None and lo <= v <= hi for v in literals)
    if m == "notIn":
        return not (lo == hi and lo in literals)
    if m == "between":
        return not (literals[1] < lo or literals[0] > hi)
    if m == "startsWith":
        return True
    v = literals[0]
    if v is None:
        return False
    if m == "equal":
        return lo <= v <= hi
    if m == "notEqual":
        return not (lo == hi == v)
    if m == "lessThan":
        return lo < v
    if m == "lessOrEqual":
        return lo <= v
    if m == "greaterThan":
        return hi > v
    if m == "greaterOrEqual":
        return hi >= v
    return True


class PredicateBuilder:
    """Builds predicates over a table's fields (pypaimon's `PredicateBuilder` names)."""

    def __init__(self, field_names: Sequence[str], arrow_types: Mapping[str, pa.DataType] | None = None):
        self.field_names = list(field_names)
        self.arrow_types = dict(arrow_types or {})

    def _leaf(self, method: str, name: str, *literals: Any) -> Predicate:
        if name not in self.field_names:
            raise SchemaError(f"predicate on unknown field '{name}' (fields: {', '.join(self.field_names)})")
        arrow_type = self.arrow_types.get(name)
        if arrow_type is not None and pa.types.is_nested(arrow_type) and method not in ("isNull", "isNotNull"):
            raise SchemaError(f"predicate {method} on field '{name}' of nested type {arrow_type}: "
                              f"ARRAY, MAP and ROW columns take is_null / is_not_null only")
        return Predicate(method, name, tuple(literals), arrow_type=arrow_type)

    def equal(self, name: str, value: Any) -> Predicate:
        return self._leaf("equal", name, value)

    def not_equal(self, name: str, value: Any) -> Predicate:
        return self._leaf("notEqual", name, value)

    def less_than(self, name: str, value: Any) -> Predicate:
        return self._leaf("lessThan", name, value)

    def less_or_equal(self, name: str, value: Any) -> Predicate:
        return self._leaf("lessOrEqual", name, value)

    def greater_than(self, name: str, value: Any) -> Predicate:
        return self._leaf("greaterThan", name, value)

    def greater_or_equal(self, name: str, value: Any) -> Predicate:
        return self._leaf("greaterOrEqual", name, value)

    def is_null(self, name: str) -> Predicate:
        return self._leaf("isNull", name)

    def is_not_null(self, name: str) -> Predicate:
        return self._leaf("isNotNull", name)

    def is_in(self, name: str, values: Sequence[Any]) -> Predicate:
        return self._leaf("in", name, *values)

    def is_not_in(self, name: str, values: Sequence[Any]) -> Predicate:
        return self._leaf("notIn", name, *values)

    def between(self, name: str, low: Any, high: Any) -> Predicate:
        return self._leaf("between", name, low, high)

    def startswith(self, name: str, prefix: str) -> Predicate:
        return self._leaf("startsWith", name, prefix)

    @staticmethod
    def and_predicates(predicates: Sequence[Predicate]) -> Predicate:
        preds = tuple(p for p in predicates if p is not None)
        return preds[0] if len(preds) == 1 else Predicate("and", children=preds)

    @staticmethod
    def or_predicates(predicates: Sequence[Predicate]) -> Predicate:
        preds = tuple(p for p in predicates if p is not None)
        return preds[0] if len(preds) == 1 else Predicate("or", children=preds)
