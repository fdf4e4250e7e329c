"""Cross-partition upsert: a key moves between partitions as each merge engine says."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse_engine import Catalog
from tests.lakehouse_engine.conftest import create_table, read, rows, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    pa.field("v", pa.int64()), pa.field("w", pa.int64()), pa.field("rk", pa.string())])


def batch(*records: tuple[Any, ...]) -> pa.Table:
    cols = list(zip(*records, strict=True))
    return pa.table({"id": list(cols[0]), "dt": list(cols[1]), "v": list(cols[2]), "w": list(cols[3]),
                     "rk": list(cols[4]) if len(cols) > 4 else ["+I"] * len(records)}, schema=SCHEMA)


def table_for(catalog: Catalog, engine: str, **options: str):
    opts = {"bucket": "-1", "merge-engine": engine, "rowkind.field": "rk", **options}
    if engine == "aggregation":
        opts.update({"fields.v.aggregate-function": "sum", "fields.w.aggregate-function": "sum"})
    return create_table(catalog, engine.replace("-", "_"), SCHEMA, primary_keys=["id"], partition_keys=["dt"],
                        options=opts)


def view(table) -> list[tuple[Any, ...]]:
    return [(r["id"], r["dt"], r["v"], r["w"]) for r in rows(read(table), "id")]


def test_deduplicate_moves_the_key_to_its_new_partition(catalog: Catalog) -> None:
    table = table_for(catalog, "deduplicate")
    write(table, batch((1, "a", 10, 1), (2, "a", 20, 2)))
    fresh = catalog.get_table("db.deduplicate")  # a new writer bootstraps the global index
    write(fresh, batch((1, "b", 11, 3)))
    assert view(table) == [(1, "b", 11, 3), (2, "a", 20, 2)]
    write(fresh, batch((1, "c", 12, 4), (1, "a", 13, 5)))  # two moves in one batch: the last wins
    assert view(table) == [(1, "a", 13, 5), (2, "a", 20, 2)]
    write(fresh, batch((2, "z", 0, 0, "-D")))  # a delete arriving in another partition removes the key
    assert view(table) == [(1, "a", 13, 5)]


def test_first_row_ignores_a_key_that_exists(catalog: Catalog) -> None:
    table = table_for(catalog, "first-row")
    write(table, batch((1, "a", 10, 1)))
    write(catalog.get_table("db.first_row"), batch((1, "b", 99, 9), (3, "b", 30, 3)))
    assert view(table) == [(1, "a", 10, 1), (3, "b", 30, 3)]


def test_partial_update_updates_the_old_partition(catalog: Catalog) -> None:
    table = table_for(catalog, "partial-update")
    write(table, batch((1, "a", 10, None)))
    write(catalog.get_table("db.partial_update"), batch((1, "b", None, 7)))
    assert view(table) == [(1, "a", 10, 7)]


def test_aggregation_updates_the_old_partition(catalog: Catalog) -> None:
    table = table_for(catalog, "aggregation")
    write(table, batch((1, "a", 10, 1)))
    write(catalog.get_table("db.aggregation"), batch((1, "b", 5, 1)))
    assert view(table) == [(1, "a", 15, 2)]


def _mapped_from_deleted_file(address: int) -> bool:
    """Whether `address` lies in a mapping of this process of a file since unlinked."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            span, *rest = line.split()
            low, high = (int(x, 16) for x in span.split("-"))
            if low <= address < high and line.rstrip().endswith("(deleted)") and "bootstrap.arrow" in line:
                return True
    return False


def test_the_global_index_is_mapped_from_local_disk_leaves_no_file_and_honours_its_ttl(
        catalog: Catalog, tmp_path: Any, monkeypatch: Any) -> None:
    import tempfile

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    table = table_for(catalog, "deduplicate", **{"cross-partition-upsert.index-ttl": "1 s"})
    write(table, batch((1, "a", 10, 1)))
    time.sleep(1.2)
    write(table, batch((2, "c", 20, 2)))
    wb = catalog.get_table("db.deduplicate").new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(batch((1, "b", 11, 2)))
    assert w.router is not None
    # The bootstrapped keys are read from a file mapped into memory (page cache, not heap), and
    # that file is gone from disk as soon as it is mapped: a writer leaves nothing behind.
    keys = w.router.index._main.column("key").chunk(0)
    assert len(keys) == 1 and _mapped_from_deleted_file(keys.buffers()[1].address)
    assert list(scratch.iterdir()) == []
    wb.new_commit().commit(w.prepare_commit())
    # Key 1's file was older than the TTL, so it was not indexed: Paimon's warned duplicate.
    assert [r[:2] for r in view(table)] == [(1, "a"), (1, "b"), (2, "c")]


ops = st.lists(st.tuples(st.integers(0, 8), st.sampled_from(["a", "b", "c"]), st.integers(0, 99),
                         st.sampled_from(["+I", "+I", "+U", "-D"])), min_size=1, max_size=15)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(ops, min_size=1, max_size=4))
def test_deduplicate_matches_a_model_of_moving_keys(tmp_path_factory: Any, batches: list[Any]) -> None:
    cat = Catalog(str(tmp_path_factory.mktemp("wh")))
    cat.create_database("db")
    table_for(cat, "deduplicate", **{"dynamic-bucket.target-row-num": "3"})
    model: dict[int, tuple[Any, ...]] = {}
    for ops_ in batches:
        table = cat.get_table("db.deduplicate")  # every batch bootstraps a new writer
        write(table, batch(*[(k, dt, v, None, kind) for k, dt, v, kind in ops_]))
        for k, dt, v, kind in ops_:
            if kind == "-D":
                model.pop(k, None)
            else:
                model[k] = (k, dt, v, None)
        got = view(table)
        assert got == sorted(model.values())
        assert len({r[0] for r in got}) == len(got)  # never a key in two partitions


def test_an_overwrite_moving_a_key_keeps_its_old_partitions_other_keys(catalog: Catalog) -> None:
    """An overwrite of partition b takes key 1 from partition a: a `-D` goes to a, which the
    overwrite does not replace, dynamic or static (a dynamic overwrite replaced a too, losing key 2)."""
    for dynamic in ("true", "false"):
        table = table_for(catalog, "deduplicate", **{"dynamic-partition-overwrite": dynamic})
        write(table, batch((1, "a", 10, 1), (2, "a", 20, 2), (3, "b", 30, 3)))
        fresh = catalog.get_table("db.deduplicate")
        write(fresh, batch((1, "b", 11, 1)), overwrite={} if dynamic == "true" else {"dt": "b"})
        assert view(table) == [(1, "b", 11, 1), (2, "a", 20, 2)], f"dynamic-partition-overwrite={dynamic}"
        catalog.drop_table("db.deduplicate")
