"""The `schema-N` JSON file of a Paimon table: fields with ids and type strings, keys and options."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias, TypedDict

from lakehouse_engine.errors import CorruptFileError
from lakehouse_engine.format.json_spec import JsonKey, JsonObject, dumps

CURRENT_VERSION = 3
_PAIMON_07_VERSION = 1
_PAIMON_08_VERSION = 2

#: One top-level field: (id, name, type, description); the type is a string such as
#: "BIGINT NOT NULL", or for ARRAY, MAP and ROW the JSON object Paimon writes.
SchemaField: TypeAlias = tuple[int, str, "str | dict[str, Any]", str | None]


class SchemaJson(TypedDict):
    """A parsed `schema-N` file, normalized: options as strings, old-version defaults applied."""

    version: int
    schema_id: int
    fields: list[SchemaField]
    highest_field_id: int
    partition_keys: list[str]
    primary_keys: list[str]
    options: dict[str, str]
    comment: str | None
    time_millis: int
    default_values: dict[int, str]


# The keys of a schema file and of each of its fields, in the order pypaimon 2.1.0 writes them.
# `comment` is written even when null; a field's description and defaultValue only when set.
# Missing in older files: `version` (Paimon 0.7 wrote none: 1), `timeMillis`, `options`.
SCHEMA_JSON = JsonObject("schema", (
    JsonKey("version", "version", "int", required=False, default=_PAIMON_07_VERSION),
    JsonKey("id", "schema_id", "int"),
    JsonKey("fields", "fields", "list"),
    JsonKey("highestFieldId", "highest_field_id", "int"),
    JsonKey("partitionKeys", "partition_keys", "str_list"),
    JsonKey("primaryKeys", "primary_keys", "str_list"),
    JsonKey("options", "options", "str_map", required=False, default=dict),
    JsonKey("comment", "comment", "str", required=False, write_null=True),
    JsonKey("timeMillis", "time_millis", "int", required=False, default=0),
))
SCHEMA_FIELD_JSON = JsonObject("schema", (
    JsonKey("id", "id", "int"),
    JsonKey("name", "name", "str"),
    JsonKey("type", "type", "any"),        # a type string; nested types are JSON objects
    JsonKey("description", "description", "str", required=False),
    JsonKey("defaultValue", "default_value", "str", required=False),
))


def schema_to_json(
    schema_id: int,
    fields: Sequence[SchemaField],
    highest_field_id: int,
    partition_keys: Sequence[str],
    primary_keys: Sequence[str],
    options: Mapping[str, str],
    comment: str | None,
    time_millis: int,
    *,
    default_values: Mapping[int, str] | None = None,
) -> str:
    """Render a `schema-N` file byte for byte as pypaimon 2.1.0 does (version 3, indent 2).

    `default_values` maps field ids to Paimon's per-field `defaultValue` strings, if any.
    """
    defaults = default_values or {}
    field_docs = [SCHEMA_FIELD_JSON.write({"id": field_id, "name": name, "type": type_string,
                                           "description": description,
                                           "default_value": defaults.get(field_id)})
                  for field_id, name, type_string, description in fields]
    return dumps(SCHEMA_JSON.write({
        "version": CURRENT_VERSION, "schema_id": schema_id, "fields": field_docs,
        "highest_field_id": highest_field_id, "partition_keys": list(partition_keys),
        "primary_keys": list(primary_keys), "options": dict(options), "comment": comment,
        "time_millis": time_millis}))


def schema_from_json(text: str | bytes, file_name: str) -> SchemaJson:
    """Parse a `schema-N` file; raise CorruptFileError naming `file_name` if it is not a valid one.

    Nested types (ARRAY, MAP, ROW are JSON objects in the file) are passed on as parsed JSON.
    As Paimon does, a version-1 file without `bucket` gets bucket "1" and a
    version-1/2 file without `file.format` gets "orc".
    """
    doc = SCHEMA_JSON.read(SCHEMA_JSON.load(text, file_name), file_name)
    fields: list[SchemaField] = []
    default_values: dict[int, str] = {}
    for raw in doc["fields"]:
        f = SCHEMA_FIELD_JSON.read(raw, file_name, where="fields.")
        if not isinstance(f["type"], (str, dict)):
            raise CorruptFileError(f"schema file {file_name!r}: the type of field {f['name']!r} "
                                   f"should be a string or (ARRAY, MAP, ROW) a JSON object, got "
                                   f"{f['type']!r}")
        fields.append((f["id"], f["name"], f["type"], f["description"]))
        if f["default_value"] is not None:
            default_values[f["id"]] = f["default_value"]
    names = [f[1] for f in fields]
    if len(set(names)) != len(names) or len({f[0] for f in fields}) != len(fields):
        raise CorruptFileError(f"schema file {file_name!r} repeats a field name or id")
    for key, attr in (("partitionKeys", "partition_keys"), ("primaryKeys", "primary_keys")):
        unknown = [n for n in doc[attr] if n not in names]
        if unknown:
            raise CorruptFileError(f"schema file {file_name!r}: {key!r} names unknown fields {unknown}")
    options: dict[str, str] = doc["options"]
    version: int = doc["version"]
    if version <= _PAIMON_07_VERSION:
        options.setdefault("bucket", "1")
    if version <= _PAIMON_08_VERSION:
        options.setdefault("file.format", "orc")
    return SchemaJson(
        version=version,
        schema_id=doc["schema_id"],
        fields=fields,
        highest_field_id=doc["highest_field_id"],
        partition_keys=doc["partition_keys"],
        primary_keys=doc["primary_keys"],
        options=options,
        comment=doc["comment"],
        time_millis=doc["time_millis"],
        default_values=default_values,
    )
