"""Schema changes for `catalog.alter_table`, with pypaimon's `SchemaChange` factory names and shapes.

`SchemaChange.add_column("note", pa.string())`, `SchemaChange.rename_column("a", "b")`, ... build
plain records; `lakehouse_engine.schema_evolution.apply_schema_changes` checks them against Paimon's
rules and turns a table schema into the next one. A column is named by a string (pypaimon also
takes a list, the path of a nested field; only top-level columns, a one-element path, are
supported here). A type is a Paimon type string (`"BIGINT"`, `"DECIMAL(12, 2)"`), a pyarrow type
(always nullable) or a `DataType`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TypeAlias

import pyarrow as pa

from lakehouse_engine.errors import SchemaError, UnsupportedError
from lakehouse_engine.types import DataType

#: What a caller may pass as a column type.
TypeLike: TypeAlias = "DataType | pa.DataType | str"


def to_data_type(data_type: TypeLike, what: str) -> DataType:
    """A `DataType` from a type string, a pyarrow type (nullable) or a `DataType`."""
    if isinstance(data_type, DataType):
        return data_type
    if isinstance(data_type, str):
        return DataType.parse(data_type)
    if isinstance(data_type, pa.DataType):
        return DataType.from_arrow(data_type, nullable=True)
    raise SchemaError(f"{what}: {data_type!r} is not a type (use a Paimon type string such as "
                      f"'BIGINT', a pyarrow type or a DataType)")


def _column(field_name: str | Sequence[str]) -> str:
    """The top-level column a change names; nested paths are refused."""
    if isinstance(field_name, str):
        return field_name
    names = list(field_name)
    if len(names) != 1 or not isinstance(names[0], str):
        raise UnsupportedError(
            f"column path {names!r}: only top-level columns can be altered (nested field paths "
            f"are not supported)")
    return names[0]


class MoveType(Enum):
    """Where `Move` puts a column."""

    FIRST = "FIRST"
    AFTER = "AFTER"
    BEFORE = "BEFORE"
    LAST = "LAST"


@dataclass(frozen=True)
class Move:
    """A column position: first, last, or after / before a reference column."""

    field_name: str
    reference_field_name: str | None
    type: MoveType

    @staticmethod
    def first(field_name: str) -> Move:
        return Move(field_name, None, MoveType.FIRST)

    @staticmethod
    def after(field_name: str, reference_field_name: str) -> Move:
        return Move(field_name, reference_field_name, MoveType.AFTER)

    @staticmethod
    def before(field_name: str, reference_field_name: str) -> Move:
        return Move(field_name, reference_field_name, MoveType.BEFORE)

    @staticmethod
    def last(field_name: str) -> Move:
        return Move(field_name, None, MoveType.LAST)


class SchemaChange:
    """Base of every schema change; its static methods are pypaimon's factories."""

    @staticmethod
    def set_option(key: str, value: str) -> SetOption:
        return SetOption(str(key), str(value))

    @staticmethod
    def remove_option(key: str) -> RemoveOption:
        return RemoveOption(str(key))

    @staticmethod
    def update_comment(comment: str | None) -> UpdateComment:
        return UpdateComment(comment)

    @staticmethod
    def add_column(field_name: str | Sequence[str], data_type: TypeLike, comment: str | None = None,
                   move: Move | None = None) -> AddColumn:
        name = _column(field_name)
        return AddColumn(name, to_data_type(data_type, f"add column {name!r}"), comment, move)

    @staticmethod
    def rename_column(field_name: str | Sequence[str], new_name: str) -> RenameColumn:
        return RenameColumn(_column(field_name), new_name)

    @staticmethod
    def drop_column(field_name: str | Sequence[str]) -> DropColumn:
        return DropColumn(_column(field_name))

    @staticmethod
    def update_column_type(field_name: str | Sequence[str], new_data_type: TypeLike,
                           keep_nullability: bool = False) -> UpdateColumnType:
        name = _column(field_name)
        return UpdateColumnType(name, to_data_type(new_data_type, f"update column type of {name!r}"),
                                keep_nullability)

    @staticmethod
    def update_column_nullability(field_name: str | Sequence[str], new_nullability: bool) -> UpdateColumnNullability:
        return UpdateColumnNullability(_column(field_name), bool(new_nullability))

    @staticmethod
    def update_column_comment(field_name: str | Sequence[str], comment: str | None) -> UpdateColumnComment:
        return UpdateColumnComment(_column(field_name), comment)

    @staticmethod
    def update_column_position(move: Move) -> UpdateColumnPosition:
        return UpdateColumnPosition(move)


@dataclass(frozen=True)
class SetOption(SchemaChange):
    """ALTER TABLE SET (key = value)."""

    key: str
    value: str


@dataclass(frozen=True)
class RemoveOption(SchemaChange):
    """ALTER TABLE RESET (key)."""

    key: str


@dataclass(frozen=True)
class UpdateComment(SchemaChange):
    """A new table comment (None removes it)."""

    comment: str | None


@dataclass(frozen=True)
class AddColumn(SchemaChange):
    """A new nullable column with a new field id, last unless `move` says otherwise."""

    field_name: str
    data_type: DataType
    comment: str | None = None
    move: Move | None = None


@dataclass(frozen=True)
class RenameColumn(SchemaChange):
    """A new name for a column; its field id, and so its data, stay."""

    field_name: str
    new_name: str


@dataclass(frozen=True)
class DropColumn(SchemaChange):
    """Remove a column; its field id is never used again."""

    field_name: str


@dataclass(frozen=True)
class UpdateColumnType(SchemaChange):
    """A wider type for a column (older files are cast when read)."""

    field_name: str
    new_data_type: DataType
    keep_nullability: bool = False


@dataclass(frozen=True)
class UpdateColumnNullability(SchemaChange):
    """Make a column nullable (True) or NOT NULL (False)."""

    field_name: str
    new_nullability: bool


@dataclass(frozen=True)
class UpdateColumnComment(SchemaChange):
    """A new description for a column."""

    field_name: str
    new_comment: str | None


@dataclass(frozen=True)
class UpdateColumnPosition(SchemaChange):
    """Move an existing column."""

    move: Move
