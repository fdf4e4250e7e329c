"""Paimon BinaryRow: the byte form of partition values, min/max keys and bucket keys.

Layout (Java `BinaryRowWriter`): a header of ((arity + 63 + 8) // 64) * 8 bytes whose byte 0
is the row kind and whose bit (pos + 8) marks field `pos` null, one 8-byte little-endian slot
per field, then a variable part in whole 8-byte words. In manifests the row is preceded by its
arity as a 4-byte big-endian int. Null DECIMAL(p > 18) and TIMESTAMP(p > 3) fields still
reserve their zeroed variable-part bytes, as Java's projections and `RowHelper` write them.

This module encodes and decodes one row at a time; `binary_rows` lays out whole Arrow columns
of rows at once (vectorised), for hashing and for many keys.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import numbers
import struct
from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa

from lakehouse_engine import types as T
from lakehouse_engine.errors import CorruptFileError, InvalidDataError, SchemaError
from lakehouse_engine.format.float_order import CANONICAL_NAN32, CANONICAL_NAN64
from lakehouse_engine.types import DataType

EMPTY_ROW: bytes = b"\x00\x00\x00\x00" + bytes(8)
"""The arity-0 row (an unpartitioned table's partition): arity prefix plus an empty header."""

_MASK64 = (1 << 64) - 1
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DATE = dt.date(1970, 1, 1)
_DEC_CTX = decimal.Context(prec=100)
INT_BITS = {T.TINYINT: 8, T.SMALLINT: 16, T.INT: 32, T.BIGINT: 64}
UNIT_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
Column: TypeAlias = "pa.Array | pa.ChunkedArray"


def header_size(arity: int) -> int:
    """Bytes of the row header (row kind plus null bits) for a row of `arity` fields."""
    return ((arity + 63 + 8) // 64) * 8


def timestamp_unit(t: DataType) -> str:
    """The Arrow unit of a TIMESTAMP's precision: s (0), ms (1-3), us (4-6), ns (7-9)."""
    p = 6 if t.precision is None else t.precision
    return "s" if p == 0 else "ms" if p <= 3 else "us" if p <= 6 else "ns"


def decimal_precision_scale(t: DataType) -> tuple[int, int]:
    """A DECIMAL's (precision, scale), Paimon's defaults (10, 0) where unset."""
    return (10 if t.precision is None else t.precision), (t.scale or 0)


def _java_len(unscaled: int) -> int:
    """Length of Java `BigInteger.toByteArray()`: bitLength() / 8 + 1."""
    bits = unscaled.bit_length() if unscaled >= 0 else (~unscaled).bit_length()
    return bits // 8 + 1


def _null_reservation(t: DataType) -> int:
    """Zeroed variable-part bytes a null field of this type still reserves."""
    if t.is_decimal and not t.is_compact_decimal:
        return 16
    if t.is_timestamp and not t.is_compact_timestamp:
        return 8
    return 0


# ---- one row -------------------------------------------------------------------------------


def _timestamp_nanos(value: object, t: DataType) -> int:
    unit = UNIT_PER_SECOND[timestamp_unit(t)]
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        td = value - _EPOCH
        micros = (td.days * 86_400 + td.seconds) * 1_000_000 + td.microseconds
        nanos = micros * 1000 + int(getattr(value, "nanosecond", 0))
    elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
        nanos = int(value) * (1_000_000_000 // unit)
    else:
        raise TypeError
    step = 1_000_000_000 // unit
    return nanos // step * step


def _unscaled(value: object, t: DataType, name: str) -> int:
    precision, scale = decimal_precision_scale(t)
    if isinstance(value, decimal.Decimal):
        d = value
    elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
        d = decimal.Decimal(int(value))
    elif isinstance(value, float):
        d = decimal.Decimal(repr(value))
    else:
        raise TypeError
    if not d.is_finite():
        raise InvalidDataError(f"field {name!r} ({t}): {value!r} is not a finite decimal")
    q = d.quantize(decimal.Decimal(1).scaleb(-scale), decimal.ROUND_HALF_UP, _DEC_CTX)
    unscaled = int(q.scaleb(scale, _DEC_CTX))
    if abs(unscaled) >= 10**precision:
        raise InvalidDataError(f"field {name!r}: {value!r} does not fit {t}")
    return unscaled


def _checked_int(value: object, bits: int, t: DataType, name: str) -> int:
    if not isinstance(value, numbers.Integral):
        raise TypeError
    v = int(value)
    if not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
        raise InvalidDataError(f"field {name!r}: {v} is out of range for {t.root}")
    return v & ((1 << bits) - 1)


def _encode_value(value: object, t: DataType, name: str) -> tuple[int, bytes | None]:
    """(slot, None) for a value held in its slot, or (low 32 slot bits, variable-part bytes)."""
    root = t.root
    if t.is_string or t.is_binary:
        if isinstance(value, str):
            raw = value.encode("utf-8")
        elif isinstance(value, (bytes, bytearray, memoryview)):
            raw = bytes(value)
        else:
            raise TypeError
        if len(raw) <= 7:
            return int.from_bytes(raw, "little") | ((0x80 | len(raw)) << 56), None
        return len(raw), raw + bytes(-len(raw) % 8)
    if root == T.BOOLEAN:
        if not isinstance(value, (bool, np.bool_, numbers.Integral)) or int(value) not in (0, 1):
            raise TypeError
        return int(value), None
    if root in INT_BITS:
        return _checked_int(value, INT_BITS[root], t, name), None
    if root in (T.FLOAT, T.DOUBLE):
        if not isinstance(value, numbers.Real):
            raise TypeError
        # Every NaN as Java's canonical NaN, so its key bytes and bucket do not depend on payload bits.
        if root == T.FLOAT:
            if math.isnan(value):
                return CANONICAL_NAN32, None
            return struct.unpack("<I", struct.pack("<f", float(value)))[0], None
        if math.isnan(value):
            return CANONICAL_NAN64, None
        return struct.unpack("<Q", struct.pack("<d", float(value)))[0], None
    if root == T.DATE:
        if isinstance(value, dt.datetime):
            value = value.date()
        days = (value - _EPOCH_DATE).days if isinstance(value, dt.date) else value
        return _checked_int(days, 32, t, name), None
    if root == T.TIME:
        if isinstance(value, dt.time):
            secs = (value.hour * 60 + value.minute) * 60 + value.second
            value = secs * 1000 + value.microsecond // 1000
        return _checked_int(value, 32, t, name), None
    if t.is_timestamp:
        millis, nano_of_milli = divmod(_timestamp_nanos(value, t), 1_000_000)
        millis_bits = _checked_int(millis, 64, t, name)
        if t.is_compact_timestamp:
            return millis_bits, None
        return nano_of_milli, struct.pack("<Q", millis_bits)
    if t.is_decimal:
        unscaled = _unscaled(value, t, name)
        if t.is_compact_decimal:
            return unscaled & _MASK64, None
        raw = unscaled.to_bytes(_java_len(unscaled), "big", signed=True)
        return len(raw), raw + bytes(16 - len(raw))
    raise SchemaError(f"field {name!r}: type {t} cannot be stored in a BinaryRow")


def field_labels(names: Sequence[str] | None, n: int) -> list[str]:
    """The names of a row's fields for error messages (`#i` when not given)."""
    return list(names) if names is not None else [f"#{i}" for i in range(n)]


def serialize_row(
    values: Sequence[object], types: Sequence[DataType], *, names: Sequence[str] | None = None
) -> bytes:
    """Serialize one row as manifests store it: 4-byte big-endian arity, then the BinaryRow.

    `names` (optional) only improves error messages; bad values raise InvalidDataError.
    """
    if len(values) != len(types):
        raise SchemaError(f"{len(values)} values given for a row of {len(types)} fields")
    arity, labels = len(types), field_labels(names, len(types))
    hsize = header_size(arity)
    fixed = bytearray(hsize + 8 * arity)
    var: list[bytes] = []
    cursor = len(fixed)
    for pos, (value, t, name) in enumerate(zip(values, types, labels, strict=True)):
        if value is None:
            fixed[(pos + 8) // 8] |= 1 << ((pos + 8) % 8)
            reserve = _null_reservation(t)
            slot, extra = (0, bytes(reserve)) if reserve else (0, None)
        else:
            try:
                slot, extra = _encode_value(value, t, name)
            except TypeError:
                raise InvalidDataError(
                    f"field {name!r}: {type(value).__name__} value {value!r} is not a valid {t}"
                ) from None
        if extra is not None:
            slot |= cursor << 32
            var.append(extra)
            cursor += len(extra)
        struct.pack_into("<Q", fixed, hsize + 8 * pos, slot)
    return struct.pack(">i", arity) + bytes(fixed) + b"".join(var)


# ---- reading -------------------------------------------------------------------------------


def _var_bytes(row: bytes, offset: int, length: int, name: str) -> bytes:
    if offset + length > len(row):
        raise CorruptFileError(
            f"BinaryRow field {name!r} points at bytes {offset}..{offset + length} "
            f"beyond the {len(row)}-byte row"
        )
    return row[offset : offset + length]


def _decode_value(row: bytes, slot_at: int, t: DataType, name: str) -> object:
    (slot,) = struct.unpack_from("<Q", row, slot_at)
    offset, low = slot >> 32, slot & 0xFFFFFFFF
    root = t.root
    if t.is_string or t.is_binary:
        if slot >> 63:
            length = (slot >> 56) & 0x7F
            if length > 7:
                raise CorruptFileError(f"BinaryRow field {name!r}: inline length {length} > 7")
            raw = row[slot_at : slot_at + length]
        else:
            raw = _var_bytes(row, offset, low, name)
        if t.is_binary:
            return raw
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptFileError(f"BinaryRow field {name!r}: invalid UTF-8 ({e})") from e
    if root == T.BOOLEAN:
        return row[slot_at] != 0
    if root in INT_BITS:
        bits = INT_BITS[root]
        v = slot & ((1 << bits) - 1)
        return v - (1 << bits) if v >> (bits - 1) else v
    if root == T.FLOAT:
        return struct.unpack_from("<f", row, slot_at)[0]
    if root == T.DOUBLE:
        return struct.unpack_from("<d", row, slot_at)[0]
    if root == T.DATE:
        (days,) = struct.unpack_from("<i", row, slot_at)
        return _EPOCH_DATE + dt.timedelta(days=days)
    if root == T.TIME:
        (millis,) = struct.unpack_from("<i", row, slot_at)
        if not 0 <= millis < 86_400_000:
            raise CorruptFileError(f"BinaryRow field {name!r}: TIME value {millis} out of range")
        secs, ms = divmod(millis, 1000)
        return dt.time(secs // 3600, secs // 60 % 60, secs % 60, ms * 1000)
    if t.is_timestamp:
        if t.is_compact_timestamp:
            (millis,) = struct.unpack_from("<q", row, slot_at)
            nano_of_milli = 0
        else:
            (millis,) = struct.unpack("<q", _var_bytes(row, offset, 8, name))
            nano_of_milli = low
            if nano_of_milli >= 1_000_000:
                raise CorruptFileError(f"BinaryRow field {name!r}: nanos {low} >= 1,000,000")
        return _EPOCH + dt.timedelta(microseconds=millis * 1000 + nano_of_milli // 1000)
    if t.is_decimal:
        _, scale = decimal_precision_scale(t)
        if t.is_compact_decimal:
            (unscaled,) = struct.unpack_from("<q", row, slot_at)
        else:
            if low > 16:
                raise CorruptFileError(f"BinaryRow field {name!r}: decimal of {low} bytes > 16")
            unscaled = int.from_bytes(_var_bytes(row, offset, low, name), "big", signed=True)
        return decimal.Decimal(f"{unscaled}E{-scale}")
    raise SchemaError(f"field {name!r}: type {t} cannot be read from a BinaryRow")


def deserialize_row(
    data: bytes, types: Sequence[DataType], *, names: Sequence[str] | None = None
) -> list[object]:
    """Decode a manifest BinaryRow (arity prefix included) into Python values (None for null).

    Timestamps come back as naive datetimes (UTC wall time for TIMESTAMP_LTZ), truncated to
    microseconds; truncated or inconsistent bytes raise CorruptFileError.
    """
    data = bytes(data)
    if len(data) < 4:
        raise CorruptFileError(f"BinaryRow of {len(data)} bytes has no arity prefix")
    (arity,) = struct.unpack_from(">i", data, 0)
    if arity != len(types):
        raise CorruptFileError(f"BinaryRow has arity {arity}, expected {len(types)} fields")
    row, labels = data[4:], field_labels(names, arity)
    hsize = header_size(arity)
    if len(row) < hsize + 8 * arity:
        raise CorruptFileError(
            f"BinaryRow of arity {arity} needs {hsize + 8 * arity} bytes, has {len(row)}"
        )
    out: list[object] = []
    for pos, (t, name) in enumerate(zip(types, labels, strict=True)):
        if row[(pos + 8) // 8] >> ((pos + 8) % 8) & 1:
            out.append(None)
            continue
        try:
            out.append(_decode_value(row, hsize + 8 * pos, t, name))
        except (OverflowError, ValueError) as e:
            raise CorruptFileError(f"BinaryRow field {name!r} ({t}): {e}") from e
    return out


# ---- pypaimon's shapes -----------------------------------------------------------------------


class BinaryRowBytes(bytes):
    """A serialized BinaryRow as manifests hold it (arity prefix included): the bytes themselves,
    also named `.data` as pypaimon's `BinaryRow` names them (`key_stats.min_values.data`)."""

    __slots__ = ()

    @property
    def data(self) -> bytes:
        return bytes(self)


class DecodedRow:
    """A BinaryRow decoded by its fields, as pypaimon's `GenericRow`: `values`, `fields`,
    `get_field(i)` and `to_dict()`."""

    def __init__(self, values: list[object], fields: Sequence[Any]):
        self.values = values
        self.fields = list(fields)

    def get_field(self, pos: int) -> object:
        return self.values[pos]

    def to_dict(self) -> dict[str, object]:
        return {f.name: v for f, v in zip(self.fields, self.values, strict=True)}

    def __len__(self) -> int:
        return len(self.values)


class BinaryRowDeserializer:
    """pypaimon's `GenericRowDeserializer`: decodes a BinaryRow's bytes by the fields it holds."""

    @staticmethod
    def from_bytes(data: bytes, fields: Sequence[Any]) -> DecodedRow:
        """The row `data` (as `serialize_row` writes it) holds for `fields` (objects with `.name`
        and a Paimon `.type`: DataFields); CorruptFileError when the bytes do not fit them."""
        if not data:
            return DecodedRow([], [])
        names = [f.name for f in fields]
        return DecodedRow(deserialize_row(data, [f.type for f in fields], names=names), fields)
