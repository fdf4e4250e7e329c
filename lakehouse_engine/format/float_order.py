"""FLOAT and DOUBLE keys ordered and compared as Java's `Double.compare` / `Float.compare` do.

Paimon compares key fields with Java's total order on floating point numbers: every NaN is one
value, greater than +Infinity, and -0.0 sorts before (and differs from) 0.0. IEEE comparison, which
NumPy, Arrow and Python use, says the opposite on both counts (NaN != NaN, -0.0 == 0.0), so key
columns are compared through an integer view of their bits instead. NaNs are also written with one
canonical bit pattern (Java's `Double.NaN`), so a NaN's BinaryRow bytes, bucket hash and key stats
do not depend on the payload bits a producer happened to leave in it.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np
import pyarrow as pa

# Java's Double.NaN and Float.NaN: doubleToLongBits / floatToIntBits map every NaN to these.
CANONICAL_NAN64 = 0x7FF8000000000000
CANONICAL_NAN32 = 0x7FC00000


def canonical_nan_bits(values: np.ndarray) -> np.ndarray:
    """The raw bits (uint32 for float32, uint64 for float64) of `values`, every NaN made canonical."""
    if values.dtype == np.float32:
        bits32 = values.view(np.uint32).copy()
        bits32[np.isnan(values)] = CANONICAL_NAN32
        return bits32
    as64 = values.astype(np.float64, copy=False)
    bits64 = as64.view(np.uint64).copy()
    bits64[np.isnan(as64)] = CANONICAL_NAN64
    return bits64


def total_order(values: np.ndarray) -> np.ndarray:
    """An int64 per float whose integer order is Java's `Double.compare` order (one NaN, -0.0 < 0.0)."""
    # Widening float32 to float64 keeps order, signs and NaN-ness, so one view serves both widths.
    signed = canonical_nan_bits(values.astype(np.float64, copy=False)).view(np.int64)
    # Negative floats order backwards as integers: flipping their magnitude bits reverses them.
    return np.where(signed < 0, signed ^ np.int64(0x7FFFFFFFFFFFFFFF), signed)


def comparable(value: Any) -> Any:
    """A key field value as Python compares it in Java's order: a float becomes its total-order int."""
    if isinstance(value, float):
        signed = CANONICAL_NAN64 if math.isnan(value) else struct.unpack("<q", struct.pack("<d", value))[0]
        return signed ^ 0x7FFFFFFFFFFFFFFF if signed < 0 else signed
    return value


def comparable_key(values: Any) -> tuple[Any, ...]:
    """A whole key (a sequence of field values) as a tuple that Python orders as Paimon does."""
    return tuple(comparable(v) for v in values)


def canonical_nan_array(arr: pa.Array) -> pa.Array:
    """A float array with every NaN replaced by the canonical NaN (other arrays unchanged)."""
    if not pa.types.is_floating(arr.type) or arr.type == pa.float16() or len(arr) == 0:
        return arr
    values = np.asarray(arr.to_numpy(zero_copy_only=False))
    nan = np.isnan(values)
    if arr.null_count:
        nan &= ~np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    if not nan.any():
        return arr
    fixed = canonical_nan_bits(values).view(values.dtype)
    mask = arr.is_null() if arr.null_count else None
    return pa.array(fixed, type=arr.type, mask=mask)
