"""Paimon's field aggregate functions, each folding whole columns of key groups at once.

A kernel gets one field's values for the records of every group, in fold order, with a flag
per record saying whether it retracts (-U/-D); it returns one value per group. Semantics follow
Paimon's FieldAggregators: nulls are skipped by the reducing functions, `sum` subtracts a
retraction, `count` decrements, `product` divides (a retraction before the first non-null
value finds no product and is dropped), `last_value` and `last_non_null_value` become null.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.errors import InvalidDataError
from lakehouse_engine.mergetree.merge_engines.groups import Segments, pick
from lakehouse_engine.mergetree.merge_engines.merge_options import (
    BOOL_AND,
    BOOL_OR,
    COUNT,
    FIELDS_PREFIX,
    FIRST_NON_NULL_VALUE,
    FIRST_VALUE,
    IGNORE_RETRACT_SUFFIX,
    LAST_NON_NULL_VALUE,
    LAST_VALUE,
    LISTAGG,
    MAX,
    MIN,
    PRODUCT,
    SUM,
    FieldAggregate,
)

Kernel = Callable[[FieldAggregate, pa.Array, np.ndarray, Segments, bool], pa.Array]


def aggregate(agg: FieldAggregate, name: str, values: pa.Array, retract: np.ndarray,
              segments: Segments, raw_count: bool = False) -> pa.Array:
    """Fold `values` per group of `segments` with `agg`; one value per group, of `values`' type.

    `raw_count`: the values are written records, not merged ones, so `count` counts them
    (a non-null value counts 1) instead of adding up the partial counts merged records hold.

    Raises:
        InvalidDataError: a retraction reaches a function that cannot retract, and the field
            does not set `fields.<f>.ignore-retract`.
    """
    if retract.any() and not agg.retracts:
        if not agg.ignore_retract:
            raise InvalidDataError(
                f"field '{name}' aggregates with '{agg.function}', which cannot retract, but "
                f"{int(retract.sum())} -U/-D record(s) arrived; set "
                f"'{FIELDS_PREFIX}{name}{IGNORE_RETRACT_SUFFIX}' = 'true' to ignore retractions")
        keep = ~retract
        values = values.filter(pa.array(keep))
        segments = Segments(segments.gids[keep], segments.groups)
        retract = retract[keep]
    result = _KERNELS[agg.function](agg, values, retract, segments, raw_count)
    return result if result.type == values.type else result.cast(values.type, safe=False)


def count_contribution(values: pa.Array) -> pa.Array:
    """What a written record adds to `count` when it stands alone: 1 for a value, 0 for null."""
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    return pa.array(valid.astype(np.int64)).cast(values.type, safe=False)


# ---- kernels ------------------------------------------------------------------------------------
def _valid(values: pa.Array) -> np.ndarray:
    if values.null_count == 0:
        return np.ones(len(values), dtype=bool)
    return values.is_valid().to_numpy(zero_copy_only=False)


def _is_numpy_numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def _sum(agg: FieldAggregate, values: pa.Array, retract: np.ndarray, seg: Segments,
         raw_count: bool) -> pa.Array:
    valid = _valid(values)
    present = seg.count(valid) > 0
    if _is_numpy_numeric(values.type):
        v = values.fill_null(0).to_numpy(zero_copy_only=False)
        # Integer sums wrap on overflow, as Java's int and long arithmetic does.
        total = seg.reduce(np.add, np.where(retract, -v, v), 0)
        return pa.array(total, values.type, mask=~present)
    signed = pc.if_else(pa.array(retract), pc.negate(values), values)
    return _fit_decimal(_grouped(signed, seg, "sum"), values.type)


def _count(agg: FieldAggregate, values: pa.Array, retract: np.ndarray, seg: Segments,
           raw_count: bool) -> pa.Array:
    if raw_count:
        one = _valid(values).astype(np.int64)
        contribution = np.where(retract, -one, one)
    else:
        partial = values.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        contribution = np.where(retract, -partial, partial)
    has_rows = seg.count(np.ones(len(values), dtype=bool)) > 0
    return pa.array(seg.reduce(np.add, contribution, 0), pa.int64(), mask=~has_rows)


def _product(agg: FieldAggregate, values: pa.Array, retract: np.ndarray, seg: Segments,
             raw_count: bool) -> pa.Array:
    valid = _valid(values)
    factor = valid & ~retract
    first = seg.first(factor)
    row_first = first[seg.gids] if len(seg.gids) else first[:0]
    # A retraction divides only a product that exists already (Paimon: null stays null).
    divisor = valid & retract & (row_first >= 0) & (seg.positions > row_first)
    present = first >= 0
    if _is_numpy_numeric(values.type):
        v = values.fill_null(1).to_numpy(zero_copy_only=False)
        num = seg.reduce(np.multiply, np.where(factor, v, 1).astype(v.dtype), 1)
        den = seg.reduce(np.multiply, np.where(divisor, v, 1).astype(v.dtype), 1)
        if pa.types.is_integer(values.type):
            if (den == 0).any():
                raise InvalidDataError("aggregate function 'product' cannot retract the value 0")
            # Java's integer division truncates toward zero.
            quotient = (np.abs(num) // np.abs(den)) * np.sign(num) * np.sign(den)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                quotient = num / den
        return pa.array(quotient.astype(v.dtype), values.type, mask=~present)
    null = pa.nulls(len(values), values.type)
    num_d = _grouped(pc.if_else(pa.array(factor), values, null), seg, "product")
    den_d = _grouped(pc.if_else(pa.array(divisor), values, null), seg, "product")
    if den_d.null_count == len(den_d):
        return _fit_decimal(num_d, values.type)
    quotient = _divide_decimals(num_d, den_d)
    return _fit_decimal(pc.if_else(den_d.is_null(), num_d.cast(quotient.type), quotient), values.type)


def _min(agg: FieldAggregate, values: pa.Array, retract: np.ndarray, seg: Segments,
         raw_count: bool) -> pa.Array:
    return _grouped(values, seg, "min")


def _max(agg: FieldAggregate, values: pa.Array, retract: np.ndarray, seg: Segments,
         raw_count: bool) -> pa.Array:
    return _grouped(values, seg, "max")


def _bool_and(agg: FieldAggregate, values: pa.Array, retract: np.ndarray, seg: Segments,
              raw_count: bool) -> pa.Array:
    return _grouped(values, seg, "all", pc.ScalarAggregateOptions(skip_nulls=True, min_count=1))


def _bool_or(agg: FieldAggregate, values: pa.Array, retract: np.ndarray, seg: Segments,
             raw_count: bool) -> pa.Array:
    return _grouped(values, seg, "any", pc.ScalarAggregateOptions(skip_nulls=True, min_count=1))


def _listagg(agg: FieldAggregate, values: pa.Array, retract: np.ndarray, seg: Segments,
             raw_count: bool) -> pa.Array:
    # Paimon skips null and blank strings; the rest are joined in fold order.
    blank = pc.equal(pc.utf8_trim_whitespace(values), "").fill_null(True)
    keep = ~blank.to_numpy(zero_copy_only=False)
    kept = values.filter(pa.array(keep))
    counts = np.bincount(seg.gids[keep], minlength=seg.groups)
    offsets = np.r_[0, np.cumsum(counts)].astype(np.int32)
    lists = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), kept)
    joined = pc.binary_join(lists, agg.delimiter)
    return pc.if_else(pa.array(counts > 0), joined, pa.nulls(seg.groups, joined.type))


def _last_value(agg: FieldAggregate, values: pa.Array, retract: np.ndarray, seg: Segments,
                raw_count: bool) -> pa.Array:
    last = seg.last(np.ones(len(values), dtype=bool))
    return pick(values, _unless_retracting(last, retract))


def _last_non_null_value(agg: FieldAggregate, values: pa.Array, retract: np.ndarray, seg: Segments,
                         raw_count: bool) -> pa.Array:
    # A retraction of a non-null value clears the field; of null, it changes nothing.
    last = seg.last(_valid(values))
    return pick(values, _unless_retracting(last, retract))


def _first_value(agg: FieldAggregate, values: pa.Array, retract: np.ndarray, seg: Segments,
                 raw_count: bool) -> pa.Array:
    return pick(values, seg.first(np.ones(len(values), dtype=bool)))


def _first_non_null_value(agg: FieldAggregate, values: pa.Array, retract: np.ndarray,
                          seg: Segments, raw_count: bool) -> pa.Array:
    return pick(values, seg.first(_valid(values)))


_KERNELS: dict[str, Kernel] = {
    SUM: _sum, COUNT: _count, PRODUCT: _product, MIN: _min, MAX: _max, BOOL_AND: _bool_and,
    BOOL_OR: _bool_or, LISTAGG: _listagg, LAST_VALUE: _last_value,
    LAST_NON_NULL_VALUE: _last_non_null_value, FIRST_VALUE: _first_value,
    FIRST_NON_NULL_VALUE: _first_non_null_value,
}


# ---- helpers ------------------------------------------------------------------------------------
def _unless_retracting(positions: np.ndarray, retract: np.ndarray) -> np.ndarray:
    """`positions`, with -1 where the record there is a retraction (its result is null)."""
    found = positions >= 0
    hit = np.zeros(len(positions), dtype=bool)
    hit[found] = retract[positions[found]]
    return np.where(hit, -1, positions)


def _grouped(values: pa.Array, seg: Segments, function: str,
             options: pc.FunctionOptions | None = None) -> pa.Array:
    """Arrow's hash aggregate `function` per group of `seg` (null for a group without rows)."""
    table = pa.table({"g": pa.array(seg.gids, pa.int64()), "v": values})
    spec = ("v", function, options) if options is not None else ("v", function)
    result = table.group_by("g", use_threads=False).aggregate([spec])
    where = np.full(seg.groups, -1, dtype=np.int64)
    where[result.column("g").to_numpy()] = np.arange(result.num_rows)
    return pick(result.column(f"v_{function}").combine_chunks(), where)


