"""Stored-only options are type-checked where Paimon declares a type: a value Paimon (Java) and
pypaimon could not parse is refused when set, naming the option and the value, with nothing
written; every value Paimon's parsers take is accepted; a table another engine wrote opens
whatever it holds."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, InvalidOptionError
from lakehouse_engine.options import parse_duration_ms, parse_memory_size
from lakehouse_engine.options.inventory import INVENTORY, Status
from lakehouse_engine.options.stored_kinds import (
    PAIMON_FALLBACKS,
    STORED_KINDS,
    stored_value_problem,
)
from lakehouse_engine.options.support import near_miss, option_status
from lakehouse_engine.schema_change import SchemaChange
from tests.lakehouse_engine.conftest import create_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


@pytest.mark.parametrize(("key", "value", "kind"), [
    ("changelog-producer.lookup-wait", "maybe", "a boolean"),  # Paimon's older spelling of lookup-wait
    ("lookup-wait", "maybe", "a boolean"),
    ("write.batch-size", "lots", "an int"),
    ("write.batch-size", "2147483648", "an int"),               # past a Java int
    ("lookup.cache-rows", "1e6", "a long"),
    ("lookup.hash-load-factor", "high", "a float"),
    ("write-manifest-cache", "64 megs", "a memory size"),
    ("snapshot.watermark-idle-timeout", "1.5 h", "a duration"),
    ("tag.creation-delay", "5 mins", "a duration"),             # Paimon has 'min' and 'minutes'
    ("sort-engine", "heap", "an enum"),
    ("tag.automatic-creation", "daily", "an enum"),
])
def test_create_and_alter_refuse_a_stored_value_paimon_cannot_parse_and_write_nothing(
        catalog: Catalog, key: str, value: str, kind: str) -> None:
    # Before: kept, and Java failed on the table (or, for the older spelling, took it for a typo).
    match = rf"option '{key}' has invalid value '{value}'.*Paimon reads '{key}' as {kind}"
    with pytest.raises(InvalidOptionError, match=match):
        create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1", key: value})
    assert catalog.list_tables("db") == []
    table = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1"})
    with pytest.raises(InvalidOptionError, match=match):
        catalog.alter_table("db.t", [SchemaChange.set_option(key, value)])
    with pytest.raises(InvalidOptionError, match=match):
        table.copy({key: value})
    assert sorted(p.name for p in (Path(table.path) / "schema").iterdir()) == ["schema-0"]


@pytest.mark.parametrize(("key", "value"), [
    ("lookup-wait", "TRUE"), ("lookup-wait", "False"), ("lookup-wait", "yes"),  # Java's, and pypaimon's
    ("changelog-producer.lookup-wait", "false"),
    ("write.batch-size", "+1024"), ("write.batch-size", "-1"), ("lookup.cache-rows", "9223372036854775807"),
    ("lookup.hash-load-factor", "0.75"), ("lookup.hash-load-factor", "0.75f"), ("compaction.delete-ratio-threshold", "1e-1"),
    ("write-manifest-cache", "64 mb"), ("write-manifest-cache", "1gb"), ("write-manifest-cache", "2 mebibytes"),
    ("write-manifest-cache", "1 T"), ("write-manifest-cache", "1024"),
    ("snapshot.watermark-idle-timeout", "1 h"), ("snapshot.watermark-idle-timeout", "1H"),
    ("snapshot.watermark-idle-timeout", "10 µs"), ("snapshot.watermark-idle-timeout", "1000 nanoseconds"),
    ("snapshot.watermark-idle-timeout", "2 days"), ("snapshot.watermark-idle-timeout", "30secs"),
    ("sort-engine", "loser-tree"), ("sort-engine", "LOSER_TREE"), ("sort-engine", "Min-Heap"),
    ("tag.automatic-creation", "process-time"), ("consumer.mode", "at-least-once"),
    ("sink.parallelism", "4"), ("orc.write.batch-size", "1024"),
])
def test_every_value_paimons_parsers_take_is_accepted(catalog: Catalog, key: str, value: str) -> None:
    table = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1", key: value})
    assert catalog.get_table("db.t").schema.options[key] == value
    write(table, pa.table({"id": [1], "v": ["a"]}, schema=SCHEMA))
    assert read(catalog.get_table("db.t")).num_rows == 1


def test_a_table_another_engine_wrote_opens_whatever_its_stored_options_hold(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1"})
    write(table, pa.table({"id": [1], "v": ["a"]}, schema=SCHEMA))
    path = Path(table.path) / "schema" / "schema-0"
    path.write_text(path.read_text().replace('"bucket": "1"', '"bucket": "1", "lookup-wait": "maybe"'))
    opened = catalog.get_table("db.t")
    assert read(opened).num_rows == 1
    # Altering another option leaves the foreign value alone (only keys being set are checked).
    catalog.alter_table("db.t", [SchemaChange.set_option("snapshot.num-retained.min", "3")])
    assert catalog.get_table("db.t").schema.options["lookup-wait"] == "maybe"


def test_paimons_durations_and_sizes_in_its_own_spellings_read_in_implemented_options() -> None:
    # A Java table with `snapshot.time-retained` = '30000 micros' or `write-buffer-size` =
    # '64 mebibytes' failed to open here before (both are Paimon's units).
    assert parse_memory_size("64 mebibytes") == 64 << 20 and parse_memory_size("1 KIBIBYTES") == 1024
    assert parse_memory_size("3 Tebibytes") == 3 << 40 and parse_memory_size("2 gibibytes") == 2 << 30
    assert parse_duration_ms("30000 micros") == 30 and parse_duration_ms("999 µs") == 0
    assert parse_duration_ms("5000000 ns") == 5 and parse_duration_ms("1 Microseconds") == 0
    for bad in ("1.5 h", "5 mins", "-5", "1 w", "10 us", ""):
        with pytest.raises(ValueError):
            parse_duration_ms(bad)


def test_paimons_older_spellings_are_known_not_typos() -> None:
    # Before: 'orc.write.batch-size' was refused as a near miss of 'write.batch-size', and
    # 'write.compaction-skip' (Java's older 'write-only') was kept and ignored.
    for old, key in PAIMON_FALLBACKS.items():
        assert near_miss(old) is None and option_status(old) is INVENTORY[key].status
    assert option_status("write.compaction-skip") is Status.IMPLEMENTED
    assert option_status("log.scan") is Status.REFUSED


def test_the_older_spelling_of_write_only_is_honoured(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1", "write.compaction-skip": "true",
                                                                "num-sorted-run.compaction-trigger": "2"})
    for i in range(4):
        write(table, pa.table({"id": [i], "v": ["a"]}, schema=SCHEMA))
    assert {s.commit_kind for s in catalog.get_table("db.t").snapshots()} == {"APPEND"}


def test_the_kinds_cover_only_stored_options_and_their_spellings() -> None:
    for key in STORED_KINDS:
        target = PAIMON_FALLBACKS.get(key, key)
        assert INVENTORY[target].status is Status.STORED, key
    assert stored_value_problem("owner", "anything") is None  # a user key
    assert stored_value_problem("commit.callbacks", "x,y") is None  # a string option


def test_paimons_older_start_options_are_refused_unless_they_read_what_the_default_reads(catalog: Catalog) -> None:
    # Java starts from them (a timestamp alone turns 'default' into from-timestamp); this
    # engine's start options read only 'scan.mode' and 'scan.timestamp-millis'.
    with pytest.raises(InvalidOptionError, match="log.scan' = 'latest'.*spell it 'scan.mode'"):
        create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1", "log.scan": "latest"})
    with pytest.raises(InvalidOptionError, match="log.scan.timestamp-millis.*spell it 'scan.timestamp-millis'"):
        create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1", "log.scan.timestamp-millis": "1"})
    table = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1", "log.scan": "latest-full"})
    write(table, pa.table({"id": [1], "v": ["a"]}, schema=SCHEMA))
    assert read(table).num_rows == 1

