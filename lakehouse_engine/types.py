"""Paimon data types: the SQL-style type strings of `schema-N` and their Arrow counterparts."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import pyarrow as pa

from lakehouse_engine.errors import SchemaError

# Type roots, named as Paimon's schema files spell them.
BOOLEAN = "BOOLEAN"
TINYINT = "TINYINT"
SMALLINT = "SMALLINT"
INT = "INT"
BIGINT = "BIGINT"
FLOAT = "FLOAT"
DOUBLE = "DOUBLE"
DECIMAL = "DECIMAL"
STRING = "STRING"
VARCHAR = "VARCHAR"
CHAR = "CHAR"
BYTES = "BYTES"
VARBINARY = "VARBINARY"
BINARY = "BINARY"
DATE = "DATE"
TIME = "TIME"
TIMESTAMP = "TIMESTAMP"
TIMESTAMP_LTZ = "TIMESTAMP_LTZ"

_STRING_ROOTS = frozenset({STRING, VARCHAR, CHAR})
_BINARY_ROOTS = frozenset({BYTES, VARBINARY, BINARY})
_TIMESTAMP_ROOTS = frozenset({TIMESTAMP, TIMESTAMP_LTZ})
_INTEGER_ROOTS = frozenset({TINYINT, SMALLINT, INT, BIGINT})

_TYPE_RE = re.compile(
    r"^\s*(?P<root>[A-Z_]+(?: WITHOUT TIME ZONE| WITH LOCAL TIME ZONE)?)"
    r"\s*(?:\((?P<args>[^)]*)\))?"
    r"(?P<ltz>\s+WITH LOCAL TIME ZONE|\s+WITHOUT TIME ZONE)?"
    r"(?P<notnull>\s+NOT NULL)?\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class DataType:
    """One Paimon atomic type: a root name, nullability and its parameters."""

    root: str
    nullable: bool = True
    precision: int | None = None
    scale: int | None = None
    length: int | None = None

    # ---- classification -------------------------------------------------
    @property
    def is_string(self) -> bool:
        return self.root in _STRING_ROOTS

    @property
    def is_binary(self) -> bool:
        return self.root in _BINARY_ROOTS

    @property
    def is_timestamp(self) -> bool:
        return self.root in _TIMESTAMP_ROOTS

    @property
    def is_integer(self) -> bool:
        return self.root in _INTEGER_ROOTS

    @property
    def is_decimal(self) -> bool:
        return self.root == DECIMAL

    @property
    def is_compact_decimal(self) -> bool:
        """A DECIMAL stored as its unscaled long (precision <= 18)."""
        return self.root == DECIMAL and (self.precision or 10) <= 18

    @property
    def is_compact_timestamp(self) -> bool:
        """A TIMESTAMP stored as epoch millis in a BinaryRow slot (precision <= 3)."""
        return self.is_timestamp and (self.precision if self.precision is not None else 6) <= 3

    def copy(self, nullable: bool) -> DataType:
        return replace(self, nullable=nullable)

    # ---- strings --------------------------------------------------------
    def to_string(self) -> str:
        """The type as `schema-N` spells it, e.g. `DECIMAL(10, 2) NOT NULL`."""
        root = self.root
        if root == DECIMAL:
            text = f"DECIMAL({self.precision}, {self.scale})"
        elif root in (TIMESTAMP, TIME):
            text = f"{root}({self.precision})"
        elif root == TIMESTAMP_LTZ:
            text = f"TIMESTAMP({self.precision}) WITH LOCAL TIME ZONE"
        elif root in (VARCHAR, CHAR, VARBINARY, BINARY):
            text = f"{root}({self.length})"
        else:
            text = root
        return text if self.nullable else text + " NOT NULL"

    def __str__(self) -> str:
        return self.to_string()

    @staticmethod
    def parse(text: str) -> DataType:
        """Parse a Paimon type string such as `BIGINT NOT NULL` or `TIMESTAMP(6)`."""
        m = _TYPE_RE.match(text)
        if not m:
            raise SchemaError(f"unsupported Paimon type {text!r}")
        root = m.group("root").upper().strip()
        args = [a.strip() for a in (m.group("args") or "").split(",") if a.strip()]
        nullable = m.group("notnull") is None
        ltz = (m.group("ltz") or "").strip().upper() == "WITH LOCAL TIME ZONE"
        if root.endswith("WITH LOCAL TIME ZONE"):
            root, ltz = root.replace(" WITH LOCAL TIME ZONE", ""), True
        root = root.replace(" WITHOUT TIME ZONE", "")
        if root == "INTEGER":
            root = INT
        try:
            nums = [int(a) for a in args]
        except ValueError as e:
            raise SchemaError(f"unsupported Paimon type {text!r}") from e
        if root == DECIMAL:
            p = nums[0] if nums else 10
            s = nums[1] if len(nums) > 1 else 0
            return DataType(DECIMAL, nullable, precision=p, scale=s)
        if root in (TIMESTAMP, TIMESTAMP_LTZ):
            p = nums[0] if nums else 6
            return DataType(TIMESTAMP_LTZ if ltz else TIMESTAMP, nullable, precision=p)
        if root == TIME:
            return DataType(TIME, nullable, precision=nums[0] if nums else 0)
        if root in (VARCHAR, CHAR, VARBINARY, BINARY):
            n = nums[0] if nums else 1
            if root == VARCHAR and n == 2147483647:
                return DataType(STRING, nullable)
            if root == VARBINARY and n == 2147483647:
                return DataType(BYTES, nullable)
            return DataType(root, nullable, length=n)
        if root in (BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, STRING, BYTES, DATE):
            if nums:
                raise SchemaError(f"type {root} takes no parameters: {text!r}")
            return DataType(root, nullable)
        raise SchemaError(f"unsupported Paimon type {text!r}")

    # ---- arrow ----------------------------------------------------------
    def to_arrow(self) -> pa.DataType:
        """The Arrow type this engine reads and writes for this Paimon type."""
        r = self.root
        if r == BOOLEAN:
            return pa.bool_()
        if r == TINYINT:
            return pa.int8()
        if r == SMALLINT:
            return pa.int16()
        if r == INT:
            return pa.int32()
        if r == BIGINT:
            return pa.int64()
        if r == FLOAT:
            return pa.float32()
        if r == DOUBLE:
            return pa.float64()
        if r == DECIMAL:
            assert self.precision is not None and self.scale is not None
            return pa.decimal128(self.precision, self.scale)
        if r in _STRING_ROOTS:
            return pa.string()
        if r == BINARY:
            return pa.binary()
        if r in _BINARY_ROOTS:
            return pa.binary()
        if r == DATE:
            return pa.date32()
        if r == TIME:
            return pa.time32("ms")
        if r in _TIMESTAMP_ROOTS:
            p = 6 if self.precision is None else self.precision
            unit = "s" if p == 0 else "ms" if p <= 3 else "us" if p <= 6 else "ns"
            return pa.timestamp(unit, tz="UTC" if r == TIMESTAMP_LTZ else None)
        raise SchemaError(f"no Arrow type for {self}")

    @staticmethod
    def from_arrow(t: pa.DataType, nullable: bool = True) -> DataType:
        """The Paimon type for an Arrow type; raises SchemaError for one Paimon cannot hold."""
        if pa.types.is_boolean(t):
            return DataType(BOOLEAN, nullable)
        if pa.types.is_int8(t):
            return DataType(TINYINT, nullable)
        if pa.types.is_int16(t):
            return DataType(SMALLINT, nullable)
        if pa.types.is_int32(t):
            return DataType(INT, nullable)
        if pa.types.is_int64(t):
            return DataType(BIGINT, nullable)
        if pa.types.is_float32(t):
            return DataType(FLOAT, nullable)
        if pa.types.is_float64(t):
            return DataType(DOUBLE, nullable)
        if pa.types.is_decimal(t):
            return DataType(DECIMAL, nullable, precision=t.precision, scale=t.scale)
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return DataType(STRING, nullable)
        if pa.types.is_fixed_size_binary(t):
            return DataType(BINARY, nullable, length=t.byte_width)
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            return DataType(BYTES, nullable)
        if pa.types.is_date32(t):
            return DataType(DATE, nullable)
        if pa.types.is_time(t):
            return DataType(TIME, nullable, precision=0)
        if pa.types.is_timestamp(t):
            p = {"s": 0, "ms": 3, "us": 6, "ns": 9}[t.unit]
            return DataType(TIMESTAMP_LTZ if t.tz else TIMESTAMP, nullable, precision=p)
        raise SchemaError(f"Arrow type {t} has no Paimon counterpart supported by this engine")
