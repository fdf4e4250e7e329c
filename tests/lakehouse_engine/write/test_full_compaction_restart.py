"""A restarted stream writer of a `full-compaction.delta-commits` table still compacts, at its next
full compaction, the buckets its commit user wrote before the restart (Paimon's Flink writer keeps
them in its checkpointed state; ours reads them back from its commits)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lakehouse_engine import Catalog
from tests.lakehouse_engine.conftest import create_table, read

SCHEMA = pa.schema([pa.field("p", pa.string(), nullable=False), pa.field("id", pa.int64(), nullable=False),
                    pa.field("v", pa.string())])


def _rows(p: str, ids: list[int], v: str) -> pa.Table:
    return pa.table({"p": [p] * len(ids), "id": ids, "v": [v] * len(ids)}, schema=SCHEMA)


def _table(catalog: Catalog) -> Any:
    return create_table(catalog, "t", SCHEMA, primary_keys=["p", "id"], partition_keys=["p"],
                        options={"bucket": "1", "changelog-producer": "full-compaction",
                                 "full-compaction.delta-commits": "2"})


def _writer(table: Any) -> tuple[Any, Any]:
    builder = table.new_stream_write_builder().with_commit_user("job")
    return builder.new_write(), builder.new_commit()


def _changed(table: Any, partition: str) -> list[tuple[str, int]]:
    return sorted((r["_row_kind"], r["id"]) for r in table.changes(0).to_pylist() if r["p"] == partition)


def test_the_buckets_written_before_a_restart_are_compacted_fully_after_it(catalog: Catalog) -> None:
    t = _table(catalog)
    w, c = _writer(t)
    w.write_arrow(_rows("a", [1, 2], "x"))
    w.write_arrow(_rows("b", [1, 2], "x"))
    c.commit(w.prepare_commit(1), 1)  # not a full compaction: no changelog yet
    w, c = _writer(t)  # the job restarts
    w.write_arrow(_rows("a", [3], "y"))
    c.commit(w.prepare_commit(2), 2)
    # Before: only partition a was compacted; b's rows were in the table but never in its
    # changelog (until b was written again).
    assert _changed(t, "b") == [("+I", 1), ("+I", 2)]
    assert _changed(t, "a") == [("+I", 1), ("+I", 2), ("+I", 3)]


def test_a_bucket_emptied_before_the_restarted_writer_compacts_is_left_alone(catalog: Catalog) -> None:
    t = _table(catalog)
    w, c = _writer(t)
    w.write_arrow(_rows("a", [1], "x"))
    w.write_arrow(_rows("b", [1], "x"))
    c.commit(w.prepare_commit(1), 1)
    t.drop_partitions([{"p": "b"}])
    w, c = _writer(t)
    w.write_arrow(_rows("a", [2], "y"))
    c.commit(w.prepare_commit(2), 2)
    assert sorted((r["p"], r["id"]) for r in read(t).to_pylist()) == [("a", 1), ("a", 2)]
    assert _changed(t, "b") == []
