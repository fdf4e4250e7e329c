"""Honour or refuse every option: a refused option or value, and a near miss of a known key, are
refused by create_table, alter_table and table.copy with nothing written; other keys are kept."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, InvalidOptionError, Schema
from lakehouse_engine.options import OPTIONS
from lakehouse_engine.options.inventory import INVENTORY, Status
from lakehouse_engine.options.support import near_miss, option_status, unused_keys
from lakehouse_engine.schema_change import SchemaChange
from tests.lakehouse_engine.conftest import create_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
PYPAIMON_CORE_OPTIONS = (Path(__file__).resolve().parents[3] / ".venv-interop" / "lib" / "python3.11"
                         / "site-packages" / "pypaimon" / "common" / "options" / "core_options.py")


def _refused_value(key: str) -> str:
    """A value of refused option `key` that asks for something this engine does not do."""
    option = OPTIONS.get(key)
    if option is not None:
        if option.kind == "bool":
            return "false" if option.default else "true"
        assert option.choices is not None
        return next(c for c in option.choices if c != option.default)
    accepted = INVENTORY[key].accepted
    return "false" if "true" in accepted else "true" if "false" in accepted else "from-timestamp"


REFUSED = sorted([k for k, o in OPTIONS.items() if o.status is Status.REFUSED]
                 + [k for k, e in INVENTORY.items() if e.status is Status.REFUSED])


@pytest.mark.parametrize("key", REFUSED)
def test_create_table_refuses_an_option_this_engine_would_ignore_and_writes_nothing(
        catalog: Catalog, key: str) -> None:
    value = _refused_value(key)
    with pytest.raises(InvalidOptionError, match=rf"option '{re.escape(key)}' = '{re.escape(value)}' is not supported"):
        catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={key: value}))
    assert catalog.list_tables("db") == []
    assert not (Path(catalog.warehouse) / "db.db" / "t").exists()


@pytest.mark.parametrize("options", [
    {"changelog-producer": "none"}, {"deletion-vectors.enabled": "false"}, {"scan.mode": "latest"},
    {"branch": "main"}, {"type": "table"}, {"bucket-function.type": "default"},
    {"partition.legacy-name": "true"}, {"manifest.format": "avro"}, {"row-tracking.enabled": "False"},
])
def test_a_refused_option_set_to_what_this_engine_does_anyway_is_accepted(catalog: Catalog, options: dict[str, str]) -> None:
    table = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1", **options})
    write(table, pa.table({"id": [1], "v": ["a"]}, schema=SCHEMA))
    assert read(table).to_pylist() == [{"id": 1, "v": "a"}]


def test_the_refusal_says_what_to_do_instead(catalog: Catalog) -> None:
    with pytest.raises(InvalidOptionError, match="record-level.expire-time' = '1 d'.*write of -D rows"):
        create_table(catalog, "t", SCHEMA, ["id"], options={"record-level.expire-time": "1 d"})
    with pytest.raises(InvalidOptionError, match="primary_keys="):
        create_table(catalog, "t", SCHEMA, options={"primary-key": "id"})


def test_alter_table_refuses_a_refused_option_and_keeps_the_schema(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1"})
    with pytest.raises(InvalidOptionError, match="record-level.expire-time"):
        catalog.alter_table("db.t", [SchemaChange.set_option("record-level.expire-time", "1 d")])
    with pytest.raises(InvalidOptionError, match="did you mean 'snapshot.num-retained.max'"):
        catalog.alter_table("db.t", [SchemaChange.set_option("snapshot.num-retained-max", "5")])
    assert catalog.get_table("db.t").schema.id == table.schema.id
    assert sorted(p.name for p in (Path(table.path) / "schema").iterdir()) == ["schema-0"]


def test_alter_table_checks_only_the_options_it_changes(catalog: Catalog) -> None:
    """A table another engine made with a refused option can still have its other options altered."""
    table = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1"})
    path = Path(table.path) / "schema" / "schema-0"
    path.write_text(path.read_text().replace('"bucket": "1"', '"bucket": "1", "row-tracking.enabled": "true"'))
    assert catalog.get_table("db.t").schema.options["row-tracking.enabled"] == "true"
    catalog.alter_table("db.t", [SchemaChange.set_option("snapshot.num-retained.min", "3")])
    assert catalog.get_table("db.t").schema.options["snapshot.num-retained.min"] == "3"


def test_copy_refuses_a_refused_dynamic_option(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1"})
    write(table, pa.table({"id": [1], "v": ["a"]}, schema=SCHEMA))
    with pytest.raises(InvalidOptionError, match="scan.timestamp.*scan.snapshot-id"):
        table.copy({"scan.timestamp": "2026-11-27 00:00:00"})
    with pytest.raises(InvalidOptionError, match="did you mean 'scan.snapshot-id'"):
        table.copy({"scan.snapshotid": "1"})
    assert read(table.copy({"scan.snapshot-id": "1"})).num_rows == 1


@pytest.mark.parametrize(("key", "meant"), [
    ("changelog-prodcer", "changelog-producer"), ("bucket-keys", "bucket-key"), ("Bucket", "bucket"),
    ("merge_engine", "merge-engine"), ("sequence-field", "sequence.field"),
    ("write-bufer-size", "write-buffer-size"), ("deletion-vector.enabled", "deletion-vectors.enabled"),
])
def test_a_near_miss_of_a_known_key_is_refused_with_did_you_mean(catalog: Catalog, key: str, meant: str) -> None:
    with pytest.raises(InvalidOptionError, match=rf"unknown option '{re.escape(key)}': did you mean '{re.escape(meant)}'"):
        create_table(catalog, "t", SCHEMA, ["id"], options={key: "1"})
    assert catalog.list_tables("db") == []


def test_user_keys_and_stored_only_options_are_kept_and_listed_as_unused(catalog: Catalog) -> None:
    options = {"bucket": "1", "owner": "data-team", "my.custom.key": "x", "sink.parallelism": "4",
               "lookup.cache-rows": "1000", "consumer.mode": "at-least-once",
               "fields.v.ignore-retract": "true"}
    table = create_table(catalog, "t", SCHEMA, ["id"], options=options)
    assert catalog.get_table("db.t").schema.options == options
    assert unused_keys(table.schema.options) == ["owner", "my.custom.key", "sink.parallelism",
                                                  "lookup.cache-rows", "consumer.mode"]


def test_no_key_is_both_declared_and_in_the_inventory() -> None:
    assert set(OPTIONS) & set(INVENTORY) == set()


def test_every_inventory_entry_says_why() -> None:
    assert all(e.why for e in INVENTORY.values())
    assert all(o.why for o in OPTIONS.values() if o.status is not Status.IMPLEMENTED)


@pytest.mark.skipif(not PYPAIMON_CORE_OPTIONS.exists(), reason="pypaimon 2.1.0 is not installed in .venv-interop")
def test_every_option_of_pypaimon_2_1_0_has_a_status() -> None:
    keys = re.findall(r'key\("([^"]+)"\)', PYPAIMON_CORE_OPTIONS.read_text())
    assert len(keys) > 100
    assert [k for k in keys if option_status(k) is None] == []


def test_near_miss_leaves_known_keys_and_far_keys_alone() -> None:
    assert near_miss("bucket") is None and near_miss("lookup.cache-rows") is None
    assert near_miss("owner") is None and near_miss("fields.v.aggregate-function") is None
    assert near_miss("file-index.bloom-filter.columns") is None


def test_near_miss_of_an_entry_points_own_keys_and_in_sparks_lowercase() -> None:
    own = ("warehouse", "partitions", "snapshot-id")
    assert near_miss("partition", own) == "partitions"  # a Paimon key, but a typo of the source's own
    assert near_miss("snapshot_id", own) == "snapshot-id" and near_miss("scan.mod", own) == "scan.mode"
    assert near_miss("partitions", own) is None and near_miss("owner", own) is None
    # Spark lowercases every key: a known key in lowercase is that key, not its typo.
    assert near_miss("read.stream.maxbytespertrigger") == "read.stream.maxBytesPerTrigger"
    assert near_miss("read.stream.maxbytespertrigger", own, ignore_case=True) is None
    assert near_miss("warehouse", own, ignore_case=True) is None


def test_a_stream_read_of_a_copy_with_a_near_miss_is_refused_before_it_starts(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1", "consumer-id": "etl"})
    write(table, pa.table({"id": [1], "v": ["a"]}, schema=SCHEMA))
    with pytest.raises(InvalidOptionError, match="unknown option 'scan.mod': did you mean 'scan.mode'"):
        table.copy({"scan.mod": "latest"}).new_stream_read_builder().new_streaming_scan().plan()
    assert table.consumer_manager().consumers() == {}
