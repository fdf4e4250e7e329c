"""This engine reads tables that pypaimon 2.1.0 writes, equal to pypaimon's own read and the model.

One pypaimon subprocess creates and fills every table (row kinds through `rowkind.field`, which
pypaimon's writer honours, see pypaimon/write/row_kind.py), reads each back itself and reports
the snapshot id of every commit; the tests then read the same tables with our engine, latest and
time travelled, and compare both reads with the reference model.
"""

from __future__ import annotations

import shutil
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
    ORC_VALUE_TYPES,
    PARTITION_TYPES,
    PYPAIMON_READ,
    TWO_DATES,
    Committed,
    Spec,
    TableModel,
    assert_same_rows,
    canonical_rows,
    change_batches,
    key_type_spec,
    one_batch_per_commit,
    partition_type_spec,
    pk_spec,
    read_result,
    state_at,
    value_fields,
    value_row,
    write_batch_file,
)

PYPAIMON_WRITE = PYPAIMON_READ + """
import pyarrow.parquet as pq

def paimon_write(catalog, spec):
    ident = "db." + spec["name"]
    schema = load_batch(spec["commits"][0][0]).schema
    catalog.create_table(ident, Schema.from_pyarrow_schema(
        schema, partition_keys=spec["partition_keys"], primary_keys=spec["primary_keys"],
        options=spec["options"]), False)
    snapshot_ids = []
    for i, files in enumerate(spec["commits"]):
        table = catalog.get_table(ident)
        latest = table.snapshot_manager().get_latest_snapshot()
        before = 0 if latest is None else latest.id
        wb = table.new_batch_write_builder()
        if spec.get("overwrite") is not None and i == len(spec["commits"]) - 1:
            wb = wb.overwrite(spec["overwrite"])
        w = wb.new_write()
        c = wb.new_commit()
        for f in files:
            w.write_arrow(load_batch(f))
        c.commit(w.prepare_commit())
        w.close()
        c.close()
        after = catalog.get_table(ident).snapshot_manager().get_latest_snapshot().id
        snapshot_ids.append([before, after])
    return snapshot_ids

catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
catalog.create_database("db", True)
written = {}
for spec in ARGS["tables"]:
    try:
        written[spec["name"]] = paimon_write(catalog, spec)
    except Exception:
        written[spec["name"]] = "ERROR " + traceback.format_exc()[-3000:]
emit({"written": written, "read": paimon_reads(catalog, ARGS["reads"])})
"""


