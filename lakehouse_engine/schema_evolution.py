"""Schema evolution: Paimon's rules for `alter_table`, applied to a table schema to give the next one.

`apply_schema_changes(schema, changes, has_snapshots)` is pure: it returns schema N+1 or raises
an error naming the column or option, and a caller that gets an error has changed nothing. As in
Paimon, field ids are never reused (`highestFieldId` only grows), and the data files of earlier
schemas stay as they are: readers map their columns by field id (`mergetree/evolution.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from lakehouse_engine.errors import (
    ColumnAlreadyExistError,
    ColumnNotExistError,
    InvalidOptionError,
    SchemaError,
    UnsupportedError,
)
from lakehouse_engine.options import BUCKET_KEY, ROWKIND_FIELD, SEQUENCE_FIELD
from lakehouse_engine.schema import KEY_FIELD_PREFIX, SYSTEM_FIELD_NAMES, DataField, TableSchema
from lakehouse_engine.schema_change import (
    AddColumn,
    DropColumn,
    Move,
    MoveType,
    RemoveOption,
    RenameColumn,
    SchemaChange,
    SetOption,
    UpdateColumnComment,
    UpdateColumnNullability,
    UpdateColumnPosition,
    UpdateColumnType,
    UpdateComment,
)
from lakehouse_engine.type_casts import explicit_cast_supported, read_can_cast, type_change_allowed

#: Paimon's option placing added columns before the partition fields (it orders columns only).
ADD_COLUMN_BEFORE_PARTITION = "add-column-before-partition"
#: Paimon's guard on making a nullable column NOT NULL (default 'true': refused).
ALTER_NULL_TO_NOT_NULL_DISABLED = "alter-column-null-to-not-null.disabled"

#: Options that fix how existing data files are laid out or merged: Paimon's `@Immutable` options
#: (and pypaimon's IMMUTABLE_OPTIONS) that this engine knows, plus `sequence.field`, which orders
#: records already written. They may change only while the table has no snapshot.
IMMUTABLE_OPTIONS = frozenset({
    "bucket-key", "bucket-function.type", "data-file.path-directory", "merge-engine",
    "sequence.field", "sequence.snapshot-ordering", "aggregation.remove-record-on-delete",
    "partial-update.remove-record-on-delete", "partial-update.remove-record-on-sequence-group",
    "rowkind.field", "primary-key", "partition", "dynamic-bucket.initial-buckets", "type",
    "primary-key.nullable", "force-lookup", "row-tracking.enabled", "data-evolution.enabled",
    "index-file-in-data-file-dir",
})

#: Paimon's guard on `deletion-vectors.enabled` (SchemaManager.checkAlterTableOption): the mode of a
#: table with snapshots changes only when this option is 'true'.
DELETION_VECTORS_ENABLED = "deletion-vectors.enabled"
DELETION_VECTORS_MODIFIABLE = "deletion-vectors.modifiable"

_FIELDS_PREFIX = "fields."
_SEQUENCE_GROUP_SUFFIX = ".sequence-group"
_DEFAULT_AGGREGATE = "fields.default-aggregate-function"

def apply_schema_changes(schema: TableSchema, changes: Sequence[SchemaChange],
                         has_snapshots: Callable[[], bool]) -> TableSchema:
    """Schema `schema.id + 1`: `schema` with `changes` applied in order, validated as a whole.

    `has_snapshots` is asked (at most once) when an immutable option would change. Raises
    ColumnNotExistError, ColumnAlreadyExistError, SchemaError, InvalidOptionError or
    UnsupportedError naming the column or option; nothing is written by this function.
    """
    if not changes:
        raise SchemaError("alter table: no changes given")
    state = _Evolving(schema, has_snapshots)
    for change in changes:
        state.apply(change)
    new = TableSchema(
        id=schema.id + 1, fields=tuple(state.fields), highest_field_id=state.highest_field_id,
        partition_keys=schema.partition_keys, primary_keys=schema.primary_keys,
        options=state.options, comment=state.comment, time_millis=int(time.time() * 1000),
    )
    new.validate()
    return new


class _Evolving:
    """The fields, options and comment of the schema being built, one change at a time."""

    def __init__(self, schema: TableSchema, has_snapshots: Callable[[], bool]):
        self.base = schema
        self.fields: list[DataField] = list(schema.fields)
        self.options: dict[str, str] = dict(schema.options)
        self.comment = schema.comment
        self.highest_field_id = schema.highest_field_id
        self._has_snapshots = has_snapshots
        self._snapshots_known: bool | None = None

    # ---- lookups ----------------------------------------------------------------------
    def index(self, name: str, what: str) -> int:
        for i, f in enumerate(self.fields):
            if f.name == name:
                return i
        raise ColumnNotExistError(
            f"{what}: column '{name}' does not exist (columns: {', '.join(f.name for f in self.fields)})",
            name)

    def check_new_name(self, name: str, what: str) -> None:
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            raise SchemaError(f"{what}: column name {name!r} is empty or has surrounding blanks")
        if name in SYSTEM_FIELD_NAMES or name.startswith(KEY_FIELD_PREFIX):
            raise SchemaError(f"{what}: column name '{name}' is reserved for Paimon's system columns")
        if any(f.name == name for f in self.fields):
            raise ColumnAlreadyExistError(f"{what}: column '{name}' already exists", name)

    def not_a_key(self, name: str, what: str) -> None:
        if name in self.base.partition_keys:
            raise SchemaError(f"{what}: column '{name}' is a partition key and cannot be {_verb(what)}")
        if name in self.base.primary_keys:
            raise SchemaError(f"{what}: column '{name}' is part of the primary key and cannot be {_verb(what)}")

    def has_snapshots(self) -> bool:
        if self._snapshots_known is None:
            self._snapshots_known = self._has_snapshots()
        return self._snapshots_known

    # ---- changes ----------------------------------------------------------------------
    def apply(self, change: SchemaChange) -> None:
        if isinstance(change, SetOption):
            self.set_option(change.key, change.value)
        elif isinstance(change, RemoveOption):
            self.remove_option(change.key)
        elif isinstance(change, UpdateComment):
            self.comment = change.comment
        elif isinstance(change, AddColumn):
            self.add_column(change)
        elif isinstance(change, RenameColumn):
            self.rename_column(change.field_name, change.new_name)
        elif isinstance(change, DropColumn):
            self.drop_column(change.field_name)
        elif isinstance(change, UpdateColumnType):
            self.update_type(change)
        elif isinstance(change, UpdateColumnNullability):
            self.update_nullability(change.field_name, change.new_nullability)
        elif isinstance(change, UpdateColumnComment):
            i = self.index(change.field_name, "update column comment")
            self.fields[i] = replace(self.fields[i], description=change.new_comment)
        elif isinstance(change, UpdateColumnPosition):
            i = self.index(change.move.field_name, "update column position")
            moved = self.fields.pop(i)
            self.place(moved, change.move, "update column position")
        else:
            raise UnsupportedError(f"unsupported schema change {change!r}")

    def _current(self, key: str) -> str | None:
        """The option's value as the table has it: `type`, `primary-key` and `partition` also
        when the schema holds them outside the options (the default type, the key fields)."""
        if key == "type":
            return self.options.get(key, "table")
        if key == "primary-key" and key not in self.options:
            return ",".join(self.base.primary_keys)
        if key == "partition" and key not in self.options:
            return ",".join(self.base.partition_keys)
        return self.options.get(key)

    def set_option(self, key: str, value: str) -> None:
        what = f"set option '{key}'"
        current = self._current(key)
        if current == value or (key in ("primary-key", "partition") and current is not None
                                and _split(current) == _split(value)):
            return  # as Paimon: restating what the table already has is no change, and not stored
        self._check_option_change(key, what)
        if key == DELETION_VECTORS_ENABLED:
            self._check_deletion_vectors_mode(current, value, what)
        self.options[key] = value

    def remove_option(self, key: str) -> None:
        what = f"remove option '{key}'"
        # Checked before the absence test, as Paimon and pypaimon check it: removing an immutable
        # option of a table with snapshots is refused whether or not the option is set.
        if key not in self.options and key not in IMMUTABLE_OPTIONS:
            return
        self._check_option_change(key, what)
        if key == DELETION_VECTORS_ENABLED:
            self._check_deletion_vectors_mode(self.options.get(key), None, what)
        self.options.pop(key, None)

    def _check_option_change(self, key: str, what: str) -> None:
        if key == "type":
            raise InvalidOptionError(
                f"{what}: Change 'type' is not supported yet. A table's type decides what its "
                f"directory holds, so it is fixed at create time")
        if key == "bucket":
            raise InvalidOptionError(
                f"{what}: the bucket number changes by rescale (table.rescale(n) or "
                f"`lakehouse rescale`), which rewrites the data into the new buckets; setting the "
                f"option alone would misplace every key")
        if key in IMMUTABLE_OPTIONS and self.has_snapshots():
            raise InvalidOptionError(
                f"{what}: Change '{key}' is not supported yet. '{key}' cannot change once the table "
                f"has snapshots (it decides how existing data files are laid out or merged); create "
                f"a new table instead")

    def _check_deletion_vectors_mode(self, old: str | None, new: str | None, what: str) -> None:
        """Turning vectors on hides the rows still in level 0 (a DV table's readers skip it);
        turning them off leaves readers of other engines merging rows the vectors deleted. As
        Paimon, a table with snapshots changes mode only with `deletion-vectors.modifiable`."""
        if (_true(old) == _true(new) or _true(self.options.get(DELETION_VECTORS_MODIFIABLE))
                or not self.has_snapshots()):
            return
        raise InvalidOptionError(
            f"{what}: Cannot change deletion vectors mode of a table with snapshots (as Paimon): "
            f"turning it on hides the rows still in level 0 until a compaction, turning it off "
            f"makes other engines merge rows the vectors deleted. Run a full compaction first and "
            f"set '{DELETION_VECTORS_MODIFIABLE}' = 'true' if you are sure")

    def add_column(self, change: AddColumn) -> None:
        what = f"add column '{change.field_name}'"
        self.check_new_name(change.field_name, what)
        if not change.data_type.nullable:
            raise SchemaError(
                f"{what}: a column added to an existing table must be nullable (rows written "
                f"before it have no value); its type {change.data_type} is NOT NULL")
        change.data_type.to_arrow()  # a type this engine cannot read or write fails here
        self.highest_field_id += 1
        new = DataField(self.highest_field_id, change.field_name, change.data_type, change.comment)
        partitions = [i for i, f in enumerate(self.fields) if f.name in self.base.partition_keys]
        if change.move is None and partitions and \
                self.options.get(ADD_COLUMN_BEFORE_PARTITION, "false").strip().lower() == "true":
            # Paimon's `add-column-before-partition`: a new column goes before the partition fields.
            self.fields.insert(partitions[0], new)
        elif change.move is None:
            self.fields.append(new)
        else:
            if change.move.field_name != change.field_name:
                raise SchemaError(f"{what}: its move names column '{change.move.field_name}'")
            self.place(new, change.move, what)

    def place(self, field: DataField, move: Move, what: str) -> None:
        if move.type == MoveType.FIRST:
            self.fields.insert(0, field)
        elif move.type == MoveType.LAST:
            self.fields.append(field)
        else:
            ref = move.reference_field_name or ""
            if ref == field.name:
                raise SchemaError(f"{what}: column '{ref}' cannot move relative to itself")
            i = self.index(ref, what)
            self.fields.insert(i + 1 if move.type == MoveType.AFTER else i, field)

    def rename_column(self, old: str, new: str) -> None:
        what = f"rename column '{old}'"
        i = self.index(old, what)
        self.not_a_key(old, what)
        self.check_new_name(new, what)
        self.fields[i] = replace(self.fields[i], name=new)
        self.options = _rename_in_options(self.options, old, new)

    def drop_column(self, name: str) -> None:
        what = f"drop column '{name}'"
        i = self.index(name, what)
        self.not_a_key(name, what)
        if len(self.fields) == 1:
            raise SchemaError(f"{what}: a table needs at least one column")
        for key, value in self.options.items():
            if _names_in_value(key) and name in _split(value):
                raise SchemaError(f"{what}: option '{key}' = '{value}' names it; change that option first")
            if key.endswith(_SEQUENCE_GROUP_SUFFIX) and name in _fields_of_key(key, _SEQUENCE_GROUP_SUFFIX):
                raise SchemaError(f"{what}: option '{key}' names it; remove that option first")
        del self.fields[i]
        # `fields.<name>.*` options (its aggregate function, ...) go with the column.
        prefix = f"{_FIELDS_PREFIX}{name}."
        self.options = {k: v for k, v in self.options.items() if not k.startswith(prefix)}

    def update_type(self, change: UpdateColumnType) -> None:
        what = f"update column type of '{change.field_name}'"
        i = self.index(change.field_name, what)
        self.not_a_key(change.field_name, what)
        old = self.fields[i].type
        new = change.new_data_type
        new = new.copy(old.nullable) if change.keep_nullability else new
        if old.nullable and not new.nullable:
            self.check_null_to_not_null(change.field_name, what)
        # A table with no snapshot holds no value to cast: any cast Paimon (Java) accepts is
        # allowed, as there and in pypaimon. Once data exists, only casts that keep every value.
        unwritten = (not old.is_nested and not new.is_nested and explicit_cast_supported(old, new)
                     and read_can_cast(old, new) and not self.has_snapshots())
        if not unwritten and not type_change_allowed(old.copy(True), new.copy(True)):
            raise SchemaError(
                f"{what}: Column type {change.field_name}[{old.copy(True)}] cannot be converted to "
                f"{new.copy(True)}: this engine has no executable cast that keeps every value already "
                f"written; only changes that keep "
                f"every value are allowed (wider integers, FLOAT to DOUBLE, integers to DOUBLE, "
                f"DECIMAL with more integer and fraction digits, longer CHAR/VARCHAR/BINARY, higher "
                f"TIMESTAMP precision, numbers, BOOLEAN, DATE and strings to STRING; and, while the table "
                f"has no snapshot, any cast Paimon supports)")
        new.to_arrow()
        self.fields[i] = replace(self.fields[i], type=new)

    def check_null_to_not_null(self, name: str, what: str) -> None:
        """Paimon's guard: a nullable column becomes NOT NULL only when the table's option
        `alter-column-null-to-not-null.disabled` is 'false' (the user vouches that no row holds a
        null; a null then fails the read, as in Paimon)."""
        if self.options.get(ALTER_NULL_TO_NOT_NULL_DISABLED, "true").strip().lower() != "false":
            raise SchemaError(
                f"{what}: Cannot update column type from nullable to non nullable for {name}: NOT "
                f"NULL would not hold for rows already written with nulls. You can set table configuration option "
                f"'{ALTER_NULL_TO_NOT_NULL_DISABLED}' = 'false' to allow converting null columns to "
                f"not null")

    def update_nullability(self, name: str, nullable: bool) -> None:
        what = f"update nullability of '{name}'"
        i = self.index(name, what)
        old = self.fields[i].type
        if nullable and name in self.base.primary_keys:
            raise SchemaError(f"{what}: column '{name}' is part of the primary key, which is NOT NULL")
        if old.nullable and not nullable:
            self.check_null_to_not_null(name, what)
        self.fields[i] = replace(self.fields[i], type=old.copy(nullable))


def _verb(what: str) -> str:
    if what.startswith("rename"):
        return "renamed"
    if what.startswith("drop"):
        return "dropped"
    return "re-typed"


def _true(value: str | None) -> bool:
    """A boolean option's value as Java's Boolean.parseBoolean reads it (absent: false)."""
    return value is not None and value.strip().lower() == "true"


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _names_in_value(key: str) -> bool:
    """Options whose value lists column names."""
    return key in (SEQUENCE_FIELD.key, BUCKET_KEY.key, ROWKIND_FIELD.key) or key.endswith(_SEQUENCE_GROUP_SUFFIX)


def _fields_of_key(key: str, suffix: str) -> list[str]:
    return _split(key[len(_FIELDS_PREFIX):len(key) - len(suffix)])


def _rename_in_options(options: dict[str, str], old: str, new: str) -> dict[str, str]:
    """Options with column `old` renamed to `new`: `fields.<old>.*` keys, sequence-group keys and
    the values that list columns (`sequence.field`, `bucket-key`, `rowkind.field`, sequence groups)."""
    def rename_list(text: str) -> str:
        return ",".join(new if n == old else n for n in _split(text))

    renamed: dict[str, str] = {}
    for key, value in options.items():
        if key.startswith(_FIELDS_PREFIX) and key != _DEFAULT_AGGREGATE:
            body = key[len(_FIELDS_PREFIX):]
            if body.endswith(_SEQUENCE_GROUP_SUFFIX):
                names = body[:-len(_SEQUENCE_GROUP_SUFFIX)]
                key = f"{_FIELDS_PREFIX}{rename_list(names)}{_SEQUENCE_GROUP_SUFFIX}"
            elif body.startswith(f"{old}."):
                key = f"{_FIELDS_PREFIX}{new}.{body[len(old) + 1:]}"
        if _names_in_value(key) and old in _split(value):
            value = rename_list(value)
        renamed[key] = value
    return renamed
