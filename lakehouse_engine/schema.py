"""Table schemas: the user-facing `Schema`, the persisted `TableSchema` (`schema-N`) and their checks."""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import cached_property
from typing import Any

import pyarrow as pa

from lakehouse_engine.errors import CorruptFileError, InvalidOptionError, SchemaError
from lakehouse_engine.options import (
    BUCKET_KEY,
    CHANGELOG_PRODUCER,
    DELETION_VECTORS_ENABLED,
    MERGE_ENGINE,
    ROWKIND_FIELD,
    SEQUENCE_FIELD,
    CoreOptions,
)
from lakehouse_engine.types import DataType

# System columns of primary-key data files, as Paimon names them.
KEY_FIELD_PREFIX = "_KEY_"
SEQUENCE_NUMBER = "_SEQUENCE_NUMBER"
VALUE_KIND = "_VALUE_KIND"
SYSTEM_FIELD_NAMES = frozenset({SEQUENCE_NUMBER, VALUE_KIND})


@dataclass(frozen=True)
class DataField:
    """One column of a table: its stable id, name, Paimon type and optional description."""

    id: int
    name: str
    type: DataType
    description: str | None = None

    def to_arrow(self) -> pa.Field:
        return pa.field(self.name, self.type.to_arrow(), nullable=self.type.nullable)

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> DataField:
        """A field from its `schema-N` JSON form (pypaimon's `DataField.from_dict`):
        `{"id": 0, "name": "f0", "type": "INT", "description": ...}`."""
        if not (isinstance(data, Mapping) and isinstance(data.get("id"), int)
                and isinstance(data.get("name"), str) and "type" in data):
            raise SchemaError(f"a field needs an integer 'id', a 'name' and a 'type': {data!r}")
        description = data.get("description")
        return DataField(data["id"], data["name"], DataType.from_json(data["type"]),
                         description if isinstance(description, str) else None)

    def to_dict(self) -> dict[str, Any]:
        """The field's `schema-N` JSON form (pypaimon's `DataField.to_dict`)."""
        doc: dict[str, Any] = {"id": self.id, "name": self.name, "type": self.type.to_json()}
        if self.description is not None:
            doc["description"] = self.description
        return doc


@dataclass
class Schema:
    """What a user asks for when creating a table (pypaimon's `Schema`): fields, keys, options.

    Built from an Arrow schema (`Schema.from_pyarrow_schema`), or as pypaimon builds it from
    `DataField`s (`Schema(fields=[...])`, or the list first): their Paimon types and ids are kept.
    """

    pa_schema: pa.Schema = None  # filled from `fields` when not given
    partition_keys: list[str] = field(default_factory=list)
    primary_keys: list[str] = field(default_factory=list)
    options: dict[str, str] = field(default_factory=dict)
    comment: str | None = None
    fields: list[DataField] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.pa_schema, (list, tuple)):  # pypaimon's positional Schema(fields, ...)
            self.fields, self.pa_schema = list(self.pa_schema), None
        if self.pa_schema is None:
            if self.fields is None:
                raise SchemaError("a Schema needs an Arrow schema or a list of DataFields")
            self.pa_schema = pa.schema([f.to_arrow() for f in self.fields])
        self.partition_keys = list(self.partition_keys or [])
        self.primary_keys = list(self.primary_keys or [])
        self.options = {str(k): str(v) for k, v in (self.options or {}).items()}

    @staticmethod
    def from_pyarrow_schema(
        pa_schema: pa.Schema,
        partition_keys: Sequence[str] | None = None,
        primary_keys: Sequence[str] | None = None,
        options: Mapping[str, str] | None = None,
        comment: str | None = None,
    ) -> Schema:
        """Build a Schema from an Arrow schema, as pypaimon's `Schema.from_pyarrow_schema` does."""
        return Schema(
            pa_schema,
            list(partition_keys or []),
            list(primary_keys or []),
            {str(k): str(v) for k, v in (options or {}).items()},
            comment,
        )


