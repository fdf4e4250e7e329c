"""Predicates: built as in pypaimon, used both to prune files by statistics and to filter rows."""

from __future__ import annotations

import dataclasses
import decimal
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.errors import SchemaError
from lakehouse_engine.format.float_order import comparable, total_order

_COMPARISONS = ("equal", "notEqual", "lessThan", "lessOrEqual", "greaterThan", "greaterOrEqual")


@dataclass(frozen=True)
class Predicate:
    """A leaf (`method` on `field` with `literals`) or a compound (`and`/`or` of `children`).

    Also built as pypaimon builds it, `Predicate(method, index, field, literals)` (positional or by
    keyword), where an `and`/`or` holds its children in `literals`; `index` is the field's position,
    kept for pypaimon code that reads it.
    """

    method: str
    field: str | None = None
    literals: tuple[Any, ...] = ()
    children: tuple[Predicate, ...] = ()
    arrow_type: pa.DataType | None = None
    index: int | None = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        # pypaimon's positional form: (method, index, field, literals) lands as
        # field=index, literals=field, children=literals.
        if isinstance(self.field, int) and not isinstance(self.field, bool) and (
                self.literals is None or isinstance(self.literals, str)):
            index, name, literals = self.field, self.literals, self.children
            object.__setattr__(self, "index", index)
            object.__setattr__(self, "field", name)
            object.__setattr__(self, "literals", literals)
            object.__setattr__(self, "children", ())
        if self.literals is None:
            object.__setattr__(self, "literals", ())
        elif not isinstance(self.literals, tuple):
            object.__setattr__(self, "literals", tuple(self.literals))
        if self.method in ("and", "or") and not self.children and self.literals:
            object.__setattr__(self, "children", self.literals)  # pypaimon keeps children in literals
            object.__setattr__(self, "literals", ())

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

    def _is_float(self) -> bool:
        """Whether this is a leaf on a FLOAT or DOUBLE field (compared as Java's Double.compare)."""
        if self.children or self.field is None:
            return False
        if self.arrow_type is not None:
            return pa.types.is_floating(self.arrow_type)
        return any(isinstance(v, float) for v in self.literals)

    def _float_fields(self) -> set[str]:
        if self.children:
            return set().union(*(c._float_fields() for c in self.children))
        return {self.field} if self.field is not None and self._is_float() else set()

    def _order_literal(self, value: Any) -> Any:
        """A literal of a FLOAT/DOUBLE leaf as its total-order int (None stays None)."""
        if value is None or isinstance(value, bool) or not isinstance(value, int | float | decimal.Decimal):
            return value
        v = float(value)
        if self.arrow_type is not None and self.arrow_type == pa.float32():
            v = float(np.float32(v))  # compared as a FLOAT, as Java converts the literal
        return comparable(v)

    # ---- rows --------------------------------------------------------------------
    def to_arrow(self) -> pc.Expression:
        """The predicate as an Arrow compute expression (SQL semantics: null compares false).

        FLOAT and DOUBLE leaves compare the total-order column `filter_table` adds (Java's
        Double.compare: `= NaN` matches NaN, -0.0 and 0.0 differ, NaN is above +Infinity); use
        `filter_table` to filter rows.
        """
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
        if self._is_float():
            return self._float_expression()
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
            # SQL: a null never equals anything, so `is_in([None])` matches no row (Arrow's
            # is_in would match null rows to a null in the set).
            return f.isin(self._value_set()) & f.is_valid()
        if m == "notIn":
            if any(v is None for v in self.literals):
                return pc.scalar(False)  # SQL: `x NOT IN (.., NULL)` is never true
            return ~f.isin(self._value_set()) & f.is_valid()
        if m == "between":
            return (f >= self._literal(self.literals[0])) & (f <= self._literal(self.literals[1]))
        if m == "notBetween":
            return (f < self._literal(self.literals[0])) | (f > self._literal(self.literals[1]))
        if m == "startsWith":
            return pc.starts_with(f, pattern=str(lit))
        if m == "endsWith":
            return pc.ends_with(f, pattern=str(lit))
        if m == "contains":
            return pc.match_substring(f, pattern=str(lit))
        if m == "like":
            return pc.match_like(f, pattern=str(lit))
        raise SchemaError(f"unknown predicate method {m!r}")

    def _value_set(self) -> Any:
        values = [v for v in self.literals if v is not None]
        if self.arrow_type is None:
            return pa.array(values) if values else pa.array([], pa.null())
        try:
            return pa.array([self._coerce(v) for v in values], type=self.arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
            return values

    def _float_expression(self) -> pc.Expression:
        """A FLOAT/DOUBLE leaf over the field's total-order int64 column (`_ORDER_PREFIX`)."""
        m = self.method
        f = pc.field(_ORDER_PREFIX + str(self.field))
        lits = [self._order_literal(v) for v in self.literals]
        if m in ("isNull", "isNotNull", "startsWith"):
            return pc.field(self.field).is_null() if m == "isNull" else (
                pc.field(self.field).is_valid() if m == "isNotNull" else pc.scalar(False))
        if m in ("in", "notIn"):
            if m == "notIn" and any(v is None for v in lits):
                return pc.scalar(False)  # SQL: `x NOT IN (.., NULL)` is never true
            values = pa.array([v for v in lits if v is not None], type=pa.int64())
            return f.isin(values) if m == "in" else ~f.isin(values) & f.is_valid()
        if m == "between":
            return (f >= pc.scalar(lits[0])) & (f <= pc.scalar(lits[1]))
        if lits[0] is None:
            return pc.scalar(None, type=pa.bool_())  # a comparison with null is never true
        lit = pc.scalar(lits[0])
        ops = {"equal": f.__eq__, "notEqual": f.__ne__, "lessThan": f.__lt__,
               "lessOrEqual": f.__le__, "greaterThan": f.__gt__, "greaterOrEqual": f.__ge__}
        if m not in ops:
            raise SchemaError(f"unknown predicate method {m!r}")
        return ops[m](lit)

    def filter_table(self, table: pa.Table) -> pa.Table:
        """The rows of `table` that satisfy the predicate (FLOAT/DOUBLE fields as Java compares)."""
        floats = sorted(self._float_fields() & set(table.column_names))
        if not floats:
            return table.filter(self.to_arrow())
        extended = table
        for name in floats:
            extended = extended.append_column(_ORDER_PREFIX + name, _total_order_column(table.column(name)))
        return extended.filter(self.to_arrow()).drop_columns([_ORDER_PREFIX + n for n in floats])

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
        if self._is_float() and lo is not None and hi is not None:
            # Java's order (Double.compare). Writers that take statistics with IEEE min/max
            # (pypaimon's pyarrow) leave NaN out of them and may record 0.0 for a -0.0: the upper
            # bound is taken as NaN (the top of the order) and a zero lower bound as -0.0.
            try:
                low = -0.0 if float(lo) == 0.0 else float(lo)
                literals = tuple(self._order_literal(v) for v in self.literals)
                return _leaf_may_match(m, comparable(low), comparable(math.nan), literals)
            except (TypeError, ValueError):
                return True
        if _is_nan(lo) or _is_nan(hi):
            return True  # a NaN bound orders nowhere under IEEE comparison: no pruning
        try:
            return _leaf_may_match(m, lo, hi, self.literals)
        except TypeError:
            return True


_ORDER_PREFIX = "\x00total-order:"


def _total_order_column(column: pa.ChunkedArray) -> pa.Array:
    """A FLOAT/DOUBLE column as int64s in Java's order (nulls stay null)."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    values = np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.float64)
    mask = np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool) if arr.null_count else None
    return pa.array(total_order(values), type=pa.int64(), mask=mask)


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _leaf_may_match(m: str, lo: Any, hi: Any, literals: tuple[Any, ...]) -> bool:
    if m == "isNull":
        return lo is None or hi is None
    if m == "isNotNull":
        return not (lo is None and hi is None)
    if m == "notIn" and any(v is None for v in literals):
        return False  # SQL: `x NOT IN (.., NULL)` is never true
    if lo is None or hi is None:
        return m in ("notEqual", "notIn")
    if m == "in":
        return any(v is not None and lo <= v <= hi for v in literals)
    if m == "notIn":
        return not (lo == hi and lo in literals)
    if m == "between":
        return not (literals[1] < lo or literals[0] > hi)
    if m == "notBetween":
        return not (literals[0] <= lo and hi <= literals[1])
    if m in ("startsWith", "endsWith", "contains", "like"):
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

    def __init__(self, field_names: Sequence[Any], arrow_types: Mapping[str, pa.DataType] | None = None):
        # pypaimon builds it from the table's DataFields (`PredicateBuilder(table.fields)`).
        fields = [f for f in field_names if not isinstance(f, str)]
        self.field_names = [f if isinstance(f, str) else f.name for f in field_names]
        self.arrow_types = {f.name: f.type.to_arrow() for f in fields} | dict(arrow_types or {})

    def _leaf(self, method: str, name: str, *literals: Any) -> Predicate:
        if name not in self.field_names:
            # pypaimon's words, which its users' code matches.
            raise SchemaError(f"The field {name} is not in field list {self.field_names}.")
        arrow_type = self.arrow_types.get(name)
        if arrow_type is not None and pa.types.is_nested(arrow_type) and method not in ("isNull", "isNotNull"):
            raise SchemaError(f"predicate {method} on field '{name}' of nested type {arrow_type}: "
                              f"ARRAY, MAP and ROW columns take is_null / is_not_null only")
        return Predicate(method, name, tuple(literals), arrow_type=arrow_type,
                         index=self.field_names.index(name))

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

    def not_between(self, name: str, low: Any, high: Any) -> Predicate:
        """Values below `low` or above `high` (nulls never match)."""
        return self._leaf("notBetween", name, low, high)

    def startswith(self, name: str, prefix: str) -> Predicate:
        return self._leaf("startsWith", name, prefix)

    def endswith(self, name: str, suffix: str) -> Predicate:
        return self._leaf("endsWith", name, suffix)

    def contains(self, name: str, substring: str) -> Predicate:
        return self._leaf("contains", name, substring)

    def like(self, name: str, pattern: str) -> Predicate:
        """SQL LIKE: `%` any text, `_` one character (`\\` escapes them), as pypaimon's `like`."""
        return self._leaf("like", name, pattern)

    @staticmethod
    def and_predicates(predicates: Sequence[Predicate]) -> Predicate:
        preds = tuple(p for p in predicates if p is not None)
        return preds[0] if len(preds) == 1 else Predicate("and", children=preds)

    @staticmethod
    def or_predicates(predicates: Sequence[Predicate]) -> Predicate:
        preds = tuple(p for p in predicates if p is not None)
        return preds[0] if len(preds) == 1 else Predicate("or", children=preds)
