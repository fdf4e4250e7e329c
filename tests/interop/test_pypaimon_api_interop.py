"""One script in pypaimon 2.1.0's API, run by pypaimon and by our engine (only the imports
differ): both must give the same results, call for call."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

SCENARIO = """
SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("name", pa.string())])
out = {}
catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
catalog.create_database("default", True)
catalog.create_database("other", True)
ident = Identifier.create("default", "t")
out["ident"] = [ident.get_database_name(), ident.get_table_name(), ident.get_full_name(),
                Identifier.from_string("default.t") == ident]
catalog.create_table(ident, Schema.from_pyarrow_schema(
    SCHEMA, partition_keys=["dt"], primary_keys=["dt", "id"], options={"bucket": "1"}), False)
table = catalog.get_table("default.t")


def write(table, rows, overwrite=False):
    wb = table.new_batch_write_builder()
    if overwrite:
        wb.overwrite()
    w, c = wb.new_write(), wb.new_commit()
    if rows:
        w.write_arrow(pa.Table.from_pylist(
            [dict(zip(SCHEMA.names, r)) for r in rows], schema=SCHEMA))
    c.commit(w.prepare_commit())
    w.close()
    c.close()


def read(table, predicate=None):
    rb = table.new_read_builder()
    if predicate is not None:
        rb = rb.with_filter(predicate)
    t = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return sorted([r["dt"], r["id"], r["name"]] for r in t.to_pylist())


write(table, [("a", 1, "apple"), ("b", 2, "banana"), ("c", 3, None)])
first_ms = table.snapshot_manager().get_snapshot_by_id(1).time_millis
write(table, [("a", 4, "cherry")])
write(table, [("a", 5, "date")], overwrite=True)       # dynamic: replaces partition a only
out["dynamic_overwrite"] = read(table)
write(table, [], overwrite=True)                        # nothing written: nothing replaced
sm = table.snapshot_manager()
out["snapshots"] = [sm.get_latest_snapshot().id, sm.get_snapshot_by_id(99) is None]
out["plan_snapshot"] = table.new_read_builder().new_scan().plan().snapshot_id

pb = table.new_read_builder().new_predicate_builder()
out["predicates"] = {
    "contains": read(table, pb.contains("name", "an")),
    "endswith": read(table, pb.endswith("name", "te")),
    "like": read(table, pb.like("name", "b_n%")),
    "not_between": read(table, pb.not_between("id", 2, 4)),
    "is_in_none": read(table, pb.is_in("name", [None])),
}

table.create_tag("v1", 1)
table.create_tag("v1", 2, ignore_if_exists=True)
try:
    table.create_tag("v1", 2)
    out["duplicate_tag"] = "no error"
except ValueError:
    out["duplicate_tag"] = "ValueError"
catalog.create_tag("default.t", "v2", time_retained="1d")
table.rename_tag("v2", "w2")
out["tags"] = [sorted(table.list_tags()), table.delete_tag("w2"), table.delete_tag("w2"),
               catalog.list_tags_paged("default.t").elements]
out["tag_v1"] = catalog.get_tag("default.t", "v1").snapshot.id

parts = catalog.list_partitions_paged("default.t").elements
out["partitions"] = sorted([p.spec["dt"], p.record_count, p.file_count] for p in parts)
catalog.drop_partitions("default.t", [{"dt": "b"}])
out["after_drop"] = read(catalog.get_table("default.t"))

catalog.rename_table("default.t", "other.t2")
renamed = catalog.get_table("other.t2")
out["renamed"] = [read(renamed), sorted(catalog.list_tables("default"))]
renamed.rollback_to_timestamp(first_ms)
out["rolled_back"] = read(renamed)
emit(out)
"""

# Issue 31's calls: pypaimon's exception attributes and words, identifiers, DataField.from_dict and
# Schema(fields=...), Predicate(method, index, field, literals), NOT IN with None, _row_kind under a
# projection, unknown dotted projections, per-partition bucket pruning, tag retention in
# microseconds, replace_tag on the latest snapshot, data file names.
SCENARIO_31 = """
import os, re
out = {}
catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
catalog.create_database("my.db", True)
ident = Identifier.from_string("`my.db`.`t.1`")
out["ident"] = [ident.get_database_name(), ident.get_table_name(),
                Identifier.from_string("mydb.my.table").get_table_name(),
                Identifier.create("unknown", "x").get_full_name(),
                Identifier("db", "t", branch="dev").get_object_name(),
                Identifier.create("db", "t$snapshots").get_system_table_name()]
