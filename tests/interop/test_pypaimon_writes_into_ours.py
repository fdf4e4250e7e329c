"""pypaimon 2.1.0 upserts into tables this engine created and wrote, then we write again.

Per table: our engine writes the first commits, pypaimon commits changes to existing keys (so a
key it hashes to another bucket than we do shows up twice, and sequence numbers that do not
continue ours lose updates), then our engine commits once more.  Both engines must then read
the model's final rows, the snapshot ids must continue across writers, and time travel
(`with_snapshot` on our side, `scan.snapshot-id` on pypaimon's) must see every earlier state.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from tests.interop.model import (
    ALL_VALUE_TYPES,
    KEY_TYPES,
    PYPAIMON_READ,
    TWO_DATES,
    Committed,
    Spec,
    TableModel,
    assert_same_rows,
    canonical_rows,
    commit_ours,
    key_type_spec,
    pk_spec,
    read_result,
    state_at,
    value_fields,
    value_row,
    write_batch_file,
)

OUR_COMMITS_BEFORE = 2  # then one pypaimon commit, then one more of ours

PYPAIMON_UPSERT = PYPAIMON_READ + """
import pyarrow.parquet as pq

def paimon_upsert(catalog, spec):
    table = catalog.get_table(spec["table"])
    before = table.snapshot_manager().get_latest_snapshot().id
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    c = wb.new_commit()
    for f in spec["files"]:
        w.write_arrow(load_batch(f))
    c.commit(w.prepare_commit())
    w.close()
    c.close()
    after = catalog.get_table(spec["table"]).snapshot_manager().get_latest_snapshot().id
    return [before, after]

catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
upserts = {}
for spec in ARGS["upserts"]:
    try:
        upserts[spec["table"]] = paimon_upsert(catalog, spec)
    except Exception:
        upserts[spec["table"]] = "ERROR " + traceback.format_exc()[-3000:]
emit({"upserts": upserts, "read": paimon_reads(catalog, ARGS["reads"])})
"""


def _specs() -> list[Spec]:
    commits = OUR_COMMITS_BEFORE + 2
    specs = [
        # Upserts only: whatever fails here is about buckets, keys and sequence numbers.  More
        # than one bucket each, so that both writers must hash every key type alike.  Not
        # TIMESTAMP(9): pypaimon hashes it truncated to microseconds (Java keeps nanoseconds).
        *[key_type_spec(i, t, retract=False, n_keys=80, commits=commits, buckets=(4, 7))
          for i, t in enumerate(KEY_TYPES) if t != "timestamp_9"],
        pk_spec("all_types_upserts", [pa.field("id", pa.int64())], [], lambda i: {"id": i},
                n_keys=60, commits=commits, bucket=4, value_types=ALL_VALUE_TYPES, seed=21,
                retract=False),
        pk_spec("part_dt_upserts", [pa.field("dt", pa.string()), pa.field("id", pa.int64())],
                ["dt"], lambda i: {"dt": ["a", "b", "2024-01-01"][i % 3], "id": i // 2},
                n_keys=120, commits=commits, bucket=4, value_types=["string", "int"], seed=22,
                retract=False),
        pk_spec("composite_key_upserts", [pa.field("k1", pa.int64()), pa.field("k2", pa.string())],
                [], lambda i: {"k1": i // 3 - 5, "k2": ["x", "a-much-longer-string", "ü"][i % 3]},
                n_keys=90, commits=commits, bucket=7, value_types=["double"], seed=23,
                retract=False),
        pk_spec("part_int_date_upserts",
                [pa.field("p_int", pa.int32()), pa.field("p_date", pa.date32()),
                 pa.field("id", pa.int64())], ["p_int", "p_date"],
                lambda i: {"p_int": [-1, 0, 7][i % 3], "p_date": TWO_DATES[i % 2], "id": i // 3},
                n_keys=60, commits=commits, bucket=1, value_types=["int"], seed=24, retract=False),
        # With '-D' and '-U' rows from both writers.
        pk_spec("deletes_b4", [pa.field("id", pa.int64())], [], lambda i: {"id": i * 11},
                n_keys=100, commits=commits, bucket=4, value_types=["string", "timestamp_6"],
                seed=25),
        pk_spec("deletes_part_dt", [pa.field("dt", pa.string()), pa.field("id", pa.int32())],
                ["dt"], lambda i: {"dt": ["a", "b"][i % 2], "id": i},
                n_keys=80, commits=commits, bucket=1, value_types=["decimal_38_6"], seed=26),
    ]
    append_schema = pa.schema([pa.field("id", pa.int64()), pa.field("dt", pa.string())]
                              + value_fields(["string", "timestamp_3", "decimal_10_2"]))
    specs.append(Spec("append_unaware", append_schema, [], ["dt"], {"bucket": "-1"}, [
        [[{"id": i, "dt": "ab"[i % 2], **value_row(i, c, ["string", "timestamp_3", "decimal_10_2"])}
          for i in range(c * 30, c * 30 + 40)]] for c in range(commits)]))
    return specs


SPECS = _specs()
NAMES = [s.name for s in SPECS]


@dataclass
class Mixed:
    spec: Spec
    history: list[Committed]  # our commits, pypaimon's, then ours again
    failure: str | None  # what went wrong before the reads, if anything
    final_read: str | None  # pypaimon's read status of the final snapshot
    travel_read: str | None  # pypaimon's read status of its own snapshot
    final_path: str
    travel_path: str
    warehouse: str


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory,
          pypaimon: Callable[..., Any]) -> dict[str, Mixed]:
    from lakehouse_engine import Schema

    tmp: Path = tmp_path_factory.mktemp("pypaimon_writes_into_ours")
    warehouse = str(tmp / "warehouse")
    catalog = Catalog(warehouse)
    catalog.create_database("db", ignore_if_exists=True)
    upserts, out, models = [], {}, {}
    for spec in SPECS:
        m = Mixed(spec, [], "pypaimon did not run", None, None,
                  str(tmp / f"{spec.name}.final.parquet"),
                  str(tmp / f"{spec.name}.travel.parquet"), warehouse)
        out[spec.name] = m
        model = TableModel(spec.schema, spec.primary_keys, spec.options.get("rowkind.field"))
        try:
            catalog.create_table(f"db.{spec.name}", Schema.from_pyarrow_schema(
                spec.schema, partition_keys=spec.partition_keys, primary_keys=spec.primary_keys,
                options=spec.options))
            table = catalog.get_table(f"db.{spec.name}")
            m.history = [commit_ours(table, spec.schema, commit, model)
                         for commit in spec.commits[:OUR_COMMITS_BEFORE]]
        except Exception:
            m.failure = "our engine failed before pypaimon's commit:\n" + traceback.format_exc()
            continue
        files = []
        for bi, rows in enumerate(spec.commits[OUR_COMMITS_BEFORE]):
            path = str(tmp / f"{spec.name}.pypaimon.{bi}.parquet")
            files.append(write_batch_file(path, rows, spec.schema))
            model.apply(rows)
        models[spec.name] = model
        upserts.append({"table": f"db.{spec.name}", "files": files})
    first = pypaimon(PYPAIMON_UPSERT, warehouse=warehouse, upserts=upserts, reads=[])

    reads = []
    for name, model in models.items():
        m, ident = out[name], f"db.{name}"
        result = first["upserts"][ident]
        if isinstance(result, str):
            m.failure = f"pypaimon failed to write into our table:\n{result}"
            continue
        before, after = result
        m.history.append(Committed(before + 1, after, model.copy()))
        try:
            table = catalog.get_table(ident)
            m.history += [commit_ours(table, m.spec.schema, commit, model)
                          for commit in m.spec.commits[OUR_COMMITS_BEFORE + 1:]]
        except Exception:
            m.failure = "our engine failed after pypaimon's commit:\n" + traceback.format_exc()
            continue
        m.failure = None
        reads.append({"table": ident, "out": m.final_path})
        reads.append({"table": ident, "out": m.travel_path, "snapshot": before + 1})
    second = pypaimon(PYPAIMON_READ + """
catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
emit(paimon_reads(catalog, ARGS["reads"]))
""", warehouse=warehouse, reads=reads)
    for m in out.values():
        m.final_read, m.travel_read = second.get(m.final_path), second.get(m.travel_path)
    return out


def _written(m: Mixed) -> list[Committed]:
    if m.failure is not None:
        pytest.fail(f"{m.spec.name}: {m.failure}")
    return m.history


def _our_read(m: Mixed, snapshot: int | None = None) -> list[tuple[Any, ...]]:
    rb = Catalog(m.warehouse).get_table(f"db.{m.spec.name}").new_read_builder()
    if snapshot is not None:
        rb = rb.with_snapshot(snapshot)
    return canonical_rows(rb.new_read().to_arrow(rb.new_scan().plan().splits()), m.spec.schema)


@pytest.mark.parametrize("name", NAMES)
def test_snapshot_ids_continue_across_writers(mixed: dict[str, Mixed], name: str) -> None:
    """pypaimon's commit takes the id after our last snapshot, ours the id after pypaimon's last,
    and the table's snapshots are 1..latest without a gap."""
    history = _written(mixed[name])
    ours_before, pypaimon, ours_after = (history[OUR_COMMITS_BEFORE - 1],
                                         history[OUR_COMMITS_BEFORE], history[-1])
    assert pypaimon.first_id == ours_before.last_id + 1
    assert pypaimon.last_id >= pypaimon.first_id
    assert ours_after.first_id == pypaimon.last_id + 1
    table = Catalog(mixed[name].warehouse).get_table(f"db.{name}")
    ids = [s.id for s in table.snapshots()]
    assert ids == list(range(1, ours_after.last_id + 1)), ids
    assert table.latest_snapshot().id == ours_after.last_id


@pytest.mark.parametrize("name", NAMES)
def test_we_read_final_and_every_snapshot(mixed: dict[str, Mixed], name: str) -> None:
    m = mixed[name]
    history = _written(m)
    assert_same_rows(history[-1].model.canonical(), _our_read(m), f"our read of {name}")
    for snapshot_id in range(1, history[-1].last_id + 1):
        assert_same_rows(state_at(history, snapshot_id).canonical(), _our_read(m, snapshot_id),
                         f"our read of {name} at snapshot {snapshot_id}")


@pytest.mark.parametrize("name", NAMES)
def test_pypaimon_reads_final_and_its_snapshot(mixed: dict[str, Mixed], name: str) -> None:
    m = mixed[name]
    history = _written(m)
    assert_same_rows(history[-1].model.canonical(pypaimon_read=True),
                     read_result(m.final_read, m.final_path, m.spec.schema),
                     f"pypaimon's read of {name}")
    own = history[OUR_COMMITS_BEFORE]
    assert_same_rows(own.model.canonical(pypaimon_read=True),
                     read_result(m.travel_read, m.travel_path, m.spec.schema),
                     f"pypaimon's read of {name} at its own snapshot {own.first_id}")
