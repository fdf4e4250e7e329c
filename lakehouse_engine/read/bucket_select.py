"""Bucket pruning for fixed-bucket tables: the buckets a predicate's bucket-key literals hash to.

A read whose filter fixes every bucket-key field by `=` or `IN` (through AND and OR) needs only
the buckets those values hash to, as Paimon's `BucketSelectConverter` finds. The predicate is
first specialised to each partition (a leaf on a partition field becomes true or false there), so
`(part = 'a' AND id = 1) OR (part = 'b' AND id = 2)` reads one bucket in each partition.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from lakehouse_engine.format.bucket_hash import bucket_of, hash_rows
from lakehouse_engine.read.predicate import Predicate
from lakehouse_engine.types import DataType

# More literal combinations than this: read every bucket rather than hash them all.
_MAX_COMBINATIONS = 1024

# A predicate after specialisation: True (every row may match), False (none does), or what remains.
Specialised = Predicate | bool


def specialise(predicate: Predicate, values: Mapping[str, Any]) -> Specialised:
    """`predicate` with its leaves on the fields of `values` (a partition's) decided."""
    if predicate.method in ("and", "or"):
        is_and = predicate.method == "and"
        kept: list[Predicate] = []
        for child in predicate.children:
            part = specialise(child, values)
            if part is (not is_and):  # False in an AND, True in an OR decides the whole
                return part
            if isinstance(part, Predicate):
                kept.append(part)
        if not kept:
            return is_and
        return kept[0] if len(kept) == 1 else Predicate(predicate.method, children=tuple(kept))
    if predicate.field is not None and predicate.field in values:
        value = values[predicate.field]
        return predicate.may_match({predicate.field: (value, value)})
    return predicate


def _assignments(predicate: Predicate, keys: frozenset[str]) -> list[dict[str, Any]] | None:
    """The bucket-key values the predicate allows, as partial assignments; None when any value may
    (the predicate does not pin the keys)."""
    m = predicate.method
    if m == "and":
        combos: list[dict[str, Any]] = [{}]
        for child in predicate.children:
            allowed = _assignments(child, keys)
            if allowed is None:
                continue
            merged = []
            for a, b in itertools.product(combos, allowed):
                if all(a[k] == v for k, v in b.items() if k in a):
                    merged.append(a | b)
            if len(merged) > _MAX_COMBINATIONS:
                return None
            combos = merged
        return combos
    if m == "or":
        union: list[dict[str, Any]] = []
        for child in predicate.children:
            allowed = _assignments(child, keys)
            if allowed is None:
                return None
            union.extend(allowed)
        return union
    if predicate.field not in keys:
        return None
    if m == "equal":
        value = predicate.literals[0]
        return [] if value is None else [{predicate.field: value}]
    if m == "in":
        return [{predicate.field: v} for v in predicate.literals if v is not None]
    return None


def select_buckets(predicate: Specialised, bucket_keys: Sequence[str], key_types: Sequence[DataType],
                   total_buckets: int) -> set[int] | None:
    """The buckets (of `total_buckets`) rows matching `predicate` can be in; None for all of them."""
    if predicate is False:
        return set()
    if predicate is True or not bucket_keys or total_buckets <= 0:
        return None
    assert isinstance(predicate, Predicate)
    combos = _assignments(predicate, frozenset(bucket_keys))
    if combos is None or any(len(c) != len(bucket_keys) for c in combos):
        return None
    if not combos:
        return set()
    try:
        columns = [pa.array([c[k] for c in combos], type=t.to_arrow())
                   for k, t in zip(bucket_keys, key_types, strict=True)]
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return None  # a literal the key type cannot hold: no pruning, never a wrong answer
    return {int(b) for b in bucket_of(hash_rows(columns, key_types), total_buckets)}