fields = [DataField.from_dict({"id": 0, "name": "part", "type": "STRING NOT NULL"}),
          DataField.from_dict({"id": 1, "name": "id", "type": "BIGINT NOT NULL"}),
          DataField(2, "v", AtomicType("STRING"))]
catalog.create_table(ident, Schema(fields=fields, partition_keys=["part"], primary_keys=["part", "id"],
                                   options={"bucket": "4"}), False)
table = catalog.get_table("`my.db`.`t.1`")
out["fields"] = [[f.id, f.name, str(f.type)] for f in table.fields]
pa_schema = pa.schema([pa.field("part", pa.string(), nullable=False), pa.field("id", pa.int64(), nullable=False),
                       ("v", pa.string())])
wb = table.new_batch_write_builder()
w = wb.new_write()
w.write_arrow(pa.Table.from_pylist([{"part": p, "id": i, "v": f"{p}{i}"} for p in "ab" for i in (1, 2, 3)],
                                   schema=pa_schema))
wb.new_commit().commit(w.prepare_commit())
w.close()
out["file_names"] = sorted(bool(re.fullmatch(r"data-[0-9a-f-]{36}-0[.]parquet", n))
                           for _, _, names in os.walk(ARGS["warehouse"]) for n in names if n.endswith(".parquet"))


def read(rb, row_kind=False):
    read = rb.new_read()
    if row_kind:
        read.include_row_kind = True
    t = read.to_arrow(rb.new_scan().plan().splits())
    return [t.column_names, sorted(map(str, t.to_pylist()))]


pb = table.new_read_builder().new_predicate_builder()
mixed = pb.or_predicates([pb.and_predicates([pb.equal("part", "a"), pb.equal("id", 1)]),
                          pb.and_predicates([pb.equal("part", "b"), pb.equal("id", 2)])])
rb = table.new_read_builder().with_filter(mixed)
out["mixed_or"] = [len(rb.new_scan().plan().splits()) <= 2, read(rb)]
out["row_kind"] = read(table.new_read_builder().with_projection(["id", "part"]).with_filter(pb.equal("id", 3)), True)
out["not_in_none"] = [read(table.new_read_builder().with_filter(pb.is_not_in("v", ["a1", None]))),
                      read(table.new_read_builder().with_filter(
                          Predicate(method="notIn", index=1, field="id", literals=[1, 2])))]
out["dotted_projection"] = read(table.new_read_builder().with_projection(["id", "nonexistent.foo"]))

table.create_tag("t1", 1)
try:
    catalog.create_tag(ident, "t1")
except TagAlreadyExistException as e:
    out["duplicate_tag"] = e.tag
try:
    catalog.get_tag(ident, "absent")
except TagNotExistException as e:
    out["missing_tag"] = e.tag
try:
    table.replace_tag("absent", 1)
except ValueError as e:
    out["replace_missing"] = "doesn't exist" in str(e)
w = wb.new_write()
w.write_arrow(pa.Table.from_pylist([{"part": "a", "id": 9, "v": "x"}], schema=pa_schema))
wb.new_commit().commit(w.prepare_commit())
table.replace_tag("t1")
out["replaced_to_latest"] = table.tag_manager().get("t1").trim_to_snapshot().id
catalog.create_tag(ident, "micro", time_retained="500micro")
out["micro"] = catalog.get_tag(ident, "micro").tag_time_retained
try:
    catalog.create_tag(ident, "nano", time_retained="1ns")
except ValueError:
    out["nano"] = "ValueError"
try:
    catalog.get_table("`my.db`.missing")
except TableNotExistException as e:
    out["missing_table"] = e.identifier.get_full_name()
emit(out)
"""

OURS_PREAMBLE_31 = """
import pyarrow as pa
from lakehouse_engine import CatalogFactory, Identifier, Schema
from lakehouse_engine.data_types import AtomicType
from lakehouse_engine.errors import TableNotExistException, TagAlreadyExistException, TagNotExistException
from lakehouse_engine.read.predicate import Predicate
from lakehouse_engine.schema import DataField
"""

THEIR_IMPORTS_31 = """
from pypaimon.catalog.catalog_exception import (TableNotExistException, TagAlreadyExistException,
                                                TagNotExistException)
