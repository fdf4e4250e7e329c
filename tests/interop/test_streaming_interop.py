"""pypaimon 2.1.0's StreamReadBuilder reads our changes, and a consumer file it and we both honour."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from lakehouse_engine import Catalog
from tests.lakehouse_engine.conftest import create_table, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string()),
                    pa.field("k", pa.string())])

PYPAIMON_STREAM = """
catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
table = catalog.get_table("db.t")
builder = table.new_stream_read_builder().with_include_row_kind(True).with_consumer_id(ARGS["consumer"])
builder.with_poll_interval_ms(10)
scan, read = builder.new_streaming_scan(), builder.new_read()
stream = scan.stream_sync()
plans = []
for plan in stream:
    rows = read.to_arrow(plan.splits()).to_pylist()
    plans.append({"snapshot": plan.snapshot_id, "rows": sorted([r["_row_kind"], r["id"], r["v"]] for r in rows)})
    if plan.snapshot_id is not None and plan.snapshot_id >= ARGS["until"]:
        break
emit(plans)
"""


def _put(table: Any, *rows: tuple[str, int, str]) -> None:
    write(table, pa.Table.from_pylist([{"id": i, "v": v, "k": k} for k, i, v in rows], schema=SCHEMA))


def _ours(table: Any, consumer: str) -> tuple[int | None, list[list[Any]]]:
    builder = table.new_stream_read_builder().with_include_row_kind().with_consumer_id(consumer)
    scan = builder.new_streaming_scan()
    plan = scan.plan()
    rows = builder.new_read().to_arrow(plan.splits()).to_pylist()
    scan.notify_checkpoint_complete(scan.checkpoint())
    return plan.snapshot_id, sorted([r["_row_kind"], r["id"], r["v"]] for r in rows)


def test_pypaimon_streams_our_changes_from_our_consumer_and_we_resume_from_its(
        tmp_path: Any, pypaimon: Callable[..., Any]) -> None:
    catalog = Catalog(str(tmp_path / "wh"))
    catalog.create_database("db")
    t = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "2", "rowkind.field": "k"})
    _put(t, *[("+I", i, f"a{i}") for i in range(6)])               # 1
    _put(t, ("+U", 1, "b1"), ("-D", 2, "a2"))                      # 2
    t.compact(full=True)                                           # 3: COMPACT, no changes
    _put(t, ("+I", 9, "c9"), ("-U", 4, "a4"))                      # 4
    _put(t, ("+I", 10, "d10"))                                     # 5
    t.consumer_manager().reset_consumer("shared", 2)
    plans = pypaimon(PYPAIMON_STREAM, warehouse=str(tmp_path / "wh"), consumer="shared", until=4)
    assert plans == [
        {"snapshot": 2, "rows": [["+U", 1, "b1"], ["-D", 2, "a2"]]},
        {"snapshot": 4, "rows": [["+I", 9, "c9"], ["-U", 4, "a4"]]},
    ]
    # pypaimon recorded the plan of snapshot 2 as processed when it asked for the next one.
    assert t.consumer_manager().consumers() == {"shared": 3}
    assert _ours(t, "shared") == (4, [["+I", 9, "c9"], ["-U", 4, "a4"]])
    assert t.consumer_manager().consumers() == {"shared": 5}
    _put(t, ("+I", 11, "e11"))                                     # 6
    plans = pypaimon(PYPAIMON_STREAM, warehouse=str(tmp_path / "wh"), consumer="shared", until=6)
    assert plans == [{"snapshot": 5, "rows": [["+I", 10, "d10"]]},
                     {"snapshot": 6, "rows": [["+I", 11, "e11"]]}]
    # What the consumer still needs survives our expiry.
    t.expire_snapshots(retain_max=1)
    assert t.consumer_manager().consumers() == {"shared": 6}
    assert [s.id for s in t.snapshots()] == [6]


PYPAIMON_STREAM_IN_ORDER = """
catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
table = catalog.get_table("db.t")
builder = table.new_stream_read_builder().with_include_row_kind(True).with_consumer_id(ARGS["consumer"])
builder.with_poll_interval_ms(10)
scan, read = builder.new_streaming_scan(), builder.new_read()
plans = []
for plan in scan.stream_sync():
    rows = read.to_arrow(plan.splits()).to_pylist()
    plans.append({"snapshot": plan.snapshot_id, "rows": [[r["_row_kind"], r["id"], r["v"]] for r in rows]})
    if plan.snapshot_id is not None and plan.snapshot_id >= ARGS["until"]:
        break
emit(plans)
"""


def test_pypaimon_streams_our_lookup_changelog_of_runs_of_adds_with_each_keys_before_image_first(
        tmp_path: Any, pypaimon: Callable[..., Any]) -> None:
    """A lookup flush of a run of adds lists a bucket's -U file, then the run's data file under a
    changelog name; pypaimon's stream reads each key's -U before its +U, as ours does."""
    catalog = Catalog(str(tmp_path / "wh"))
    catalog.create_database("db")
    t = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                     options={"bucket": "2", "rowkind.field": "k", "changelog-producer": "lookup"})
    _put(t, *[("+I", i, f"a{i}") for i in range(30)])                     # 1, 2 (COMPACT)
    _put(t, *[("+I", i, f"b{i}") for i in range(10, 40)])                 # 3, 4
    linked = [p for p in (tmp_path / "wh").rglob("bucket-*/changelog-*") if p.stat().st_nlink == 2]
    assert len(linked) == 4, "both commits wrote each bucket's run once"
    t.consumer_manager().reset_consumer("c", 1)  # (pypaimon's stream starts at a consumer's snapshot)
    plans = pypaimon(PYPAIMON_STREAM_IN_ORDER, warehouse=str(tmp_path / "wh"), consumer="c", until=4)
    changes = t.changes(0)
    ours = [[k, i, v] for k, i, v in zip(*(changes.column(c).to_pylist() for c in ("_row_kind", "id", "v")),
                                         strict=True)]
    theirs = [r for p in plans for r in p["rows"]]
    assert sorted(theirs) == sorted(ours)

    def per_key(rows: list[list[Any]]) -> dict[int, list[list[Any]]]:
        out: dict[int, list[list[Any]]] = {}
        for r in rows:
            out.setdefault(r[1], []).append(r)
        return out

    assert per_key(theirs) == per_key(ours)
    assert per_key(theirs)[15] == [["+I", 15, "a15"], ["-U", 15, "a15"], ["+U", 15, "b15"]]
