"""Paimon BinaryRow: the byte form of partition values, min/max keys and bucket keys.

Layout (Java `BinaryRowWriter`): a header of ((arity + 63 + 8) // 64) * 8 bytes whose byte 0
is the row kind and whose bit (pos + 8) marks field `pos` null, one 8-byte little-endian slot
per field, then a variable part in whole 8-byte words. In manifests the row is preceded by its
arity as a 4-byte big-endian int. Null DECIMAL(p > 18) and TIMESTAMP(p > 3) fields still
reserve their zeroed variable-part bytes, as Java's projections and `RowHelper` write them.
"""

from __future__ import annotations

import datetime as dt
import decimal
import numbers
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine import types as T
from lakehouse_engine.errors import CorruptFileError, InvalidDataError, SchemaError
from lakehouse_engine.types import DataType

EMPTY_ROW: bytes = b"\x00\x00\x00\x00" + bytes(8)
"""The arity-0 row (an unpartitioned table's partition): arity prefix plus an empty header."""

_MASK64 = (1 << 64) - 1
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DATE = dt.date(1970, 1, 1)
_DEC_CTX = decimal.Context(prec=100)
_INT_BITS = {T.TINYINT: 8, T.SMALLINT: 16, T.INT: 32, T.BIGINT: 64}
_UNIT_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
Column: TypeAlias = "pa.Array | pa.ChunkedArray"