from pypaimon.common.identifier import Identifier
from pypaimon.common.predicate import Predicate
from pypaimon.schema.data_types import AtomicType, DataField
"""

# The second round of issue 31's calls: alter_table's RuntimeErrors and Paimon's words, `type`
# and the key fields restated, NOT NULL under `alter-column-null-to-not-null.disabled`,
# CoreOptions(Options(...)) accessors, a malformed identifier that builds, a MAP's dict, and the
# postpone fixed-bucket write (bucket counts from the input, rows readable at once, file paths,
# one partition with two counts refused).
SCENARIO_31B = """
out = {}
catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
catalog.create_database("db", True)
s = pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("dt", pa.string(), nullable=False),
               ("value", pa.string()), ("n", pa.int32())])
catalog.create_table("db.t", Schema.from_pyarrow_schema(s, primary_keys=["id"], options={"bucket": "1"}), False)
t = catalog.get_table("db.t")
wb = t.new_batch_write_builder()
w = wb.new_write()
w.write_arrow(pa.Table.from_pylist([{"id": 1, "dt": "a", "value": "x"}], schema=s))
wb.new_commit().commit(w.prepare_commit())
errors = []
for change in (SchemaChange.set_option("merge-engine", "first-row"), SchemaChange.set_option("type", "format-table"),
               SchemaChange.update_column_type("value", AtomicType("STRING", nullable=False)),
               SchemaChange.update_column_type("n", AtomicType("DECIMAL(10, 2)"))):
    try:
        catalog.alter_table("db.t", [change], False)
        errors.append("no error")
    except RuntimeError as e:
        text = str(e)
        errors.append([w for w in ("is not supported yet", "nullable to non nullable", "no executable cast",
                                   "primary key") if w in text])
out["alter_errors"] = errors
catalog.alter_table("db.t", [SchemaChange.set_option("type", "table"), SchemaChange.set_option("primary-key", "id")],
                    False)
out["restated"] = sorted(catalog.get_table("db.t").table_schema.options)
catalog.alter_table("db.t", [SchemaChange.set_option("alter-column-null-to-not-null.disabled", "false")], False)
catalog.alter_table("db.t", [SchemaChange.update_column_type("dt", AtomicType("STRING", nullable=False))], False)
out["not_null"] = catalog.get_table("db.t").fields[1].type.nullable
opts = CoreOptions(Options({"merge-engine": "first-row", "deletion-vectors.enabled": "true"}))
out["options"] = [opts.merge_engine() == MergeEngine.FIRST_ROW, opts.deletion_vectors_enabled()]
bad = Identifier("db", "orders$schemas$snapshots")
try:
    bad.is_system_table()
    out["malformed"] = "no error"
except ValueError:
    out["malformed"] = "ValueError"
out["map_dict"] = MapType(False, AtomicType("STRING", nullable=False), AtomicType("INT")).to_dict()

catalog.create_table("db.p", Schema.from_pyarrow_schema(s, partition_keys=["dt"], primary_keys=["id", "dt"], options={
    "bucket": "-2", "postpone.target-size-per-bucket": "100 b",
    "postpone.batch-write-fixed-bucket.max-parallelism": "3"}), False)
p = catalog.get_table("db.p")
builder = p.new_postpone_fixed_bucket_write_builder()
w = builder.new_write()
w.write_arrow(pa.Table.from_pylist([{"id": 1, "dt": "small", "value": "x"},
                                    {"id": 2, "dt": "large", "value": "x" * 500}], schema=s))
messages = w.prepare_commit()
out["planned"] = sorted([list(m.partition), m.total_buckets] for m in messages)
out["paths_exist"] = all(os.path.exists(f.external_path or f.file_path) for m in messages for f in m.new_files)
builder.new_commit().commit(messages)
rb = p.new_read_builder()
out["read"] = sorted(map(str, rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()))
one, two = p.new_postpone_fixed_bucket_write_builder(), p.new_postpone_fixed_bucket_write_builder()
w1, w2 = one.new_write(), two.new_write()
w1.write_arrow(pa.Table.from_pylist([{"id": 3, "dt": "new", "value": "x"}], schema=s))
w2.write_arrow(pa.Table.from_pylist([{"id": 4, "dt": "new", "value": "x" * 500}], schema=s))
mixed = w1.prepare_commit() + w2.prepare_commit()
try:
    one.new_commit().commit(mixed)
    out["two_counts"] = "committed"
except (RuntimeError, ValueError):  # pypaimon may first refuse two writers of one bucket
    out["two_counts"] = "refused"
