"""Model-based test: random upserts and deletes against a plain dict; every snapshot reads equal."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse_engine import Catalog
from tests.lakehouse_engine.conftest import create_table, read, rows, write

SCHEMA = pa.schema([
    pa.field("k", pa.int32(), nullable=False),
    pa.field("name", pa.string(), nullable=False),
    pa.field("dt", pa.string(), nullable=False),
    pa.field("v", pa.int64()),
    pa.field("s", pa.string()),
    pa.field("rk", pa.string()),
])

op = st.tuples(
    st.sampled_from(["+I", "+U", "-D", "-U"]),
    st.integers(0, 30),                                   # k
    st.sampled_from(["a", "bbbbbbbbbb", ""]),             # name: inline, long, empty
    st.sampled_from(["2026-11-01", "2026-11-02"]),        # dt (partition)
    st.one_of(st.none(), st.integers(-2**40, 2**40)),     # v
    st.one_of(st.none(), st.text(max_size=12)),           # s
)
batches = st.lists(st.lists(op, min_size=1, max_size=40), min_size=1, max_size=6)
# Between batches: nothing, a minor compaction or a full one (dedicated `table.compact`).
compactions = st.lists(st.sampled_from([None, None, "minor", "full"]), min_size=6, max_size=6)
table_options = st.fixed_dictionaries({
    "bucket": st.sampled_from(["1", "3", "-1", "-2"]),  # fixed, dynamic, postpone
    "write-buffer-size": st.sampled_from(["256 mb", "2 kb"]),
    "target-file-size": st.sampled_from(["128 mb", "1 kb"]),
    "dynamic-bucket.target-row-num": st.sampled_from(["5", "1000"]),
    "num-sorted-run.compaction-trigger": st.sampled_from(["5", "2"]),
    "write-only": st.sampled_from(["false", "true"]),
})


def apply(model: dict[tuple[Any, ...], dict[str, Any]], batch: list[tuple[Any, ...]]) -> None:
    for kind, k, name, dt, v, s in batch:
        key = (k, name, dt)
        if kind in ("-D", "-U"):
            model.pop(key, None)
        else:
            model[key] = {"k": k, "name": name, "dt": dt, "v": v, "s": s, "rk": kind}


def to_table(batch: list[tuple[Any, ...]]) -> pa.Table:
    cols = list(zip(*batch, strict=True))
    return pa.table({"k": pa.array(cols[1], pa.int32()), "name": list(cols[2]), "dt": list(cols[3]),
                     "v": pa.array(cols[4], pa.int64()), "s": pa.array(cols[5], pa.string()),
                     "rk": list(cols[0])}, schema=SCHEMA)


def check_against_model(tmp_path_factory: Any, batches: list[Any], options: dict[str, str],
                        compactions: list[str | None]) -> None:
    cat = Catalog(str(tmp_path_factory.mktemp("wh")))
    cat.create_database("db")
    table = create_table(cat, "t", SCHEMA, primary_keys=["k", "name", "dt"], partition_keys=["dt"],
                         options={"rowkind.field": "rk", **options})
    model: dict[tuple[Any, ...], dict[str, Any]] = {}
    history: dict[int, list[dict[str, Any]]] = {}
    postpone = options["bucket"] == "-2"
    visible: list[dict[str, Any]] = []
    for batch, compaction in zip(batches, compactions, strict=False):
        apply(model, batch)
        expected = sorted(model.values(), key=lambda r: (r["k"], r["name"], r["dt"]))
        ids = write(table, to_table(batch))  # APPEND, and COMPACT when the writer compacted
        assert 1 <= len(ids) <= 2
        for snapshot_id in ids:
            # A postpone table hides new rows until compaction moves them into buckets.
            history[snapshot_id] = visible if postpone else expected
        if compaction is not None or postpone:
            for snapshot_id in table.compact(full=compaction == "full"):
                history[snapshot_id] = expected
        visible = expected
        assert rows(read(table), "k", "name", "dt") == expected
        if options["write-only"] == "false":  # write-only leaves compaction to a dedicated job
            assert max(table.bucket_stats().column("sorted_runs").to_pylist() or [0]) <= table.options.stop_trigger
    for snapshot_id, expected in history.items():
        assert rows(read(table, snapshot_id), "k", "name", "dt") == expected


_SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.function_scoped_fixture]}


@settings(max_examples=40, **_SETTINGS)  # type: ignore[arg-type]
@given(batches=batches, options=table_options, compactions=compactions)
def test_every_snapshot_reads_equal_to_the_model(tmp_path_factory: Any, batches: list[Any],
                                                 options: dict[str, str], compactions: list[str | None]) -> None:
    check_against_model(tmp_path_factory, batches, options, compactions)


@pytest.mark.slow
@settings(max_examples=1500, **_SETTINGS)  # type: ignore[arg-type]
@given(batches=batches, options=table_options, compactions=compactions)
def test_soak_every_snapshot_reads_equal_to_the_model(tmp_path_factory: Any, batches: list[Any],
                                                      options: dict[str, str], compactions: list[str | None]) -> None:
    check_against_model(tmp_path_factory, batches, options, compactions)