def _specs() -> list[Spec]:
    specs = [
        pk_spec("pk_b4_all_types", [pa.field("id", pa.int64())], [], lambda i: {"id": i},
                n_keys=100, commits=3, bucket=4, value_types=ALL_VALUE_TYPES, seed=11),
        pk_spec("pk_b1_two_writes_per_commit", [pa.field("id", pa.int32())], [],
                lambda i: {"id": 1000 - i * 7}, n_keys=60, commits=3, bucket=1,
                value_types=["string", "double"], seed=12, split=True),
        pk_spec("part_dt", [pa.field("dt", pa.string()), pa.field("id", pa.int64())], ["dt"],
                lambda i: {"dt": ["a", "b", "2024-01-01"][i % 3], "id": i // 2},
                n_keys=120, commits=3, bucket=2, value_types=["string", "decimal_10_2"], seed=13),
        pk_spec("part_int_date",
                [pa.field("p_int", pa.int32()), pa.field("p_date", pa.date32()),
                 pa.field("id", pa.int64())], ["p_int", "p_date"],
                lambda i: {"p_int": [-1, 0, 7][i % 3], "p_date": TWO_DATES[i % 2], "id": i // 3},
                n_keys=90, commits=2, bucket=3, value_types=["timestamp_6"], seed=14),
        pk_spec("composite_key", [pa.field("k1", pa.int64()), pa.field("k2", pa.string())], [],
                lambda i: {"k1": i // 3 - 5, "k2": ["x", "a-much-longer-string", "ü"][i % 3]},
                n_keys=90, commits=3, bucket=4, value_types=["int", "timestamp_3"], seed=15),
        pk_spec("many_commits", [pa.field("id", pa.int64())], [], lambda i: {"id": i},
                n_keys=40, commits=6, bucket=7, value_types=["string", "int"], seed=16),
    ]
    # Upserts only: merging and value types apart from deletes.
    specs.append(pk_spec("pk_b4_all_types_upserts", [pa.field("id", pa.int64())], [],
                         lambda i: {"id": i}, n_keys=100, commits=3, bucket=4,
                         value_types=ALL_VALUE_TYPES, seed=18, retract=False))
    # Tables whose data files are ORC or Avro (`file.format`): read by each file's extension.
    # (pypaimon's Avro writer has no nanosecond timestamps and no BINARY(n).)
    specs += [pk_spec(f"pk_b2_{fmt}", [pa.field("id", pa.int64())], [], lambda i: {"id": i * 3},
                      n_keys=80, commits=3, bucket=2, value_types=types, seed=20 + n,
                      extra_options={"file.format": fmt})
              for n, (fmt, types) in enumerate([
                  ("orc", ORC_VALUE_TYPES), ("avro", [t for t in ALL_VALUE_TYPES if t not in ("timestamp_9", "binary_5")])])]
    specs += [key_type_spec(i, t) for i, t in enumerate(KEY_TYPES)]
    specs += [partition_type_spec(t) for t in PARTITION_TYPES]
    # Partition values Paimon escapes in directory names, or maps to the default partition.
    specs.append(pk_spec(
        "part_dt_special", [pa.field("dt", pa.string()), pa.field("id", pa.int64())], ["dt"],
        lambda i: {"dt": ["k=v", "12:30", "100%", "a#b?c", "", " ", "a/b"][i % 7], "id": i},
        n_keys=36, commits=2, bucket=1, value_types=["int"], seed=19))
    append_schema = pa.schema([pa.field("id", pa.int64()), pa.field("dt", pa.string())]
                              + value_fields(ALL_VALUE_TYPES))

    def append_rows(start: int, n: int) -> list[dict[str, Any]]:
        return [{"id": i % 37, "dt": "abc"[i % 3], **value_row(i, 0, ALL_VALUE_TYPES)}
                for i in range(start, start + n)]

    specs.append(Spec("append_unaware", append_schema, [], ["dt"], {"bucket": "-1"},
                      [[append_rows(0, 90)], [append_rows(90, 60), append_rows(0, 5)]]))
    specs.append(Spec("append_bucketed", append_schema, [], [], {"bucket": "3", "bucket-key": "id"},
                      [[append_rows(0, 70)], [append_rows(70, 70)]]))
    overwrite_rows = [{"dt": "a", "id": i, "c_string": f"new-{i}", "c_int": i, "rk": "+I"}
                      for i in range(0, 40, 3)]
    batches = change_batches(60, 2, 17, lambda i, v: {"dt": "abc"[i % 3], "id": i,
                                                      **value_row(i, v, ["string", "int"])})
    specs.append(Spec(
        "overwrite_dt",
        pa.schema([pa.field("dt", pa.string()), pa.field("id", pa.int64())]
                  + value_fields(["string", "int"]) + [pa.field("rk", pa.string())]),
        ["dt", "id"], ["dt"], {"bucket": "2", "rowkind.field": "rk"},
        one_batch_per_commit(batches), overwrite=({"dt": "a"}, overwrite_rows)))
    return specs


SPECS = _specs()
NAMES = [s.name for s in SPECS]


@dataclass
class Written:
    spec: Spec
    models: list[TableModel]  # the model after each commit
    snapshot_ids: list[list[int]] | str  # pypaimon's [before, after] ids per commit, or its error
    own_read: list[tuple[Any, ...]] | str  # pypaimon's canonical read of the latest snapshot
    warehouse: str

    def history(self) -> list[Committed]:
        if isinstance(self.snapshot_ids, str):
            pytest.fail(f"pypaimon failed to write {self.spec.name}:\n{self.snapshot_ids}")
        return [Committed(before + 1, after, model)
                for (before, after), model in zip(self.snapshot_ids, self.models, strict=True)]


def _models(spec: Spec) -> list[TableModel]:
    model = TableModel(spec.schema, spec.primary_keys, spec.options.get("rowkind.field"))
    states = []
    for commit in spec.commits:
        for rows in commit:
            model.apply(rows)
        states.append(model.copy())
    if spec.overwrite is not None:
        match, rows = spec.overwrite
        model.overwrite(match, [{n: r.get(n) for n in spec.schema.names} for r in rows])
        states.append(model.copy())
    return states


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory,
            pypaimon: Callable[..., Any]) -> dict[str, Written]:
    tmp: Path = tmp_path_factory.mktemp("we_read_pypaimon")
    warehouse = tmp / "warehouse"
    tables, reads = [], []
    for spec in SPECS:
        commits = []
        all_commits = list(spec.commits)
        if spec.overwrite is not None:
            match, rows = spec.overwrite
            all_commits.append([[{n: r.get(n) for n in spec.schema.names} for r in rows]])
        for ci, commit in enumerate(all_commits):
            files = []
            for bi, rows in enumerate(commit):
                path = str(tmp / f"{spec.name}.{ci}.{bi}.parquet")
                files.append(write_batch_file(path, rows, spec.schema))
            commits.append(files)
        tables.append({"name": spec.name, "primary_keys": spec.primary_keys,
                       "partition_keys": spec.partition_keys, "options": spec.options,
                       "commits": commits,
                       "overwrite": spec.overwrite[0] if spec.overwrite else None})
        reads.append({"table": f"db.{spec.name}", "out": str(tmp / f"{spec.name}.own.parquet")})
    result = pypaimon(PYPAIMON_WRITE, warehouse=str(warehouse), tables=tables, reads=reads)
    out: dict[str, Written] = {}
    for spec, read in zip(SPECS, reads, strict=True):
        status = result["read"][read["out"]]
        try:
            own: list[tuple[Any, ...]] | str = read_result(status, read["out"], spec.schema)
        except AssertionError as e:
            own = str(e)
        out[spec.name] = Written(spec, _models(spec), result["written"][spec.name], own,
                                 str(warehouse))
    return out


def _our_read(w: Written, snapshot: int | None = None,
              pypaimon_read: bool = False) -> list[tuple[Any, ...]]:
    table = Catalog(w.warehouse).get_table(f"db.{w.spec.name}")
    rb = table.new_read_builder()
    if snapshot is not None:
        rb = rb.with_snapshot(snapshot)
    return canonical_rows(rb.new_read().to_arrow(rb.new_scan().plan().splits()), w.spec.schema,
                          pypaimon_read)


@pytest.mark.parametrize("name", NAMES)
def test_pypaimon_reads_its_own_table_as_the_model(written: dict[str, Written], name: str) -> None:
    """Sanity of the model and the harness: pypaimon agrees with the model on its own table."""
    w = written[name]
    history = w.history()
    if isinstance(w.own_read, str):
        pytest.fail(w.own_read)
    assert_same_rows(history[-1].model.canonical(pypaimon_read=True), w.own_read,
                     f"pypaimon's read of its {name}")


@pytest.mark.parametrize("name", NAMES)
def test_we_read_pypaimon_table(written: dict[str, Written], name: str) -> None:
    w = written[name]
    history = w.history()
    assert_same_rows(history[-1].model.canonical(), _our_read(w),
                     f"our read of pypaimon's {name} vs the model")
    if not isinstance(w.own_read, str):
        assert_same_rows(w.own_read, _our_read(w, pypaimon_read=True),
                         f"our read of pypaimon's {name} vs pypaimon's read")


@pytest.mark.parametrize("name", ["many_commits", "overwrite_dt", "pk_b4_all_types_upserts"])
def test_we_time_travel_pypaimon_snapshots(written: dict[str, Written], name: str) -> None:
    """Every snapshot pypaimon made, read with `with_snapshot`, shows the model of its commit."""
    w = written[name]
    history = w.history()
    ids = [s.id for s in Catalog(w.warehouse).get_table(f"db.{name}").snapshots()]
    assert ids == list(range(1, history[-1].last_id + 1)), ids
    for snapshot_id in ids:
        assert_same_rows(state_at(history, snapshot_id).canonical(), _our_read(w, snapshot_id),
                         f"our read of pypaimon's {name} at snapshot {snapshot_id}")


@pytest.mark.parametrize("fmt", ["orc", "avro"])
def test_we_upsert_into_and_compact_pypaimons_orc_and_avro_tables(written: dict[str, Written], fmt: str,
                                                                 tmp_path: Path,
                                                                 pypaimon: Callable[..., Any]) -> None:
    """Into a copy of pypaimon's ORC/Avro table we write parquet level-0 files (through
    `file.format.per.level`; a reader picks each file's format by its extension), then our full
    compaction writes the table's own format: upserts, deletes and new keys merge with pypaimon's files, before
    and after a full compaction, in our reads and in pypaimon's."""
    w = written[f"pk_b2_{fmt}"]
    model = w.history()[-1].model.copy()
    warehouse = tmp_path / "copy"
    shutil.copytree(w.warehouse, warehouse)
    table = Catalog(str(warehouse)).get_table(f"db.{w.spec.name}").copy({"file.format.per.level": "0:parquet"})
    live = sorted(model.rows(), key=lambda r: r["id"])
    types = [f.name[2:] for f in w.spec.schema if f.name.startswith("c_")]
    rows = [{"id": r["id"], **value_row(r["id"], 900, types), "rk": "+U"} for r in live[::2]]
    rows += [{**r, "rk": "-D"} for r in live[1::4]]
    rows += [{"id": -i, **value_row(i, 901, types), "rk": "+I"} for i in range(1, 11)]
    wb = table.new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    data = pa.Table.from_pylist(rows, schema=w.spec.schema)
    stored = table.schema.arrow_schema()
    write.write_arrow(data.cast(pa.schema([stored.field(n) for n in data.column_names])))  # LTZ: UTC instants
    commit.commit(write.prepare_commit())
    model.apply(rows)
    mixed = table.latest_snapshot()
    assert mixed is not None
    assert {e.file.file_name.rsplit(".", 1)[1] for e in table.store.manifest_io().live_entries(mixed)} == {fmt, "parquet"}
    reads = []
    for stage, snapshot in (("mixed files", mixed.id), ("after a full compaction", None)):
        if snapshot is None:
            table.compact(full=True)
            latest = table.latest_snapshot()
            assert latest is not None
            assert {e.file.file_name.rsplit(".", 1)[1] for e in table.store.manifest_io().live_entries(latest)} == {fmt}
        rb = table.new_read_builder()
        got = canonical_rows(rb.new_read().to_arrow(rb.new_scan().plan().splits()), w.spec.schema)
        assert_same_rows(model.canonical(), got, f"our read of pypaimon's {fmt} table, {stage}")
        reads.append({"table": f"db.{w.spec.name}", "snapshot": snapshot, "out": str(tmp_path / f"{len(reads)}.parquet")})
    result = pypaimon(PYPAIMON_WRITE, warehouse=str(warehouse), tables=[], reads=reads)
    for stage, spec in zip(("mixed files", "after our full compaction"), reads, strict=True):
        assert_same_rows(model.canonical(pypaimon_read=True),
                         read_result(result["read"][spec["out"]], spec["out"], w.spec.schema),
                         f"pypaimon's read of its {fmt} table with our files, {stage}")
