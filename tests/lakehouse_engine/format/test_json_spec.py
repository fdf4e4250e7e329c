"""format/json_spec.py: one description reads and writes a kind of JSON object."""

from __future__ import annotations

import json

import pytest

from lakehouse_engine.errors import CorruptFileError
from lakehouse_engine.format.json_spec import JsonKey, JsonObject, dumps
from lakehouse_engine.format.schema_file import SCHEMA_JSON, schema_from_json, schema_to_json
from lakehouse_engine.format.snapshot import SNAPSHOT_JSON

THING = JsonObject("thing", (
    JsonKey("zId", "id", "int"),
    JsonKey("aName", "name", "str", required=False),
    JsonKey("note", "note", "str", required=False, write_null=True),
    JsonKey("opts", "opts", "str_map", required=False, default=dict),
))


def test_writes_keys_in_the_described_order_leaving_out_none_unless_told() -> None:
    doc = THING.write({"name": None, "id": 7, "opts": {"b": "1"}}, extra={"zz": 1, "zId": 9})
    assert list(doc) == ["zId", "note", "opts", "zz"]
    assert doc == {"zId": 7, "note": None, "opts": {"b": "1"}, "zz": 1}
    assert dumps(doc).startswith('{\n  "zId": 7,')


def test_reads_with_defaults_and_keeps_unknown_keys_apart() -> None:
    doc = {"zId": 1, "opts": {"a": 1, "b": True}, "later": [1]}
    assert THING.read(doc, "f") == {"id": 1, "name": None, "note": None, "opts": {"a": "1", "b": "true"}}
    assert THING.extra(doc) == {"later": [1]}


@pytest.mark.parametrize(("text", "message"), [
    ("{", "thing file 'f' is not valid JSON"),
    ("[1]", "does not hold a JSON object"),
    ('{"aName": "x"}', "lacks required field 'zId'"),
    ('{"zId": "1"}', "field 'zId' should be an integer, got '1'"),
    ('{"zId": true}', "field 'zId' should be an integer"),
    ('{"zId": 1, "opts": {"a": 1.5}}', "field 'opts' should be a JSON object of strings"),
])
def test_bad_documents_name_the_file_and_the_key(text: str, message: str) -> None:
    with pytest.raises(CorruptFileError, match=message):
        THING.read(THING.load(text, "f"), "f")


def test_the_schema_file_keeps_paimons_exact_json() -> None:
    text = schema_to_json(0, [(0, "id", "BIGINT NOT NULL", None), (1, "v", "STRING", "a value")],
                          1, [], ["id"], {"bucket": "2"}, None, 1700000000000, default_values={1: "x"})
    doc = json.loads(text)
    assert list(doc) == ["version", "id", "fields", "highestFieldId", "partitionKeys", "primaryKeys",
                         "options", "comment", "timeMillis"]
    assert doc["comment"] is None and doc["version"] == 3
    assert doc["fields"] == [{"id": 0, "name": "id", "type": "BIGINT NOT NULL"},
                             {"id": 1, "name": "v", "type": "STRING", "description": "a value",
                              "defaultValue": "x"}]
    assert schema_from_json(text, "schema-0")["default_values"] == {1: "x"}
    assert [k.key for k in SCHEMA_JSON.keys] == list(doc)


def test_a_bad_schema_field_is_named() -> None:
    doc = json.loads(schema_to_json(0, [(0, "id", "BIGINT", None)], 0, [], [], {}, None, 0))
    doc["fields"][0]["id"] = "zero"
    with pytest.raises(CorruptFileError, match="'fields.id' should be an integer"):
        schema_from_json(json.dumps(doc), "schema-0")


def test_snapshot_keys_are_pypaimons_order() -> None:
    assert [k.key for k in SNAPSHOT_JSON.keys][:11] == [
        "version", "id", "schemaId", "baseManifestList", "deltaManifestList", "totalRecordCount",
        "deltaRecordCount", "commitUser", "commitIdentifier", "commitKind", "timeMillis"]
