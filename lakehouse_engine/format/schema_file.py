"""The `schema-N` JSON file of a Paimon table: fields with ids and type strings, keys and options."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias, TypedDict

from lakehouse_engine.errors import CorruptFileError

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
    field_docs = []
    for field_id, name, type_string, description in fields:
        doc: dict[str, Any] = {"id": field_id, "name": name, "type": type_string}
        if description is not None:
            doc["description"] = description
        if field_id in defaults:
            doc["defaultValue"] = defaults[field_id]
        field_docs.append(doc)
    return json.dumps(
        {
            "version": CURRENT_VERSION,
            "id": schema_id,
            "fields": field_docs,
            "highestFieldId": highest_field_id,
            "partitionKeys": list(partition_keys),
            "primaryKeys": list(primary_keys),
            "options": dict(options),
            "comment": comment,
            "timeMillis": time_millis,
        },
        indent=2,
        ensure_ascii=False,
    )


def schema_from_json(text: str | bytes, file_name: str) -> SchemaJson:
    """Parse a `schema-N` file; raise CorruptFileError naming `file_name` if it is not a valid one.

    Nested types (ARRAY, MAP, ROW are JSON objects in the file) are passed on as parsed JSON.
    As Paimon does, a version-1 file without `bucket` gets bucket "1" and a
    version-1/2 file without `file.format` gets "orc".
    """
    try:
        doc = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptFileError(f"schema file {file_name!r} is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise CorruptFileError(f"schema file {file_name!r} does not hold a JSON object")
    checker = _Checker(file_name)

    version = checker.integer(doc.get("version", _PAIMON_07_VERSION), "version")
    fields: list[SchemaField] = []
    default_values: dict[int, str] = {}
    for raw in checker.array(doc.get("fields"), "fields"):
        field_id, name, type_string, description, default = checker.field(raw)
        fields.append((field_id, name, type_string, description))
        if default is not None:
            default_values[field_id] = default
    names = [f[1] for f in fields]
    if len(set(names)) != len(names) or len({f[0] for f in fields}) != len(fields):
        raise CorruptFileError(f"schema file {file_name!r} repeats a field name or id")

    partition_keys = checker.names(doc.get("partitionKeys"), "partitionKeys", names)
    primary_keys = checker.names(doc.get("primaryKeys"), "primaryKeys", names)
    options = checker.options(doc.get("options"))
    if version <= _PAIMON_07_VERSION:
        options.setdefault("bucket", "1")
    if version <= _PAIMON_08_VERSION:
        options.setdefault("file.format", "orc")
    comment = doc.get("comment")
    if comment is not None and not isinstance(comment, str):
        raise CorruptFileError(f"schema file {file_name!r}: comment should be a string")
    return SchemaJson(
        version=version,
        schema_id=checker.integer(doc.get("id"), "id"),
        fields=fields,
        highest_field_id=checker.integer(doc.get("highestFieldId"), "highestFieldId"),
        partition_keys=partition_keys,
        primary_keys=primary_keys,
        options=options,
        comment=comment,
        time_millis=checker.integer(doc.get("timeMillis", 0), "timeMillis"),
        default_values=default_values,
    )


class _Checker:
    """Type checks of JSON values that raise CorruptFileError naming the file and the key."""

    def __init__(self, file_name: str) -> None:
        self.file_name = file_name

    def fail(self, message: str) -> CorruptFileError:
        return CorruptFileError(f"schema file {self.file_name!r}: {message}")

    def integer(self, value: Any, key: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(f"{key!r} should be an integer, got {value!r}")
        return value

    def string(self, value: Any, key: str) -> str:
        if not isinstance(value, str):
            raise self.fail(f"{key!r} should be a string, got {value!r}")
        return value

    def array(self, value: Any, key: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(f"{key!r} should be a list, got {value!r}")
        return value

    def names(self, value: Any, key: str, known: Sequence[str]) -> list[str]:
        result = [self.string(v, key) for v in self.array(value, key)]
        unknown = [n for n in result if n not in known]
        if unknown:
            raise self.fail(f"{key!r} names unknown fields {unknown}")
        return result

    def field(self, raw: Any) -> tuple[int, str, str | dict[str, Any], str | None, str | None]:
        if not isinstance(raw, dict):
            raise self.fail(f"a field should be a JSON object, got {raw!r}")
        name = self.string(raw.get("name"), "name")
        type_value = raw.get("type")
        description = raw.get("description")
        default = raw.get("defaultValue")
        return (
            self.integer(raw.get("id"), f"id of field {name!r}"),
            name,
            type_value if isinstance(type_value, dict) else self.string(type_value, f"type of field {name!r}"),
            None if description is None else self.string(description, f"description of {name!r}"),
            None if default is None else self.string(default, f"defaultValue of {name!r}"),
        )

    def options(self, value: Any) -> dict[str, str]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(f"'options' should be a JSON object, got {value!r}")
        result: dict[str, str] = {}
        for key, option in value.items():
            # Jackson reads JSON scalars into Map<String, String> as their text; so do we.
            if isinstance(option, bool):
                result[key] = "true" if option else "false"
            elif isinstance(option, (str, int)):
                result[key] = option if isinstance(option, str) else repr(option)
            else:
                raise self.fail(f"option {key!r} should be a string, got {option!r}")
        return result
