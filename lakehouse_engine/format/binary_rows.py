"""Paimon BinaryRows of whole Arrow columns at once (vectorised NumPy), for bucket hashing and
for serializing many keys: the same bytes as `binary_row.serialize_row` gives row by row."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine import types as T
from lakehouse_engine.errors import InvalidDataError, SchemaError
from lakehouse_engine.format.binary_row import (
    INT_BITS,
    UNIT_PER_SECOND,
    Column,
    decimal_precision_scale,
    field_labels,
    header_size,
    timestamp_unit,
)
from lakehouse_engine.format.float_order import canonical_nan_bits
from lakehouse_engine.types import DataType


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
    unit = timestamp_unit(t)
    if pa.types.is_integer(arr.type):
        v = _ints(_cast(arr, pa.int64(), t, name), pa.int64())
    elif pa.types.is_timestamp(arr.type):
        v = _ints(arr, pa.int64())
        factor = UNIT_PER_SECOND[arr.type.unit] // UNIT_PER_SECOND[unit]
        if factor > 1:
            v = v // factor
        elif factor == 0:
            v = v * (UNIT_PER_SECOND[unit] // UNIT_PER_SECOND[arr.type.unit])
    else:
        raise InvalidDataError(f"field {name!r}: cannot store {arr.type} values as {t}")
    per_milli = UNIT_PER_SECOND[unit] // 1000
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
    precision, scale = decimal_precision_scale(t)
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
    if root in (T.FLOAT, T.DOUBLE):
        values = _cast(arr, t.to_arrow(), t, name).to_numpy(zero_copy_only=False)
        # Nulls read as NaN here; their slots are zeroed by the caller.
        return _Encoded(null, canonical_nan_bits(np.asarray(values)).astype(np.uint64))
    if root in INT_BITS:
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
    arity, labels = len(types), field_labels(names, len(types))
    hwords = header_size(arity) // 8
    fixed = np.zeros((n, hwords + arity), "<u8")
    encoded: list[tuple[int, _Encoded]] = []
    var_len = np.zeros(n, np.int64)
    for pos, (col, t, name) in enumerate(zip(columns, types, labels, strict=True)):
        enc = _encode_column(col, t, name)
        bit = pos + 8
        if enc.null.any():
            fixed[:, bit // 64] |= np.where(enc.null, np.uint64(1 << (bit % 64)), np.uint64(0))
            fixed[:, hwords + pos] = np.where(enc.null, np.uint64(0), enc.slot)
        else:  # no null bit to set, no slot to clear
            fixed[:, hwords + pos] = enc.slot
        if enc.seg is not None:
            encoded.append((pos, enc))
            var_len += enc.seg
    # Rows of fixed-width fields only have no variable part: every start is 0.
    var_start = _excl_cumsum(var_len) if encoded else np.zeros(n, np.int64)
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
