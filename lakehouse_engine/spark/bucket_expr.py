"""Paimon's bucket hash as Spark column expressions: buckets computed in the JVM, no row in Python.

Java's `BinaryRow.hashCode()` is MurmurHash3 (x86, 32-bit, seed 42) over the row's bytes read as
little-endian 4-byte words, and a BinaryRow is a whole number of 8-byte words. Spark's
`hash(binary)` is `Murmur3_x86_32.hashUnsafeBytes(bytes, seed = 42)`: for a length that is a
multiple of 4 it runs exactly the same rounds and finalizer. So we build each key's BinaryRow bytes
with Spark expressions (header with the null bits, one 8-byte slot per field, then the variable
part) and call `hash` on them: Paimon's hash, computed by Spark's generated code, with no row
crossing into Python. `tests/lakehouse_engine/spark/test_bucket_expr.py` checks it bit for bit
against the engine's `hash_rows`.

Types laid out here: BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, DATE, CHAR, VARCHAR/STRING, BINARY,
VARBINARY (the usual key types). `key_hash_expression` returns None for others (timestamps,
decimals, floating point, TIME), and for DataFrame columns whose Spark type is not the table's;
callers then hash in Python with an Arrow UDF that receives only the key columns.

Writes do not use this (their rows go to Python anyway, where `routing.RowPacker` hashes them);
`routing.bucket_column` does, for jobs that only count or group rows by bucket.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DateType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
)
from pyspark.sql.types import (
    DataType as SparkType,
)

from lakehouse_engine import types as t
from lakehouse_engine.format.binary_row import header_size

# Integer roots: the width in bytes and the mask that keeps the bytes Paimon writes into the slot.
_INTEGER_LAYOUT: dict[str, tuple[int, int]] = {
    t.TINYINT: (1, 0xFF),
    t.SMALLINT: (2, 0xFFFF),
    t.INT: (4, 0xFFFFFFFF),
    t.BIGINT: (8, -1),
}
# The width of Spark's integer types: a column may be widened exactly to a wider key type.
_SPARK_INTEGER_WIDTH: dict[type[SparkType], int] = {ByteType: 1, ShortType: 2, IntegerType: 4, LongType: 8}
# A header of one 8-byte word holds the row kind byte and the null bits of up to 56 fields.
_MAX_ONE_WORD_ARITY = 56


def _little_endian_word(value: Column) -> Column:
    """The 8 little-endian bytes of a BIGINT column (`hex` gives its two's complement, big-endian)."""
    return F.reverse(F.unhex(F.lpad(F.hex(value), 16, "0")))


def _one_byte(value: Column) -> Column:
    """One byte holding an INT column's value in 0..255."""
    return F.unhex(F.lpad(F.hex(value), 2, "0"))


def _is_supported(dtype: t.DataType, spark_type: SparkType) -> bool:
    """Whether the layout below handles this key type given as this Spark column type."""
    if dtype.root in _INTEGER_LAYOUT:
        width = _SPARK_INTEGER_WIDTH.get(type(spark_type))
        return width is not None and width <= _INTEGER_LAYOUT[dtype.root][0]  # widening only: never a lossy cast
    if dtype.root == t.BOOLEAN:
        return isinstance(spark_type, BooleanType)
    if dtype.root == t.DATE:
        return isinstance(spark_type, DateType)
    if dtype.is_string:
        return isinstance(spark_type, StringType)
    if dtype.is_binary:
        return isinstance(spark_type, BinaryType)
    return False


def _fixed_slot(column: Column, dtype: t.DataType) -> Column:
    """The 8-byte slot of a fixed-width value (BOOLEAN, integers, DATE)."""
    if dtype.root == t.BOOLEAN:
        return _little_endian_word(F.when(column, F.lit(1)).otherwise(F.lit(0)).cast("bigint"))
    if dtype.root == t.DATE:
        return _little_endian_word(F.unix_date(column).cast("bigint").bitwiseAND(F.lit(0xFFFFFFFF)))
    mask = _INTEGER_LAYOUT[dtype.root][1]
    value = column.cast("bigint")
    return _little_endian_word(value if mask == -1 else value.bitwiseAND(F.lit(mask)))


def key_hash_expression(columns: Sequence[tuple[Column, SparkType, t.DataType]]) -> Column | None:
    """Paimon's `BinaryRow.hashCode()` (INT) of the row of these key fields, or None if unsupported.

    Args:
        columns: per key field, in key order: the DataFrame column, its Spark type and the
            field's type in the table.
    """
    arity = len(columns)
    if not arity or arity > _MAX_ONE_WORD_ARITY:
        return None
    if not all(_is_supported(dtype, spark_type) for _, spark_type, dtype in columns):
        return None
    fixed_size = header_size(arity) + 8 * arity
    null_bits: Column = F.lit(0).cast("bigint")
    slots: list[Column] = []
    var_parts: list[Column] = []
    var_offset: Column = F.lit(fixed_size).cast("bigint")  # where the next variable part starts
    for pos, (column, _, dtype) in enumerate(columns):
        null_bits = null_bits.bitwiseOR(
            F.when(column.isNull(), F.lit(1 << (pos + 8))).otherwise(F.lit(0)).cast("bigint"))
        if not (dtype.is_string or dtype.is_binary):
            slots.append(F.when(column.isNull(), F.lit(bytes(8))).otherwise(_fixed_slot(column, dtype)))
            continue
        raw = F.encode(column, "UTF-8") if dtype.is_string else column
        length = F.octet_length(raw).cast("bigint")
        # Up to 7 bytes live in the slot itself, the last byte being 0x80 | length; longer values
        # go to the variable part (zero-padded to whole words), the slot holding offset << 32 | length.
        inline = F.concat(F.rpad(raw, 7, F.lit(b"\x00")), _one_byte(length + F.lit(0x80)))
        far = _little_endian_word(F.shiftleft(var_offset, 32).bitwiseOR(length))
        padded = F.rpad(raw, F.floor((length + F.lit(7)) / F.lit(8)).cast("int") * F.lit(8), F.lit(b"\x00"))
        slots.append(F.when(column.isNull(), F.lit(bytes(8)))
                     .when(length <= F.lit(7), inline).otherwise(far))
        segment = F.when(column.isNull() | (length <= F.lit(7)), F.lit(b"")).otherwise(padded)
        var_parts.append(segment)
        var_offset = var_offset + F.octet_length(segment).cast("bigint")
    header = _little_endian_word(null_bits)  # byte 0 is the row kind: 0 (INSERT) for keys
    return F.hash(F.concat(header, *slots, *var_parts))


def bucket_expression(hash_column: Column, num_buckets: int) -> Column:
    """`abs(hash % n)` with Java's truncating remainder: the bucket (or assigner) of each hash."""
    return F.abs(hash_column % F.lit(num_buckets))