def _divide_decimals(num: pa.Array, den: pa.Array) -> pa.Array:
    """`num / den` rounded half up to their scale. Arrow sizes a quotient from its operands'
    precision, so the operands get the precision their values need, in 256-bit decimals."""
    scale = num.type.scale

    def precision(values: pa.Array) -> int:
        largest = pc.max(pc.abs(values)).as_py()
        digits = largest.adjusted() + 1 if largest else 1
        return max(digits, 1) + scale

    pn, pd = precision(num), precision(den)
    if pn + max(6, scale + pd + 1) > 76:
        raise InvalidDataError("aggregate function 'product' cannot retract from DECIMAL values "
                               "this large (the quotient exceeds 76 digits)")
    if pc.equal(den, pa.scalar(0, den.type)).fill_null(False).to_numpy(zero_copy_only=False).any():
        raise InvalidDataError("aggregate function 'product' cannot retract the value 0")
    quotient = pc.divide(num.cast(pa.decimal256(pn, scale)), den.cast(pa.decimal256(pd, scale)))
    return pc.round(quotient, ndigits=scale, round_mode="half_towards_infinity")


def _fit_decimal(values: pa.Array, t: pa.DataType) -> pa.Array:
    """`values` as decimal type `t`; a value with more digits than `t` holds becomes null, as
    Paimon's Decimal.fromBigDecimal makes it."""
    wide = pa.decimal256(76, t.scale)
    bound = pa.scalar(Decimal(10) ** (t.precision - t.scale), wide)
    fits = pc.less(pc.abs(values.cast(wide)), bound)
    return pc.if_else(fits, values, pa.nulls(len(values), values.type)).cast(t, safe=False)