def header_size(arity: int) -> int:
    """Bytes of the row header (row kind plus null bits) for a row of `arity` fields."""
    return ((arity + 63 + 8) // 64) * 8


def _ts_unit(t: DataType) -> str:
    p = 6 if t.precision is None else t.precision
    return "s" if p == 0 else "ms" if p <= 3 else "us" if p <= 6 else "ns"


def _dec_ps(t: DataType) -> tuple[int, int]:
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
    unit = _UNIT_PER_SECOND[_ts_unit(t)]
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
    precision, scale = _dec_ps(t)
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
    if root in _INT_BITS:
        return _checked_int(value, _INT_BITS[root], t, name), None
    if root in (T.FLOAT, T.DOUBLE):
        if not isinstance(value, numbers.Real):
            raise TypeError
        if root == T.FLOAT:
            return struct.unpack("<I", struct.pack("<f", float(value)))[0], None
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


def _names(names: Sequence[str] | None, n: int) -> list[str]:
    return list(names) if names is not None else [f"#{i}" for i in range(n)]


def serialize_row(
    values: Sequence[object], types: Sequence[DataType], *, names: Sequence[str] | None = None
) -> bytes:
    """Serialize one row as manifests store it: 4-byte big-endian arity, then the BinaryRow.

    `names` (optional) only improves error messages; bad values raise InvalidDataError.
    """
    if len(values) != len(types):
        raise SchemaError(f"{len(values)} values given for a row of {len(types)} fields")
    arity, labels = len(types), _names(names, len(types))
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
    if root in _INT_BITS:
        bits = _INT_BITS[root]
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
        _, scale = _dec_ps(t)
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
    row, labels = data[4:], _names(names, arity)
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


# ---- many rows at once ---------------------------------------------------------------------


@dataclass
class RowBlock:
    """Many BinaryRows (no arity prefix): row i is `fixed[i]` bytes, then its variable bytes."""

    fixed: np.ndarray  # (n, fixed_size // 8) little-endian uint64 words: header, then slots
    var: np.ndarray  # uint8, every row's variable part back to back
    var_start: np.ndarray  # int64 (n,): where row i's variable part starts in `var`
    var_len: np.ndarray  # int64 (n,): its length, a multiple of 8

    @property
    def fixed_size(self) -> int:
        """Bytes of the fixed part (header plus slots), the same for every row."""
        return int(self.fixed.shape[1]) * 8


@dataclass
class _Encoded:
    """One column's contribution: slot words plus variable-part segments to copy."""

    null: np.ndarray  # bool per row
    slot: np.ndarray  # uint64 slot (low 32 bits only for rows with a segment)
    seg: np.ndarray | None = None  # int64 bytes reserved per row (multiple of 8; 0 = none)
    src: np.ndarray | None = None  # uint8 source of segment bytes
    src_start: np.ndarray | None = None  # int64 per row
    copy_len: np.ndarray | None = None  # int64 bytes to copy per row (<= seg)


def _excl_cumsum(a: np.ndarray) -> np.ndarray:
    out = np.zeros(len(a), np.int64)
    np.cumsum(a[:-1], out=out[1:])
    return out


def _copy_segments(dst: np.ndarray, dst_at: np.ndarray, enc: _Encoded) -> None:
    """Copy each row's segment bytes into `dst` (zeroed, 8-aligned rows), 8 bytes at a time."""
    assert enc.src is not None and enc.src_start is not None and enc.copy_len is not None
    rows = np.flatnonzero(enc.copy_len)
    lens = enc.copy_len[rows]
    nwords = (lens + 7) // 8
    total = int(nwords.sum())
    if total == 0:
        return
    word = np.arange(total, dtype=np.int64) - np.repeat(_excl_cumsum(nwords), nwords)
    padded = np.zeros((len(enc.src) + 23) // 8 * 8, np.uint8)  # whole words, plus one spare
    padded[: len(enc.src)] = enc.src
    src64 = padded.view("<u8")
    pos = np.repeat(enc.src_start[rows], nwords) + 8 * word
    quot, shift = pos >> 3, (pos & 7).astype(np.uint64) * np.uint64(8)
    value = src64[quot] >> shift  # an unaligned 8-byte little-endian read from two words
    value |= np.where(shift == 0, np.uint64(0), src64[quot + 1] << (np.uint64(64) - shift))
    valid = np.repeat(lens, nwords) - 8 * word  # bytes of this word inside the segment
    part = valid < 8
    value[part] &= (np.uint64(1) << (valid[part].astype(np.uint64) * np.uint64(8))) - np.uint64(1)
    dst.view("<u8")[(np.repeat(dst_at[rows], nwords) >> 3) + word] = value


def _cast(arr: pa.Array, target: pa.DataType, t: DataType, name: str) -> pa.Array:
    if arr.type == target:
        return arr
    try:
        return arr.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise InvalidDataError(f"field {name!r}: cannot store {arr.type} values as {t}: {e}") from e


def _ints(arr: pa.Array, int_type: pa.DataType) -> np.ndarray:
    """The array's raw integer values (nulls read as 0)."""
    return np.asarray(pc.fill_null(arr.view(int_type), 0).to_numpy(zero_copy_only=False))


def _encode_bytes(arr: pa.Array, null: np.ndarray, t: DataType, name: str) -> _Encoded:
    arr = _cast(arr, pa.large_binary(), t, name)
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], np.int64, count=arr.offset + n + 1)[arr.offset :]
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    start, length = offsets[:-1], np.where(null, 0, np.diff(offsets))
    inline = ~null & (length <= 7)
    words = np.zeros((n, 8), np.uint8)
    for k in range(7):
        rows = np.flatnonzero(inline & (length > k))
        words[rows, k] = data[start[rows] + k]
    words[inline, 7] = 0x80 | length[inline]
    slot = words.view("<u8")[:, 0].astype(np.uint64)
    far = length > 7
    slot[far] = length[far].astype(np.uint64)
    seg = np.where(far, (length + 7) // 8 * 8, 0)
    return _Encoded(null, slot, seg, data, start.astype(np.int64), np.where(far, length, 0))


def _encode_timestamp(arr: pa.Array, null: np.ndarray, t: DataType, name: str) -> _Encoded:
    unit = _ts_unit(t)
    if pa.types.is_integer(arr.type):
        v = _ints(_cast(arr, pa.int64(), t, name), pa.int64())
    elif pa.types.is_timestamp(arr.type):
        v = _ints(arr, pa.int64())
        factor = _UNIT_PER_SECOND[arr.type.unit] // _UNIT_PER_SECOND[unit]
        if factor > 1:
            v = v // factor
        elif factor == 0:
            v = v * (_UNIT_PER_SECOND[unit] // _UNIT_PER_SECOND[arr.type.unit])
    else:
        raise InvalidDataError(f"field {name!r}: cannot store {arr.type} values as {t}")
    per_milli = _UNIT_PER_SECOND[unit] // 1000
    if per_milli == 0:
        millis, nom = v * 1000, np.zeros_like(v)
    else:
        millis, rem = np.divmod(v, per_milli)
        nom = rem * (1_000_000 // per_milli)
    millis = np.where(null, 0, millis).astype(np.int64)
    if t.is_compact_timestamp:
        return _Encoded(null, millis.view(np.uint64))
    seg = np.full(len(v), 8, np.int64)
    src = millis.astype("<i8", copy=False).view(np.uint8)
    starts = np.arange(len(v), dtype=np.int64) * 8
    slot = np.where(null, 0, nom).astype(np.uint64)
    return _Encoded(null, slot, seg, src, starts, np.where(null, 0, 8))


def _encode_decimal(arr: pa.Array, null: np.ndarray, t: DataType, name: str) -> _Encoded:
    precision, scale = _dec_ps(t)
    if pa.types.is_decimal(arr.type) and arr.type.scale > scale:
        arr = pc.round(arr, scale, round_mode="half_towards_infinity")  # Java HALF_UP
    arr = _cast(arr, pa.decimal128(precision, scale), t, name)
    n = len(arr)
    raw = np.frombuffer(arr.buffers()[1], np.uint8, count=(arr.offset + n) * 16)
    le = raw.reshape(-1, 16)[arr.offset :]
    if t.is_compact_decimal:
        low = np.ascontiguousarray(le[:, :8]).view("<u8")[:, 0]
        return _Encoded(null, low.astype(np.uint64))
    be = le[:, ::-1]
    neg = be[:, 0] >= 0x80
    fill = np.where(neg, 0xFF, 0).astype(np.uint8)
    redundant = (be[:, :15] == fill[:, None]) & ((be[:, 1:] >> 7) == neg[:, None])
    lead = np.logical_and.accumulate(redundant, axis=1).sum(axis=1)
    length = 16 - lead
    cols = np.arange(16)
    minimal = np.take_along_axis(be, np.minimum(lead[:, None] + cols, 15), axis=1)
    minimal[cols[None, :] >= length[:, None]] = 0
    starts = np.arange(n, dtype=np.int64) * 16
    slot = np.where(null, 0, length).astype(np.uint64)
    seg = np.full(n, 16, np.int64)
    return _Encoded(null, slot, seg, minimal.ravel(), starts, np.where(null, 0, 16))


def _encode_column(col: Column, t: DataType, name: str) -> _Encoded:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if not isinstance(arr, pa.Array):
        arr = pa.array(arr, type=t.to_arrow())
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    null = np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    root = t.root
    if t.is_string or t.is_binary:
        return _encode_bytes(arr, null, t, name)
    if t.is_timestamp:
        return _encode_timestamp(arr, null, t, name)
    if t.is_decimal:
        return _encode_decimal(arr, null, t, name)
    if root == T.BOOLEAN:
        vals = pc.fill_null(_cast(arr, pa.bool_(), t, name), False).to_numpy(zero_copy_only=False)
        return _Encoded(null, np.asarray(vals, dtype=np.uint64))
    if root in _INT_BITS or root in (T.FLOAT, T.DOUBLE):
        target = t.to_arrow()
        width = target.bit_width // 8
        raw = _ints(_cast(arr, target, t, name), pa.from_numpy_dtype(np.dtype(f"i{width}")))
        return _Encoded(null, raw.view(f"u{width}").astype(np.uint64))
    if root == T.DATE:
        target = pa.int32() if pa.types.is_integer(arr.type) else pa.date32()
        days = _ints(_cast(arr, target, t, name), pa.int32())
        return _Encoded(null, days.view(np.uint32).astype(np.uint64))
    if root == T.TIME:
        if pa.types.is_integer(arr.type):
            millis = _ints(_cast(arr, pa.int32(), t, name), pa.int32())
        else:
            nanos = _ints(_cast(arr, pa.time64("ns"), t, name), pa.int64())
            millis = (nanos // 1_000_000).astype(np.int32)
        return _Encoded(null, millis.view(np.uint32).astype(np.uint64))
    raise SchemaError(f"field {name!r}: type {t} cannot be stored in a BinaryRow")


def encode_rows(
    columns: Sequence[Column], types: Sequence[DataType], *, names: Sequence[str] | None = None
) -> RowBlock:
    """Lay out many BinaryRows at once (vectorised), for hashing and serializing them."""
    if len(columns) != len(types):
        raise SchemaError(f"{len(columns)} columns given for a row of {len(types)} fields")
    if not columns:
        raise SchemaError("no columns given: an arity-0 row is EMPTY_ROW")
    n = len(columns[0])
    if any(len(c) != n for c in columns):
        raise SchemaError(f"columns differ in length: {[len(c) for c in columns]}")
    arity, labels = len(types), _names(names, len(types))
    hwords = header_size(arity) // 8
    fixed = np.zeros((n, hwords + arity), "<u8")
    encoded: list[tuple[int, _Encoded]] = []
    var_len = np.zeros(n, np.int64)
    for pos, (col, t, name) in enumerate(zip(columns, types, labels, strict=True)):
        enc = _encode_column(col, t, name)
        bit = pos + 8
        fixed[:, bit // 64] |= np.where(enc.null, np.uint64(1 << (bit % 64)), np.uint64(0))
        fixed[:, hwords + pos] = np.where(enc.null, np.uint64(0), enc.slot)
        if enc.seg is not None:
            encoded.append((pos, enc))
            var_len += enc.seg
    var_start = _excl_cumsum(var_len)
    var = np.zeros(int(var_len.sum()), np.uint8)
    within = np.zeros(n, np.int64)
    fixed_size = (hwords + arity) * 8
    for pos, enc in encoded:
        assert enc.seg is not None
        used = enc.seg > 0
        offset = (fixed_size + within[used]).astype(np.uint64) << np.uint64(32)
        fixed[used, hwords + pos] = offset | enc.slot[used]
        _copy_segments(var, var_start + within, enc)
        within += enc.seg
    return RowBlock(fixed, var, var_start, var_len)


def serialize_rows(
    columns: Sequence[Column], types: Sequence[DataType], *, names: Sequence[str] | None = None
) -> list[bytes]:
    """Serialize every row of the columns like `serialize_row` (arity prefix included)."""
    block = encode_rows(columns, types, names=names)
    prefix = struct.pack(">i", len(types))
    fixed = block.fixed.view(np.uint8)
    if not block.var.size:
        width = 4 + block.fixed_size
        whole = np.empty((len(fixed), width), np.uint8)
        whole[:, :4] = np.frombuffer(prefix, np.uint8)
        whole[:, 4:] = fixed
        buf = whole.tobytes()
        return [buf[i * width : (i + 1) * width] for i in range(len(fixed))]
    var = block.var.tobytes()
    starts, ends = block.var_start.tolist(), (block.var_start + block.var_len).tolist()
    return [prefix + fixed[i].tobytes() + var[starts[i] : ends[i]] for i in range(len(fixed))]