out["latest"] = p.snapshot_manager().get_latest_snapshot().id
emit(out)
"""

OURS_PREAMBLE_31B = """
import os
import pyarrow as pa
from lakehouse_engine import CatalogFactory, Identifier, Schema
from lakehouse_engine.data_types import AtomicType, MapType
from lakehouse_engine.options import CoreOptions, MergeEngine, Options
from lakehouse_engine.schema_change import SchemaChange
"""

THEIR_IMPORTS_31B = """
import os
from pypaimon.common.identifier import Identifier
from pypaimon.common.options import CoreOptions, Options
from pypaimon.common.options.core_options import MergeEngine
from pypaimon.schema.data_types import AtomicType, MapType
from pypaimon.schema.schema_change import SchemaChange
"""

# The third round of issue 31's calls: str(RowType), a type change on a table without data and
# one our reader cannot cast, the key statistics' bytes decoded by the key fields, `field_dict`,
# BLOB named, a postpone fixed-bucket write with a bucket plan (an overwrite that rescales), the
# postpone fixed-bucket write refusing `bucket-function.type` = mod, and the S3 arguments both
# catalogs give pyarrow.
SCENARIO_31C = """
out = {}
out["row_type"] = str(RowType(True, [DataField(0, "a", AtomicType("STRING"), "Someone's desc."),
                                     DataField(1, "b", AtomicType("TIMESTAMP(6)"))]))
out["blob"] = str(AtomicType("BLOB", nullable=False))
catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
catalog.create_database("db", True)
catalog.create_table("db.e", Schema(fields=[DataField(0, "s", AtomicType("STRING")),
                                           DataField(1, "ts", AtomicType("TIMESTAMP(3)"))]), False)
catalog.alter_table("db.e", [SchemaChange.update_column_type("s", AtomicType("BIGINT"))], False)
out["empty_cast"] = catalog.get_table("db.e").fields[0].type.type
try:
    catalog.alter_table("db.e", [SchemaChange.update_column_type("ts", AtomicType("DECIMAL(10, 0)"))], False)
    out["no_kernel"] = "accepted"
except RuntimeError as e:
    out["no_kernel"] = "no executable cast" in str(e)

ks = pa.schema([pa.field("key1", pa.int32(), nullable=False), pa.field("key2", pa.string(), nullable=False),
                pa.field("dt", pa.string(), nullable=False), ("v", pa.string())])
catalog.create_table("db.k", Schema.from_pyarrow_schema(ks, partition_keys=["dt"], primary_keys=["key1", "key2"],
                                                        options={"bucket": "1"}), False)
k = catalog.get_table("db.k")
wb = k.new_batch_write_builder()
w = wb.new_write()
w.write_arrow(pa.Table.from_pydict({"key1": [4, 1, 7], "key2": ["e", "h", "b"], "dt": ["p"] * 3, "v": ["x"] * 3},
                                   schema=ks))
wb.new_commit().commit(w.prepare_commit())
f = k.new_read_builder().new_scan().plan().splits()[0].files[0]
out["key_stats"] = [Deserializer.from_bytes(f.key_stats.min_values.data, k.primary_keys_fields).to_dict(),
                    Deserializer.from_bytes(f.key_stats.max_values.data, k.primary_keys_fields).to_dict()]
out["field_dict"] = [sorted(k.field_dict), [x.name for x in k.partition_keys_fields]]

ps = pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                ("value", pa.string())])
catalog.create_table("db.p", Schema.from_pyarrow_schema(ps, partition_keys=["dt"], primary_keys=["id", "dt"], options={
    "bucket": "-2", "postpone.target-size-per-bucket": "1 b",
    "postpone.batch-write-fixed-bucket.max-parallelism": "2"}), False)
p = catalog.get_table("db.p")


def planned(plan, rows, overwrite=None):
    builder = p.new_postpone_fixed_bucket_write_builder()
    builder.with_bucket_plan(PostponeBucketPlan(plan))
    if overwrite is not None:
        builder.overwrite(overwrite)
    w = builder.new_write()
    w.write_arrow(pa.Table.from_pylist(rows, schema=ps))
    messages = w.prepare_commit()
    builder.new_commit().commit(messages)
    w.close()
    return sorted({m.total_buckets for m in messages})


out["planned"] = planned({("p",): 4}, [{"id": 1, "dt": "p", "value": "old"}])
out["rescaled"] = planned({("p",): 3}, [{"id": 2, "dt": "p", "value": "new"}], overwrite={"dt": "p"})
rb = p.new_read_builder()
out["rescaled_read"] = sorted(r["id"] for r in rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist())

