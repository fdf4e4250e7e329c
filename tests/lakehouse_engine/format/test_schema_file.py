"""The schema-N JSON codec: byte layout of pypaimon's files, normalization and corrupt input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lakehouse_engine.errors import CorruptFileError, UnsupportedError
from lakehouse_engine.format.schema_file import SchemaJson, schema_from_json, schema_to_json

DATA = Path(__file__).parent / "data"
FIXED_SCHEMA = DATA / "pypaimon_table" / "schema" / "schema-0"
DYNAMIC_SCHEMA = DATA / "pypaimon_dynamic_bucket" / "schema" / "schema-0"

FIXED_EXPECTED = SchemaJson(
    version=3,
    schema_id=0,
    fields=[
        (0, "id", "BIGINT NOT NULL", None),
        (1, "dt", "STRING NOT NULL", None),
        (2, "name", "STRING", None),
        (3, "v", "DOUBLE", None),
        (4, "ts", "TIMESTAMP(6)", None),
    ],
    highest_field_id=4,
    partition_keys=["dt"],
    primary_keys=["id", "dt"],
    options={"bucket": "2"},
    comment=None,
    time_millis=1_795_247_409_908,
    default_values={},
)


def _to_json(parsed: SchemaJson) -> str:
    return schema_to_json(
        parsed["schema_id"],
        parsed["fields"],
        parsed["highest_field_id"],
        parsed["partition_keys"],
        parsed["primary_keys"],
        parsed["options"],
        parsed["comment"],
        parsed["time_millis"],
        default_values=parsed["default_values"],
    )


def _doc(**changes: Any) -> str:
    doc = json.loads(FIXED_SCHEMA.read_text()) | changes
    return json.dumps(doc)


def test_reads_pypaimon_schema() -> None:
    assert schema_from_json(FIXED_SCHEMA.read_text(), "schema-0") == FIXED_EXPECTED


def test_reads_unpartitioned_schema_with_a_comment() -> None:
    parsed = schema_from_json(DYNAMIC_SCHEMA.read_bytes(), "schema-0")
    assert (parsed["partition_keys"], parsed["primary_keys"]) == ([], ["id"])
    assert (parsed["comment"], parsed["options"]) == ("dyn table", {"bucket": "-1"})


@pytest.mark.parametrize("path", [FIXED_SCHEMA, DYNAMIC_SCHEMA], ids=["fixed", "dynamic"])
def test_writes_pypaimon_byte_layout(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert _to_json(schema_from_json(text, path.name)) == text


def test_description_and_default_value_are_written_only_when_set() -> None:
    text = schema_to_json(
        1, [(0, "a", "INT NOT NULL", "the key"), (1, "b", "STRING", None)], 1, [], ["a"],
        {}, "cömment", 7, default_values={1: "x"},
    )  # fmt: skip
    doc = json.loads(text)
    assert doc["fields"] == [
        {"id": 0, "name": "a", "type": "INT NOT NULL", "description": "the key"},
        {"id": 1, "name": "b", "type": "STRING", "defaultValue": "x"},
    ]
    assert '"comment": "cömment"' in text
    parsed = schema_from_json(text, "schema-1")
    assert parsed["fields"][0] == (0, "a", "INT NOT NULL", "the key")
    assert parsed["default_values"] == {1: "x"}


def test_round_trip_keeps_every_value() -> None:
    parsed = schema_from_json(FIXED_SCHEMA.read_text(), "schema-0")
    assert schema_from_json(_to_json(parsed), "schema-0") == parsed


@pytest.mark.parametrize(
    ("version", "expected_options"),
    [
        (None, {"bucket": "1", "file.format": "orc"}),
        (1, {"bucket": "1", "file.format": "orc"}),
        (2, {"file.format": "orc"}),
        (3, {}),
    ],
)
def test_old_versions_get_paimon_defaults(
    version: int | None, expected_options: dict[str, str]
) -> None:
    doc = json.loads(_doc(options={}))
    if version is None:
        del doc["version"]
    else:
        doc["version"] = version
    parsed = schema_from_json(json.dumps(doc), "schema-0")
    assert parsed["options"] == expected_options
    assert parsed["version"] == (version or 1)


def test_old_version_keeps_explicit_options() -> None:
    parsed = schema_from_json(
        _doc(version=1, options={"bucket": "4", "file.format": "parquet"}), "s"
    )
    assert parsed["options"] == {"bucket": "4", "file.format": "parquet"}


def test_scalar_options_are_read_as_their_text() -> None:
    parsed = schema_from_json(_doc(options={"bucket": 4, "changelog": True}), "schema-0")
    assert parsed["options"] == {"bucket": "4", "changelog": "true"}


def test_missing_comment_and_time_default() -> None:
    doc = json.loads(_doc())
    del doc["comment"], doc["timeMillis"]
    parsed = schema_from_json(json.dumps(doc), "schema-0")
    assert (parsed["comment"], parsed["time_millis"]) == (None, 0)


def test_nested_types_pass_through_as_json() -> None:
    doc = json.loads(_doc())
    nested = {"type": "ARRAY", "element": {"type": "ROW", "fields": [{"id": 6, "name": "x", "type": "INT"}]}}
    doc["fields"].append({"id": 5, "name": "tags", "type": nested})
    parsed = schema_from_json(json.dumps(doc), "schema-5")
    assert parsed["fields"][-1] == (5, "tags", nested, None)
    again = schema_to_json(0, parsed["fields"], 6, [], [], {}, None, 0)
    assert json.loads(again)["fields"][-1]["type"] == nested


def test_multiset_type_is_unsupported(tmp_path: Path) -> None:
    from lakehouse_engine.schema import TableSchema

    doc = json.loads(_doc())
    doc["fields"].append({"id": 5, "name": "tags", "type": {"type": "MULTISET", "element": "STRING"}})
    with pytest.raises(UnsupportedError, match="MULTISET"):
        TableSchema.from_json(json.dumps(doc), "schema-5")


@pytest.mark.parametrize("text", ["", "garbage", "[]", "null", '{"version": 3', "{}"])
def test_garbage_raises_corrupt_file_error_naming_the_file(text: str) -> None:
    with pytest.raises(CorruptFileError, match="schema-8"):
        schema_from_json(text, "schema-8")


def test_every_truncation_raises_corrupt_file_error() -> None:
    text = FIXED_SCHEMA.read_text()
    for cut in range(len(text)):
        with pytest.raises(CorruptFileError, match="schema-0"):
            schema_from_json(text[:cut], "schema-0")


@pytest.mark.parametrize(
    "changes",
    [
        {"id": "0"},
        {"highestFieldId": None},
        {"fields": {}},
        {"fields": [{"id": 0, "name": "id"}]},
        {"fields": [{"id": "0", "name": "id", "type": "INT"}]},
        {"fields": [{"id": 0, "name": "a", "type": "INT"}, {"id": 0, "name": "b", "type": "INT"}]},
        {"fields": [{"id": 0, "name": "a", "type": "INT"}, {"id": 1, "name": "a", "type": "INT"}]},
        {"fields": [{"id": 0, "name": "a", "type": "INT", "description": 3}]},
        {"partitionKeys": ["nope"]},
        {"primaryKeys": "id"},
        {"options": ["bucket"]},
        {"options": {"bucket": None}},
        {"comment": 5},
        {"timeMillis": "now"},
    ],
)
def test_invalid_content_raises_corrupt_file_error(changes: dict[str, Any]) -> None:
    with pytest.raises(CorruptFileError, match="schema-3"):
        schema_from_json(_doc(**changes), "schema-3")
