"""Paimon data types: the type strings and nested-type JSON of `schema-N` and their Arrow counterparts."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from lakehouse_engine.errors import SchemaError, UnsupportedError

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
# Nested types: `schema-N` spells them as JSON objects, e.g. {"type": "ARRAY", "element": "INT"}.
ARRAY = "ARRAY"
MAP = "MAP"
ROW = "ROW"
NESTED_ROOTS = frozenset({ARRAY, MAP, ROW})
#: Paimon's atomic types this engine names (a pypaimon `AtomicType("BLOB")` prints as pypaimon's)
#: but stores nowhere: a table, a write or a conversion to Arrow with one raises UnsupportedError.
UNSUPPORTED_ATOMIC = ("BLOB", "VARIANT")

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
class RowField:
    """One field of a ROW type: its id (unique across the whole table schema), name and type."""

    id: int
    name: str
    type: DataType
    description: str | None = None


@dataclass(frozen=True)
class DataType:
    """One Paimon type: a root name, nullability, its parameters and, for nested types, their parts.

    ARRAY has `element`, MAP has `key` and `value`, ROW has `fields`.
    """

    root: str
    nullable: bool = True
    precision: int | None = None
    scale: int | None = None
    length: int | None = None
    element: DataType | None = None
    key: DataType | None = None
    value: DataType | None = None
    fields: tuple[RowField, ...] | None = None

    # ---- classification -------------------------------------------------
    @property
    def is_nested(self) -> bool:
        """ARRAY, MAP or ROW: no min/max statistics, never a key, partition or sequence field."""
        return self.root in NESTED_ROOTS

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

    def children(self) -> Iterator[DataType]:
        """The types directly inside a nested type (none for an atomic one)."""
        for part in (self.element, self.key, self.value):
            if part is not None:
                yield part
        for f in self.fields or ():
            yield f.type

    def field_ids(self) -> Iterator[int]:
        """The ids of every ROW field inside this type, at any depth."""
        for f in self.fields or ():
            yield f.id
            yield from f.type.field_ids()
        for part in (self.element, self.key, self.value):
            if part is not None:
                yield from part.field_ids()

    def with_field_ids(self, counter: Iterator[int]) -> DataType:
        """This type with every nested ROW field id drawn from `counter`, as Paimon assigns them:
        depth first, a field's own type before the field (`ReassignFieldId`)."""
        if self.root == ARRAY:
            assert self.element is not None
            return replace(self, element=self.element.with_field_ids(counter))
        if self.root == MAP:
            assert self.key is not None and self.value is not None
            key = self.key.with_field_ids(counter)
            return replace(self, key=key, value=self.value.with_field_ids(counter))
        if self.root == ROW:
            fields = []
            for f in self.fields or ():
                inner = f.type.with_field_ids(counter)
                fields.append(RowField(next(counter), f.name, inner, f.description))
            return replace(self, fields=tuple(fields))
        return self

    # ---- strings --------------------------------------------------------
    def to_string(self) -> str:
        """The type as Paimon (Java) prints it, e.g. `DECIMAL(10, 2) NOT NULL`, `ARRAY<INT>` or
        ROW<`a` INT> (its field names quoted)."""
        return self._render(java=True)

    def __str__(self) -> str:
        """The type as pypaimon prints it: Paimon's form, except a ROW, which pypaimon writes
        `ROW<a: INT COMMENT desc>`."""
        return self._render(java=False)

    def _render(self, java: bool) -> str:
        root = self.root
        if root == ARRAY:
            assert self.element is not None
            text = f"ARRAY<{self.element._render(java)}>"
        elif root == MAP:
            assert self.key is not None and self.value is not None
            text = f"MAP<{self.key._render(java)}, {self.value._render(java)}>"
        elif root == ROW and java:
            text = "ROW<" + ", ".join(f"`{f.name}` {f.type._render(java)}" for f in self.fields or ()) + ">"
        elif root == ROW:
            text = "ROW<" + ", ".join(
                f"{f.name}: {f.type._render(java)}" + (f" COMMENT {f.description}" if f.description else "")
                for f in self.fields or ()) + ">"
        elif root == DECIMAL:
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

    @property
    def type(self) -> str:
        """pypaimon's `AtomicType.type`: the type's name, without NOT NULL."""
        return self.copy(True).to_string()

    def to_dict(self) -> str | dict[str, Any]:
        """pypaimon's `to_dict`: `to_json`, with a MAP's `nullable` also as a key, as pypaimon's
        MapType writes it (readers take nullability from the type string either way)."""
        return self.to_json(map_nullable=True)

    def to_json(self, map_nullable: bool = False) -> str | dict[str, Any]:
        """The type as a `schema-N` file holds it: a string, or for nested types a JSON object
        as Paimon's `DataTypeJsonParser` reads it (nested ROW fields carry their ids).
        `map_nullable` adds pypaimon's `nullable` key to MAP objects (see `to_dict`)."""
        if not self.is_nested:
            return self.to_string()
        doc: dict[str, Any] = {"type": self.root if self.nullable else self.root + " NOT NULL"}
        if self.root == ARRAY:
            assert self.element is not None
            doc["element"] = self.element.to_json(map_nullable)
        elif self.root == MAP:
            assert self.key is not None and self.value is not None
            doc["key"] = self.key.to_json(map_nullable)
            doc["value"] = self.value.to_json(map_nullable)
            if map_nullable:
                doc["nullable"] = self.nullable
        else:
            docs = []
            for f in self.fields or ():
                fd: dict[str, Any] = {"id": f.id, "name": f.name, "type": f.type.to_json(map_nullable)}
                if f.description is not None:
                    fd["description"] = f.description
                docs.append(fd)
            doc["fields"] = docs
        return doc

    @staticmethod
    def from_json(value: Any) -> DataType:
        """Parse a type as a `schema-N` file holds it (see `to_json`); SchemaError if it is not one."""
        if isinstance(value, str):
            parsed = DataType.parse(value)
            if parsed.root in UNSUPPORTED_ATOMIC:
                raise UnsupportedError(f"Paimon type {parsed.root} is not supported by this engine")
            return parsed
        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            raise SchemaError(f"unsupported Paimon type {value!r}")
        text = value["type"].strip().upper()
        nullable = not text.endswith("NOT NULL")
        root = text.removesuffix("NOT NULL").strip()
        if root == ARRAY and "element" in value:
            return DataType(ARRAY, nullable, element=DataType.from_json(value["element"]))
        if root == MAP and "key" in value and "value" in value:
            return DataType(MAP, nullable, key=DataType.from_json(value["key"]),
                            value=DataType.from_json(value["value"]))
        if root == ROW and isinstance(value.get("fields"), list):
            fields = []
            for fd in value["fields"]:
                if not (isinstance(fd, dict) and isinstance(fd.get("id"), int)
                        and isinstance(fd.get("name"), str) and "type" in fd):
                    raise SchemaError(f"ROW field {fd!r} needs an integer id, a name and a type")
                desc = fd.get("description")
                fields.append(RowField(fd["id"], fd["name"], DataType.from_json(fd["type"]),
                                       desc if isinstance(desc, str) else None))
            names = [f.name for f in fields]
            if len(set(names)) != len(names):
                raise SchemaError(f"ROW type repeats a field name: {names}")
            return DataType(ROW, nullable, fields=tuple(fields))
        if root in ("MULTISET", "VECTOR", "VARIANT", "BLOB"):
            raise UnsupportedError(f"Paimon type {root} is not supported by this engine")
        if root in NESTED_ROOTS:
            raise SchemaError(f"nested type {value!r} lacks its parts")
        return DataType.parse(value["type"])

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
        if root in (BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, STRING, BYTES, DATE, *UNSUPPORTED_ATOMIC):
            if nums:
                raise SchemaError(f"type {root} takes no parameters: {text!r}")
            return DataType(root, nullable)
        raise SchemaError(f"unsupported Paimon type {text!r}")

    # ---- arrow ----------------------------------------------------------
    def to_arrow(self) -> pa.DataType:
        """The Arrow type this engine reads and writes for this Paimon type."""
        r = self.root
        if r == ARRAY:
            assert self.element is not None
            return pa.list_(pa.field("item", self.element.to_arrow(), nullable=self.element.nullable))
        if r == MAP:
            assert self.key is not None and self.value is not None
            return pa.map_(pa.field("key", self.key.to_arrow(), nullable=False),
                           pa.field("value", self.value.to_arrow(), nullable=self.value.nullable))
        if r == ROW:
            return pa.struct([pa.field(f.name, f.type.to_arrow(), nullable=f.type.nullable)
                              for f in self.fields or ()])
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
        if r in UNSUPPORTED_ATOMIC:
            raise UnsupportedError(f"Paimon type {r} is not supported by this engine: no table of ours "
                                   f"holds a {r} column")
        raise SchemaError(f"no Arrow type for {self}")

    @staticmethod
    def from_arrow(t: pa.DataType, nullable: bool = True) -> DataType:
        """The Paimon type for an Arrow type; raises SchemaError for one Paimon cannot hold.

        Lists become ARRAY, maps MAP (keys NOT NULL) and structs ROW; the ids of ROW fields are
        placeholders until `with_field_ids` numbers them within a table schema.
        """
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return DataType(ARRAY, nullable,
                            element=DataType.from_arrow(t.value_type, t.value_field.nullable))
        if pa.types.is_map(t):
            return DataType(MAP, nullable, key=DataType.from_arrow(t.key_type, False),
                            value=DataType.from_arrow(t.item_type, t.item_field.nullable))
        if pa.types.is_struct(t):
            if t.num_fields == 0:
                raise SchemaError("a ROW type needs at least one field")
            names = [t.field(i).name for i in range(t.num_fields)]
            if len(set(names)) != len(names):
                raise SchemaError(f"struct type {t} repeats a field name")
            return DataType(ROW, nullable, fields=tuple(
                RowField(i, t.field(i).name, DataType.from_arrow(t.field(i).type, t.field(i).nullable))
                for i in range(t.num_fields)))
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
