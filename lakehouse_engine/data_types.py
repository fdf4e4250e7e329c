"""pypaimon's type constructors (`AtomicType("INT")`, `ArrayType(nullable, element)`, `MapType`,
`RowType`), each building this engine's one `DataType`; `isinstance` checks answer as pypaimon's
classes would (an atomic type is an `AtomicType`, an ARRAY an `ArrayType`, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lakehouse_engine.errors import SchemaError
from lakehouse_engine.types import ARRAY, MAP, ROW, DataType, RowField

__all__ = ["AtomicType", "ArrayType", "MapType", "RowType", "DataType"]


class _TypeConstructor(type):
    """A class whose call builds a DataType and whose isinstance check looks at the type's root."""

    roots: frozenset[str] | None = None  # None: every root that is not nested

    def from_dict(cls, data: Any) -> DataType:
        """A type from its `schema-N` JSON form (pypaimon's `X.from_dict`)."""
        return DataType.from_json(data)

    def __instancecheck__(cls, obj: Any) -> bool:
        if not isinstance(obj, DataType):
            return False
        return not obj.is_nested if cls.roots is None else obj.root in cls.roots


class AtomicType(metaclass=_TypeConstructor):
    """pypaimon's `AtomicType("DECIMAL(10, 2)", nullable=True)`: a type given by its Paimon name."""

    roots = None

    def __new__(cls, type: str, nullable: bool = True) -> DataType:  # type: ignore[misc]
        parsed = DataType.parse(type)
        return parsed if nullable else parsed.copy(False)


class ArrayType(metaclass=_TypeConstructor):
    """pypaimon's `ArrayType(nullable, element_type)`."""

    roots = frozenset({ARRAY})

    def __new__(cls, nullable: bool, element_type: DataType) -> DataType:  # type: ignore[misc]
        return DataType(ARRAY, nullable, element=element_type)


class MapType(metaclass=_TypeConstructor):
    """pypaimon's `MapType(nullable, key_type, value_type)`."""

    roots = frozenset({MAP})

    def __new__(cls, nullable: bool, key_type: DataType, value_type: DataType) -> DataType:  # type: ignore[misc]
        return DataType(MAP, nullable, key=key_type, value=value_type)


class RowType(metaclass=_TypeConstructor):
    """pypaimon's `RowType(nullable, fields)`, its fields pypaimon `DataField`s (id, name, type)."""

    roots = frozenset({ROW})

    def __new__(cls, nullable: bool, fields: Sequence[Any]) -> DataType:  # type: ignore[misc]
        row_fields = tuple(RowField(f.id, f.name, f.type, getattr(f, "description", None)) for f in fields)
        names = [f.name for f in row_fields]
        if len(set(names)) != len(names):
            raise SchemaError(f"ROW type repeats a field name: {names}")
        return DataType(ROW, nullable, fields=row_fields)
