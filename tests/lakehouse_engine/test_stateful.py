"""A hypothesis state machine over the whole lifecycle, checked against a model after every step.

Rules: upsert/delete batches, minor and full compaction, snapshot expiry, tags, rollback to a
snapshot or a tag, rescale, and (for postpone tables) postpone compaction. Invariants: the latest
snapshot, every retained snapshot and every tag read exactly the state the model recorded for it.
`make soak` runs the long variant.
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

from lakehouse_engine import Catalog, Schema
from tests.lakehouse_engine.conftest import read
from tests.lakehouse_engine.conftest import write as engine_write

SCHEMA = pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    pa.field("v", pa.int64()), pa.field("rk", pa.string())])
State = list[tuple[Any, ...]]

ops = st.lists(st.tuples(st.integers(0, 25), st.sampled_from(["a", "b"]), st.integers(0, 1000),
                         st.sampled_from(["+I", "+U", "-D"])), min_size=1, max_size=30)


class LifecycleMachine(RuleBasedStateMachine):
    """One table, driven through its lifecycle; `bucket` is set by the subclasses."""

    bucket = "2"

    @initialize()
    def create(self) -> None:
        self.catalog = Catalog(tempfile.mkdtemp(prefix="stateful-"))
        self.catalog.create_database("db")
        self.catalog.create_table("db.t", Schema.from_pyarrow_schema(
            SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
            options={"bucket": self.bucket, "rowkind.field": "rk", "num-sorted-run.compaction-trigger": "2",
                     "snapshot.num-retained.min": "1000", "snapshot.num-retained.max": "1000"}))
        self.rows: dict[tuple[int, str], tuple[Any, ...]] = {}
        self.visible: State = []          # what readers of the latest snapshot see
        # Per snapshot and tag: (what readers see, every row incl. postponed ones).
        self.history: dict[int, tuple[State, State]] = {}
        self.tags: dict[str, tuple[State, State]] = {}
        self.tag_counter = 0

    def teardown(self) -> None:
        if hasattr(self, "catalog"):  # every example made its own warehouse
            shutil.rmtree(self.catalog.warehouse, ignore_errors=True)

    @property
    def table(self) -> Any:
        return self.catalog.get_table("db.t")

    def _state(self) -> State:
        return sorted(self.rows.values())

    def _record(self, ids: list[int], state: State) -> None:
        for i in ids:
            self.history[i] = (state, self._state())
        self.visible = state

    @rule(batch=ops)
    def write(self, batch: list[tuple[int, str, int, str]]) -> None:
        data = pa.table({"id": [b[0] for b in batch], "dt": [b[1] for b in batch], "v": [b[2] for b in batch],
                         "rk": [b[3] for b in batch]}, schema=SCHEMA)
        ids = engine_write(self.table, data)
        for k, dt, v, kind in batch:
            if kind == "-D":
                self.rows.pop((k, dt), None)
            else:
                self.rows[(k, dt)] = (k, dt, v)
        # A postpone table hides new rows until compaction moves them into buckets.
        self._record(ids, self.visible if self.bucket == "-2" else self._state())

    @rule(full=st.booleans())
    def compact(self, full: bool) -> None:
        self._record(self.table.compact(full=full), self._state())

    @rule(retain_max=st.integers(1, 6))
    def expire(self, retain_max: int) -> None:
        self.table.expire_snapshots(retain_max=retain_max, retain_min=1)
        alive = set(self.table.snapshot_manager().list_snapshot_ids())
        self.history = {i: s for i, s in self.history.items() if i in alive}

    @precondition(lambda self: bool(self.history))
    @rule()
    def tag(self) -> None:
        latest = self.table.latest_snapshot()
        name = f"t{self.tag_counter}"
        self.tag_counter += 1
        self.table.create_tag(name, latest.id)
        self.tags[name] = self.history[latest.id]

    @precondition(lambda self: len(self.history) > 1)
    @rule(data=st.data())
    def rollback(self, data: st.DataObject) -> None:
        targets = sorted(self.history) + sorted(self.tags)
        target = data.draw(st.sampled_from(targets))
        self.table.rollback_to(target)
        visible, full = self.history[target] if isinstance(target, int) else self.tags[target]
        latest = self.table.latest_snapshot().id
        self.history = {i: s for i, s in self.history.items() if i <= latest}
        self.history[latest] = (visible, full)
        self.visible = visible
        # Rows written after the target are gone; rows postponed at the target remain pending.
        self.rows = {(r[0], r[1]): r for r in full}
        self.tags = {name: s for name, s in self.tags.items() if name in self.table.tags()}

    @precondition(lambda self: bool(self.history) and self.bucket != "-1")
    @rule(buckets=st.integers(1, 4))
    def rescale(self, buckets: int) -> None:
        if self.bucket == "-2":
            self.compact(full=False)  # rescale rewrites bucketed rows; move postponed ones first
        self._record(self.table.rescale(buckets), self.visible)

    @invariant()
    def every_retained_snapshot_and_tag_reads_its_state(self) -> None:
        table = self.table
        assert sorted((r["id"], r["dt"], r["v"]) for r in read(table).to_pylist()) == self.visible
        for snapshot_id, (state, _) in self.history.items():
            assert sorted((r["id"], r["dt"], r["v"]) for r in read(table, snapshot_id).to_pylist()) == state
        for name, (state, _) in self.tags.items():
            rb = table.new_read_builder().with_tag(name)
            got = rb.new_read().to_arrow(rb.new_scan().plan().splits())
            assert sorted((r["id"], r["dt"], r["v"]) for r in got.to_pylist()) == state


class PostponeLifecycleMachine(LifecycleMachine):
    bucket = "-2"


class DynamicLifecycleMachine(LifecycleMachine):
    bucket = "-1"


_CI = settings(max_examples=8, stateful_step_count=10, deadline=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
_SOAK = settings(max_examples=300, stateful_step_count=40, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

TestFixedLifecycle = LifecycleMachine.TestCase
TestFixedLifecycle.settings = _CI
TestPostponeLifecycle = PostponeLifecycleMachine.TestCase
TestPostponeLifecycle.settings = _CI
TestDynamicLifecycle = DynamicLifecycleMachine.TestCase
TestDynamicLifecycle.settings = _CI


@pytest.mark.slow
@pytest.mark.parametrize("machine", [LifecycleMachine, PostponeLifecycleMachine, DynamicLifecycleMachine])
def test_soak_lifecycle(machine: type[LifecycleMachine]) -> None:
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(machine, settings=_SOAK)