class BucketMode(Enum):
    """How rows of a table find their bucket (Paimon's bucket modes, pypaimon's names); the value
    is the short name shown to people."""

    HASH_FIXED = "fixed"                # bucket > 0: hash of the bucket key modulo the bucket count
    HASH_DYNAMIC = "dynamic"            # primary key, bucket = -1: assigners keep a key -> bucket index
    CROSS_PARTITION = "cross-partition"  # dynamic, with a key that lacks a partition field: global index
    BUCKET_UNAWARE = "unaware"          # append table, bucket = -1: no buckets
    POSTPONE_MODE = "postpone"          # bucket = -2: rows wait in bucket-postpone until compaction

    # Short names, as the modes are spoken of in this project's docs.
    FIXED = HASH_FIXED
    DYNAMIC = HASH_DYNAMIC
    UNAWARE = BUCKET_UNAWARE
    POSTPONE = POSTPONE_MODE

    @property
    def assigns_dynamically(self) -> bool:
        """Whether a key's bucket comes from an index (dynamic and cross-partition modes)."""
        return self in (BucketMode.HASH_DYNAMIC, BucketMode.CROSS_PARTITION)

    @staticmethod
    def of(table: Any) -> BucketMode:
        """The bucket mode of a table (anything with a `schema`: `table.bucket_mode()`)."""
        mode: BucketMode = table.schema.bucket_mode
        return mode


# The `bucket` option of postpone bucket mode (files go to `bucket-postpone`).
POSTPONE_BUCKET_OPTION = -2