catalog.create_table("db.m", Schema.from_pyarrow_schema(ps, primary_keys=["id"], options={
    "bucket": "-2", "bucket-function.type": "mod"}), False)
try:
    catalog.get_table("db.m").new_postpone_fixed_bucket_write_builder().new_write()
    out["mod"] = "accepted"
except ValueError as e:
    out["mod"] = "only support bucket-function.type=default" in str(e)

from unittest.mock import patch
with patch("pyarrow.fs.S3FileSystem") as s3:
    CatalogFactory.create({"warehouse": "s3://bucket/warehouse", "fs.s3.endpoint": "http://localhost:9000",
                           "fs.s3.accessKeyId": "ak", "fs.s3.accessKeySecret": "sk", "fs.s3.region": "us-east-1"})
kw = s3.call_args[1]
out["s3"] = [s3.call_count, kw["endpoint_override"], kw["access_key"], kw["secret_key"], kw["region"]]
emit(out)
"""

OURS_PREAMBLE_31C = """
import pyarrow as pa
from lakehouse_engine import CatalogFactory, Schema
from lakehouse_engine.data_types import AtomicType, RowType
from lakehouse_engine.format.binary_row import BinaryRowDeserializer as Deserializer
from lakehouse_engine.schema import DataField
from lakehouse_engine.schema_change import SchemaChange
from lakehouse_engine.write.postpone_fixed import PostponeBucketPlan
"""

THEIR_IMPORTS_31C = """
from pypaimon.schema.data_types import AtomicType, DataField, RowType
from pypaimon.schema.schema_change import SchemaChange
from pypaimon.table.row.generic_row import GenericRowDeserializer as Deserializer
from pypaimon.write.postpone_bucket import PostponeBucketPlan
"""

OURS_PREAMBLE = """
import pyarrow as pa
from lakehouse_engine import CatalogFactory, Identifier, Schema
"""


def _ours(warehouse: str, preamble: str = OURS_PREAMBLE, scenario: str = SCENARIO) -> Any:
    result: dict[str, Any] = {}
    namespace: dict[str, Any] = {"ARGS": {"warehouse": warehouse}, "emit": result.update}
    exec(compile(textwrap.dedent(preamble) + scenario, "<pypaimon scenario on ours>", "exec"), namespace)
    return result


@pytest.mark.interop
def test_the_same_pypaimon_script_gives_the_same_results(tmp_path: Path, pypaimon: Any) -> None:
    theirs = pypaimon("from pypaimon.common.identifier import Identifier\n" + SCENARIO,
                      warehouse=str(tmp_path / "theirs"))
    ours = _ours(str(tmp_path / "ours"))
    assert ours == theirs
    # and what both give is right:
    assert ours["dynamic_overwrite"] == [["a", 5, "date"], ["b", 2, "banana"], ["c", 3, None]]
    assert ours["predicates"]["is_in_none"] == []
    assert ours["rolled_back"] == [["a", 1, "apple"], ["b", 2, "banana"], ["c", 3, None]]


@pytest.mark.interop
def test_the_same_script_of_issue_31s_calls_gives_the_same_results(tmp_path: Path, pypaimon: Any) -> None:
    theirs = pypaimon(THEIR_IMPORTS_31 + SCENARIO_31, warehouse=str(tmp_path / "theirs"))
    ours = _ours(str(tmp_path / "ours"), OURS_PREAMBLE_31, SCENARIO_31)
    assert ours == theirs
    # and what both give is right:
    assert ours["ident"] == ["my.db", "t.1", "my.table", "x", "t$branch_dev", "snapshots"]
    assert ours["mixed_or"] == [True, [["part", "id", "v"], ["{'part': 'a', 'id': 1, 'v': 'a1'}",
                                                             "{'part': 'b', 'id': 2, 'v': 'b2'}"]]]
    assert ours["row_kind"][0] == ["_row_kind", "id", "part"]
    assert ours["not_in_none"][0] == [["part", "id", "v"], []]
    assert (ours["duplicate_tag"], ours["missing_tag"], ours["replaced_to_latest"]) == ("t1", "absent", 2)
    assert (ours["micro"], ours["nano"], ours["missing_table"]) == ("PT0.0005S", "ValueError", "my.db.missing")


@pytest.mark.interop
def test_the_same_script_of_issue_31s_second_round_gives_the_same_results(tmp_path: Path, pypaimon: Any) -> None:
    theirs = pypaimon(THEIR_IMPORTS_31B + SCENARIO_31B, warehouse=str(tmp_path / "theirs"))
    ours = _ours(str(tmp_path / "ours"), OURS_PREAMBLE_31B, SCENARIO_31B)
    assert ours == theirs
    # and what both give is right:
    assert ours["alter_errors"] == [["is not supported yet"], ["is not supported yet"],
                                    ["nullable to non nullable"], ["no executable cast"]]
    assert (ours["restated"], ours["not_null"], ours["options"], ours["malformed"]) == (["bucket"], False, [True, True],
                                                                                       "ValueError")
    assert ours["planned"] == [[["large"], 3], [["small"], 1]] and ours["paths_exist"]
    assert (len(ours["read"]), ours["two_counts"], ours["latest"]) == (2, "refused", 1)


@pytest.mark.interop
def test_the_same_script_of_issue_31s_third_round_gives_the_same_results(tmp_path: Path, pypaimon: Any) -> None:
    theirs = pypaimon(THEIR_IMPORTS_31C + SCENARIO_31C, warehouse=str(tmp_path / "theirs"))
    ours = _ours(str(tmp_path / "ours"), OURS_PREAMBLE_31C, SCENARIO_31C)
    assert ours == theirs
    # and what both give is right:
    assert ours["row_type"] == "ROW<a: STRING COMMENT Someone's desc., b: TIMESTAMP(6)>"
    assert (ours["blob"], ours["empty_cast"], ours["no_kernel"]) == ("BLOB NOT NULL", "BIGINT", True)
    assert ours["key_stats"] == [{"key1": 1, "key2": "b"}, {"key1": 7, "key2": "h"}]
    assert ours["field_dict"] == [["dt", "key1", "key2", "v"], ["dt"]]
    assert (ours["planned"], ours["rescaled"], ours["rescaled_read"], ours["mod"]) == ([4], [3], [2], True)
    assert ours["s3"] == [1, "http://localhost:9000", "ak", "sk", "us-east-1"]


@pytest.mark.interop
def test_pypaimon_reads_our_tag_with_a_retention(tmp_path: Path, pypaimon: Any) -> None:
    import pyarrow as pa

    from lakehouse_engine import CatalogFactory, Schema

    warehouse = str(tmp_path / "wh")
    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database("d", True)
    catalog.create_table("d.t", Schema.from_pyarrow_schema(
        pa.schema([("id", pa.int64())]), primary_keys=["id"], options={"bucket": "1"}), False)
    table = catalog.get_table("d.t")
    wb = table.new_batch_write_builder()
    write = wb.new_write()
    write.write_arrow(pa.table({"id": [1]}))
    wb.new_commit().commit(write.prepare_commit())
    catalog.create_tag("d.t", "kept", time_retained="12h")
    ours = catalog.get_tag("d.t", "kept")
    theirs = pypaimon("""
        r = CatalogFactory.create({"warehouse": ARGS["warehouse"]}).get_tag("d.t", "kept")
        emit([r.snapshot.id, r.tag_create_time, r.tag_time_retained])
    """, warehouse=warehouse)
    assert theirs == [1, ours.tag_create_time, "PT12H"] == [1, ours.tag_create_time, ours.tag_time_retained]


@pytest.mark.interop
def test_pypaimon_reads_what_our_postpone_fixed_bucket_write_wrote(tmp_path: Path, pypaimon: Any) -> None:
    import pyarrow as pa

    from lakehouse_engine import CatalogFactory, Schema

    warehouse = str(tmp_path / "wh")
    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database("d", True)
    s = pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                   ("v", pa.string())])
    catalog.create_table("d.p", Schema.from_pyarrow_schema(s, partition_keys=["dt"], primary_keys=["id", "dt"], options={
        "bucket": "-2", "postpone.target-size-per-bucket": "100 b"}), False)
    table = catalog.get_table("d.p")
    builder = table.new_postpone_fixed_bucket_write_builder()
    write = builder.new_write()
    write.write_arrow(pa.Table.from_pylist([{"id": i, "dt": dt, "v": dt * 40} for i in range(20) for dt in "ab"],
                                           schema=s))
    messages = write.prepare_commit()
    assert min(m.total_buckets for m in messages) > 1  # several buckets per partition
    builder.new_commit().commit(messages)
    theirs = pypaimon("""
        t = CatalogFactory.create({"warehouse": ARGS["warehouse"]}).get_table("d.p")
        rb = t.new_read_builder()
        emit(sorted([r["id"], r["dt"]] for r in rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()))
    """, warehouse=warehouse)
    assert theirs == sorted([i, dt] for i in range(20) for dt in "ab")
