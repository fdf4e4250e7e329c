"""A bucket writer across the commits of one stream write (found by the feature-interaction audit)."""

from __future__ import annotations

import pyarrow as pa

from lakehouse_engine import Catalog
from tests.lakehouse_engine.conftest import create_table, read

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def test_a_stream_writers_own_full_compactions_do_not_make_its_lookup_changelog_stale(catalog: Catalog) -> None:
    # lookup producer + full-compaction.delta-commits = 1: every commit's full compaction rewrites
    # the bucket, so the files this writer added at its earlier commits are gone from its levels.
    # They are its own, already merged into what it looks up: not another writer's change.
    t = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                     options={"bucket": "1", "changelog-producer": "lookup", "full-compaction.delta-commits": "1"})
    wb = t.new_stream_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    for n, ids in enumerate((range(10), range(5), range(3), range(7))):
        write.write_arrow(pa.Table.from_pylist([{"id": i, "v": f"c{n}"} for i in ids], schema=SCHEMA))
        commit.commit(write.prepare_commit(n), n)
    write.close()
    expected = {i: "c3" if i < 7 else "c0" for i in range(10)}
    assert {r["id"]: r["v"] for r in read(t).to_pylist()} == expected
    changes = [(r["_row_kind"], r["id"], r["v"]) for r in t.changes(0).to_pylist()]
    assert ("-U", 0, "c2") in changes and ("+U", 0, "c3") in changes
    replayed: dict[int, str] = {}
    for kind, key, value in changes:
        if kind in ("+I", "+U"):
            replayed[key] = value
        else:
            assert replayed.pop(key) == value  # every before-image is the row the key had
    assert replayed == expected