@dataclass(frozen=True)
class TableSchema:
    """A persisted table schema (`schema/schema-N`), validated on construction."""

    id: int
    fields: tuple[DataField, ...]
    highest_field_id: int
    partition_keys: tuple[str, ...]
    primary_keys: tuple[str, ...]
    options: Mapping[str, str]
    comment: str | None = None
    time_millis: int = 0

    def __call__(self) -> TableSchema:
        """Itself: `table.schema` is this object, and pypaimon code calls `table.schema()`."""
        return self

    # ---- derived views ------------------------------------------------------
    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    def field(self, name: str) -> DataField:
        for f in self.fields:
            if f.name == name:
                return f
        raise SchemaError(f"no field named '{name}' (fields: {', '.join(self.field_names)})")

    @cached_property
    def core_options(self) -> CoreOptions:
        """The typed options, parsed once per schema."""
        return CoreOptions(self.options)

    @property
    def bucket_mode(self) -> BucketMode:
        """How rows of this table find their bucket, from `bucket` and the keys."""
        bucket = self.core_options.bucket
        if bucket > 0:
            return BucketMode.HASH_FIXED
        if bucket == POSTPONE_BUCKET_OPTION:
            return BucketMode.POSTPONE_MODE
        if not self.primary_keys:
            return BucketMode.BUCKET_UNAWARE
        return BucketMode.CROSS_PARTITION if self.cross_partition_update else BucketMode.HASH_DYNAMIC

    @property
    def has_primary_key(self) -> bool:
        return bool(self.primary_keys)

    @property
    def trimmed_primary_keys(self) -> list[str]:
        """The primary key minus the partition fields: what data files and the bucket hash key on."""
        trimmed = [k for k in self.primary_keys if k not in self.partition_keys]
        return trimmed or list(self.primary_keys)

    @property
    def bucket_keys(self) -> list[str]:
        explicit = self.core_options.bucket_keys
        if explicit:
            return explicit
        return self.trimmed_primary_keys if self.primary_keys else []

    @property
    def cross_partition_update(self) -> bool:
        """True when the primary key lacks a partition field (needs a global index)."""
        return bool(self.primary_keys) and any(p not in self.primary_keys for p in self.partition_keys)

    def types_of(self, names: Sequence[str]) -> list[DataType]:
        return [self.field(n).type for n in names]

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([f.to_arrow() for f in self.fields])

    def key_arrow_fields(self) -> list[pa.Field]:
        return [pa.field(KEY_FIELD_PREFIX + n, self.field(n).type.to_arrow(), nullable=False)
                for n in self.trimmed_primary_keys]

    def data_file_arrow_schema(self) -> pa.Schema:
        """Columns of a data file: `_KEY_*`, `_SEQUENCE_NUMBER`, `_VALUE_KIND`, then the fields."""
        if not self.primary_keys:
            return self.arrow_schema()
        return pa.schema(self.key_arrow_fields() + [
            pa.field(SEQUENCE_NUMBER, pa.int64(), nullable=False),
            pa.field(VALUE_KIND, pa.int8(), nullable=False),
        ] + [f.to_arrow() for f in self.fields])

    # ---- construction -------------------------------------------------------
    @staticmethod
    def from_schema(schema: Schema, schema_id: int = 0) -> TableSchema:
        """Validate a user Schema and turn it into schema-0 (primary-key fields become NOT NULL)."""
        names = [f.name for f in schema.pa_schema]
        if not names:
            raise SchemaError("a table needs at least one field")
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise SchemaError(f"duplicate field names: {', '.join(sorted(dupes))}")
        for n in names:
            if not n or n in SYSTEM_FIELD_NAMES or n.startswith(KEY_FIELD_PREFIX):
                raise SchemaError(f"field name {n!r} is reserved or empty")
        for kind, keys in (("primary key", schema.primary_keys), ("partition key", schema.partition_keys)):
            for k in keys:
                if k not in names:
                    raise SchemaError(f"{kind} '{k}' is not a field of the schema ({', '.join(names)})")
            if len(set(keys)) != len(keys):
                raise SchemaError(f"{kind} lists a field twice: {keys}")
        fields = []
        if schema.fields is not None:
            # pypaimon's DataFields: their types and ids as given (primary keys made NOT NULL).
            fields = [replace(f, type=f.type.copy(False)) if f.name in schema.primary_keys else f
                      for f in schema.fields]
            check_unique_field_ids(fields)
            highest = max(i for f in fields for i in (f.id, *f.type.field_ids()))
        else:
            # As Paimon numbers them: each column takes the next id, then the fields nested in its type.
            ids = itertools.count()
            for f in schema.pa_schema:
                nullable = f.nullable and f.name not in schema.primary_keys
                field_id = next(ids)
                fields.append(DataField(field_id, f.name,
                                        DataType.from_arrow(f.type, nullable).with_field_ids(ids)))
            highest = next(ids) - 1
        ts = TableSchema(
            id=schema_id,
            fields=tuple(fields),
            highest_field_id=highest,
            partition_keys=tuple(schema.partition_keys),
            primary_keys=tuple(schema.primary_keys),
            options=dict(schema.options),
            comment=schema.comment,
            time_millis=int(time.time() * 1000),
        )
        ts.validate()
        return ts

    def validate(self) -> None:
        """Check options against the fields; raises InvalidOptionError/SchemaError naming the problem."""
        opts = self.core_options
        opts.validate()
        names = set(self.field_names)
        check_no_nested_keys(self)
        for key in self.partition_keys:
            t = self.field(key).type
            if t.root in ("FLOAT", "DOUBLE", "BYTES", "VARBINARY", "BINARY"):
                raise SchemaError(f"partition key '{key}' has type {t}, which cannot be a partition value")
        bucket = opts.bucket
        for opt in (ROWKIND_FIELD,):
            v = opts.get(opt)
            if v is not None and v not in names:
                raise InvalidOptionError(f"option '{opt.key}' names unknown field '{v}'")
        for f in opts.sequence_fields:
            if f not in names:
                raise InvalidOptionError(f"option '{SEQUENCE_FIELD.key}' names unknown field '{f}'")
        for f in opts.bucket_keys:
            if f not in names:
                raise InvalidOptionError(f"option '{BUCKET_KEY.key}' names unknown field '{f}'")
        if self.primary_keys:
            if opts.bucket_keys and not set(opts.bucket_keys) <= set(self.trimmed_primary_keys):
                raise InvalidOptionError(
                    f"option 'bucket-key' ({', '.join(opts.bucket_keys)}) must be a subset of the "
                    f"primary key minus partition fields ({', '.join(self.trimmed_primary_keys)})")
            # A fixed-bucket table whose key lacks a partition field keeps each key once per
            # partition (Paimon and pypaimon accept it; bucket = -1 makes keys global). As in
            # Paimon, it cannot order records by `sequence.field`.
            if bucket > 0 and self.cross_partition_update and opts.sequence_fields:
                raise InvalidOptionError(
                    f"option 'sequence.field' cannot be used when the primary key "
                    f"({', '.join(self.primary_keys)}) lacks a partition field "
                    f"({', '.join(self.partition_keys)}), as in Paimon")
            rk = opts.get(ROWKIND_FIELD)
            if rk is not None and not self.field(rk).type.is_string:
                raise InvalidOptionError(f"option 'rowkind.field' must name a STRING field, '{rk}' is {self.field(rk).type}")
            check_first_row_options(opts)
            check_deletion_vector_options(opts, bucket, self.cross_partition_update)
        else:
            if bucket == POSTPONE_BUCKET_OPTION:
                raise InvalidOptionError("option 'bucket' = -2 (postpone) needs a primary key")
            if bucket > 0 and not opts.bucket_keys:
                raise InvalidOptionError(
                    f"an append table with 'bucket' = {bucket} needs option 'bucket-key'")
            if opts.get(ROWKIND_FIELD) is not None or opts.sequence_fields:
                raise InvalidOptionError("options 'rowkind.field' and 'sequence.field' need a primary key")
            if opts.get(DELETION_VECTORS_ENABLED):
                raise InvalidOptionError(
                    "option 'deletion-vectors.enabled' needs a primary key (as Paimon 0.9: deletion "
                    "vectors mode is only supported for tables with primary keys)")

    # ---- persistence --------------------------------------------------------
    def to_json(self) -> str:
        from lakehouse_engine.format.schema_file import schema_to_json

        return schema_to_json(
            self.id,
            [(f.id, f.name, f.type.to_json(), f.description) for f in self.fields],
            self.highest_field_id,
            list(self.partition_keys),
            list(self.primary_keys),
            dict(self.options),
            self.comment,
            self.time_millis,
        )

    @staticmethod
    def from_json(text: str | bytes, file_name: str) -> TableSchema:
        """Parse a `schema-N` file; CorruptFileError names `file_name` if it is not a valid one."""
        from lakehouse_engine.format.schema_file import schema_from_json

        d = schema_from_json(text, file_name)
        try:
            fields = tuple(
                DataField(fid, name, DataType.from_json(type_value), desc)
                for fid, name, type_value, desc in d["fields"]
            )
            check_unique_field_ids(fields)
        except SchemaError as exc:  # a type string no writer produces: the file is damaged
            raise CorruptFileError(f"schema file {file_name!r}: {exc}") from exc
        return TableSchema(
            id=d["schema_id"], fields=fields, highest_field_id=d["highest_field_id"],
            partition_keys=tuple(d["partition_keys"]), primary_keys=tuple(d["primary_keys"]),
            options=dict(d["options"]), comment=d["comment"], time_millis=d["time_millis"],
        )


