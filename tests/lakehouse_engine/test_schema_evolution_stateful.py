"""A hypothesis state machine interleaving schema changes with writes, compactions and reads.

Rules: upserts and deletes, add / drop / rename / widen a column, minor and full compaction.
The model keeps each row as {field id: value} and each snapshot's schema, so the invariants check
that the latest snapshot reads the model under the latest names and types, and that every earlier
snapshot reads what it held, under its own schema.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from lakehouse_engine import Catalog, Schema, SchemaChange
from tests.lakehouse_engine.conftest import read
from tests.lakehouse_engine.conftest import write as engine_write

BASE = pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("v0", pa.int32()),
                  pa.field("rk", pa.string())])
# (field id, name, Paimon type) of each value column; id and rk keep ids 0 and 2.
Columns = list[tuple[int, str, str]]
Rows = dict[int, dict[int, Any]]

ops = st.lists(st.tuples(st.integers(0, 12), st.sampled_from(["+I", "+U", "-D"]),
                         st.lists(st.one_of(st.none(), st.integers(-1000, 1000)), min_size=8, max_size=8)),
               min_size=1, max_size=12)


class EvolvingTableMachine(RuleBasedStateMachine):
    """One primary-key table whose shape changes between writes."""

    @initialize(bucket=st.sampled_from(["1", "2", "-1"]))
    def create(self, bucket: str) -> None:
        self.catalog = Catalog(tempfile.mkdtemp(prefix="evolving-"))
        self.catalog.create_database("db")
        self.catalog.create_table("db.t", Schema.from_pyarrow_schema(
            BASE, primary_keys=["id"], options={"bucket": bucket, "rowkind.field": "rk",
                                                "num-sorted-run.compaction-trigger": "3"}))
        self.columns: Columns = [(1, "v0", "INT")]
        self.rows: Rows = {}
        self.next_name = 1
        # Snapshot id -> (its value columns, its rows).
        self.history: dict[int, tuple[Columns, Rows]] = {}

    def teardown(self) -> None:
        if hasattr(self, "catalog"):
            shutil.rmtree(self.catalog.warehouse, ignore_errors=True)

    @property
    def table(self) -> Any:
        return self.catalog.get_table("db.t")

    def _record(self, ids: list[int]) -> None:
        for i in ids:
            self.history[i] = (list(self.columns), {k: dict(v) for k, v in self.rows.items()})

    def _expected(self, columns: Columns, rows: Rows) -> list[tuple[Any, ...]]:
        return sorted((k, *(r.get(fid) for fid, _, _ in columns)) for k, r in rows.items())

    def _got(self, table: pa.Table, columns: Columns) -> list[tuple[Any, ...]]:
        names = ["id"] + [name for _, name, _ in columns]
        return sorted(tuple(r[n] for n in names) for r in table.select(names).to_pylist())

    # ---- writes -------------------------------------------------------------------------------
    @rule(batch=ops)
    def write(self, batch: list[tuple[int, str, list[Any]]]) -> None:
        table = self.table
        arrow = table.schema.arrow_schema()
        data: dict[str, list[Any]] = {"id": [b[0] for b in batch], "rk": [b[1] for b in batch]}
        for i, (_, name, _) in enumerate(self.columns):
            data[name] = [b[2][i] for b in batch]
        ids = engine_write(table, pa.table({n: data[n] for n in arrow.names}, schema=arrow))
        for key, kind, values in batch:
            if kind == "-D":
                self.rows.pop(key, None)
            else:
                self.rows[key] = {fid: values[i] for i, (fid, _, _) in enumerate(self.columns)}
        self._record(ids)

    # ---- schema changes -----------------------------------------------------------------------
    @precondition(lambda self: len(self.columns) < 6)
    @rule(wide=st.booleans())
    def add_column(self, wide: bool) -> None:
        name, kind = f"c{self.next_name}", "BIGINT" if wide else "INT"
        self.next_name += 1
        self.catalog.alter_table("db.t", [SchemaChange.add_column(name, kind)])
        field_id = self.table.schema.field(name).id
        assert field_id > max([2] + [fid for fid, _, _ in self.columns])  # ids never reused
        self.columns.append((field_id, name, kind))

    @precondition(lambda self: len(self.columns) > 1)
    @rule(data=st.data())
    def drop_column(self, data: st.DataObject) -> None:
        i = data.draw(st.integers(0, len(self.columns) - 1))
        fid, name, _ = self.columns.pop(i)
        self.catalog.alter_table("db.t", [SchemaChange.drop_column(name)])
        for r in self.rows.values():
            r.pop(fid, None)

    @rule(data=st.data())
    def rename_column(self, data: st.DataObject) -> None:
        i = data.draw(st.integers(0, len(self.columns) - 1))
        fid, name, kind = self.columns[i]
        new = f"r{self.next_name}"
        self.next_name += 1
        self.catalog.alter_table("db.t", [SchemaChange.rename_column(name, new)])
        self.columns[i] = (fid, new, kind)

    @precondition(lambda self: any(kind == "INT" for _, _, kind in self.columns))
    @rule(data=st.data())
    def widen_column(self, data: st.DataObject) -> None:
        narrow = [i for i, c in enumerate(self.columns) if c[2] == "INT"]
        i = data.draw(st.sampled_from(narrow))
        fid, name, _ = self.columns[i]
        self.catalog.alter_table("db.t", [SchemaChange.update_column_type(name, "BIGINT")])
        self.columns[i] = (fid, name, "BIGINT")

    # ---- compaction ---------------------------------------------------------------------------
    @rule(full=st.booleans())
    def compact(self, full: bool) -> None:
        self._record(self.table.compact(full=full))

    # ---- invariants ---------------------------------------------------------------------------
    @invariant()
    def latest_reads_the_model(self) -> None:
        if not hasattr(self, "catalog"):
            return
        table = self.table
        got = read(table)
        assert set(got.column_names) == {"id", "rk"} | {n for _, n, _ in self.columns}
        for _, name, kind in self.columns:
            assert got.schema.field(name).type == (pa.int64() if kind == "BIGINT" else pa.int32())
        assert self._got(got, self.columns) == self._expected(self.columns, self.rows)

    @invariant()
    def every_snapshot_reads_what_it_held_under_its_own_schema(self) -> None:
        if not hasattr(self, "catalog") or not self.history:
            return
        table = self.table
        for snapshot_id, (columns, rows) in sorted(self.history.items())[-3:]:
            got = read(table, snapshot_id=snapshot_id)
            assert self._got(got, columns) == self._expected(columns, rows), snapshot_id


_CI = settings(max_examples=6, stateful_step_count=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_SOAK = settings(max_examples=200, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TestEvolvingTable = EvolvingTableMachine.TestCase
TestEvolvingTable.settings = _CI


@pytest.mark.slow
def test_soak_evolving_table() -> None:
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(EvolvingTableMachine, settings=_SOAK)
