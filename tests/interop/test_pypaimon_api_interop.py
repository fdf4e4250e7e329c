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

OURS_PREAMBLE = """
import pyarrow as pa
from lakehouse_engine import CatalogFactory, Identifier, Schema
"""


def _ours(warehouse: str) -> Any:
    result: dict[str, Any] = {}
    namespace: dict[str, Any] = {"ARGS": {"warehouse": warehouse}, "emit": result.update}
    exec(compile(textwrap.dedent(OURS_PREAMBLE) + SCENARIO, "<pypaimon scenario on ours>", "exec"), namespace)
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