def check_first_row_options(opts: CoreOptions) -> None:
    """The first-row merge engine where Paimon's SchemaValidation refuses it: with a changelog
    producer other than none or lookup (an input changelog would list the later rows first-row
    ignores; a full compaction's would too), and with `sequence.field` (the first row is the
    first written); InvalidOptionError."""
    if opts.require(MERGE_ENGINE) != "first-row":
        return
    producer = opts.require(CHANGELOG_PRODUCER)
    if producer not in ("none", "lookup"):
        raise InvalidOptionError(
            f"option 'changelog-producer' = {producer} does not combine with 'merge-engine' = "
            f"first-row (as in Paimon: only none and lookup; the lookup changelog lists each "
            f"new key's first row as +I)")
    if opts.sequence_fields:
        raise InvalidOptionError(
            "option 'sequence.field' does not combine with 'merge-engine' = first-row (as in "
            "Paimon: the first row of a key is the first one written)")


def check_deletion_vector_options(opts: CoreOptions, bucket: int, cross_partition: bool) -> None:
    """`deletion-vectors.enabled` where Paimon refuses it (SchemaValidation: the first-row merge
    engine deletes no old row; `changelog-producer` = full-compaction), and where this engine does
    not maintain vectors (postpone buckets, cross-partition upsert); InvalidOptionError."""
    if not opts.get(DELETION_VECTORS_ENABLED):
        return
    if opts.require(MERGE_ENGINE) == "first-row":
        raise InvalidOptionError(
            "option 'deletion-vectors.enabled' does not combine with 'merge-engine' = first-row "
            "(as in Paimon: that merge engine never deletes an old row, so it needs no vectors)")
    if opts.require(CHANGELOG_PRODUCER) == "full-compaction":
        raise InvalidOptionError(
            "option 'deletion-vectors.enabled' does not combine with 'changelog-producer' = "
            "full-compaction (as in Paimon: use none, input or lookup)")
    if bucket == POSTPONE_BUCKET_OPTION or cross_partition:
        raise InvalidOptionError(
            "option 'deletion-vectors.enabled' is not maintained by this engine for a "
            + ("postpone-bucket table ('bucket' = -2)" if bucket == POSTPONE_BUCKET_OPTION
               else "cross-partition upsert table (its primary key lacks a partition field)")
            + "; use a fixed or dynamic bucket table whose primary key holds the partition fields")


def check_unique_field_ids(fields: Sequence[DataField]) -> None:
    """Raise SchemaError when two fields, top-level or nested in ROW types, share an id."""
    ids = [i for f in fields for i in (f.id, *f.type.field_ids())]
    if len(set(ids)) != len(ids):
        raise SchemaError(f"field ids repeat: {sorted(ids)}")


def check_no_nested_keys(schema: TableSchema) -> None:
    """Paimon's rule: ARRAY, MAP and ROW columns are value columns only, never a primary,
    partition or bucket key or a sequence field. SchemaError names the column."""
    opts = schema.core_options
    for role, names in (("primary key", schema.primary_keys), ("partition key", schema.partition_keys),
                        ("bucket key ('bucket-key')", opts.bucket_keys),
                        ("sequence field ('sequence.field')", opts.sequence_fields)):
        for name in names:
            t = schema.field(name).type if name in schema.field_names else None
            if t is not None and t.is_nested:
                raise SchemaError(f"column '{name}' has nested type {t} and cannot be a {role}")
