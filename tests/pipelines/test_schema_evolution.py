"""The events gain a column: the contract accepts it, the LSM write adds it to the table.

Three sample days land; the third carries `coupon_code`. Days one and two are written first
(the table has the original columns), then day three evolves the table: its rows keep their
coupons, older rows read null. With the lakehouse resource's `evolve_schema` off, the write of
day three fails naming the column and leaves the table as it was; turned on, the same staged
rows are written by the next run. A late file of an older day, without the column, is then
written with nulls in it, evolution on or off.
"""

from __future__ import annotations

import datetime
import shutil
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pipelines.defs.ingestion.assets import ingested_events
from pipelines.defs.lsm.assets import lsm_write
from pipelines.defs.lsm.publish import lsm_publish
from pipelines.lib.resources import LakehouseResource, LakehouseSparkResource
from pipelines.lib.sample_data import (
    COUPON_CODE,
    EVENT_SCHEMA,
    PRIMARY_KEY,
    apply_to_model,
    generate_order_events,
)
from pipelines.scripts.run_main import write_landing
from tests.pipelines.conftest import DAY, metadata_of

pytestmark = pytest.mark.spark

START = datetime.date.fromisoformat(DAY)
DAYS = tuple((START + datetime.timedelta(days=d)).isoformat() for d in range(3))
WRITE = [ingested_events, lsm_write, lsm_publish]  # bucket_assignment only plans: not needed to write


def _land(lakehouse: LakehouseResource) -> list[pa.Table]:
    batches = generate_order_events(days=3, rows_per_day=120, seed=11, start=START,
                                    coupons_from=datetime.date.fromisoformat(DAYS[2]))
    write_landing(lakehouse.landing_path, batches)
    return batches


def _run(lakehouse: LakehouseResource, spark: LakehouseSparkResource, first: str, last: str,
         raise_on_error: bool = True) -> dg.ExecuteInProcessResult:
    return dg.materialize(WRITE, resources={"spark": spark, "lakehouse": lakehouse},
                          instance=dg.DagsterInstance.ephemeral(), tags={
                              "dagster/asset_partition_range_start": first,
                              "dagster/asset_partition_range_end": last}, raise_on_error=raise_on_error)


def _merged(lakehouse: LakehouseResource) -> pa.Table:
    rb = lakehouse.get_table().new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits()).sort_by([(k, "ascending") for k in PRIMARY_KEY])


def test_a_later_day_with_a_new_column_evolves_the_table_unless_evolution_is_off(
        tmp_path: Path, spark_resource: LakehouseSparkResource) -> None:
    fixed = LakehouseResource(warehouse=str(tmp_path / "warehouse"), bucket=2, evolve_schema=False)
    batches = _land(fixed)

    before = _run(fixed, spark_resource, DAYS[0], DAYS[1])  # no new column yet: evolution not needed
    meta = metadata_of(before, "lsm_write")
    assert (meta["schema_id"], meta["columns"], meta["columns_added"]) == (0, ", ".join(EVENT_SCHEMA.names), "none")
    assert metadata_of(before, "ingested_events")["evolution_columns"] == "none"
    snapshot = fixed.get_table().latest_snapshot()

    # Evolution off: day three's write fails naming the column, and the table stays as it was.
    refused = _run(fixed, spark_resource, DAYS[2], DAYS[2], raise_on_error=False)
    assert not refused.success
    assert metadata_of(refused, "ingested_events")["evolution_columns"] == COUPON_CODE
    [failure] = [e for e in refused.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    message = str(failure.step_failure_data.error)
    assert f"unexpected columns ['{COUPON_CODE}']" in message and "evolve_schema is off" in message
    table = fixed.get_table()
    assert table.schema.field_names == EVENT_SCHEMA.names and table.latest_snapshot() == snapshot

    # Evolution on (the default): the staged rows are written and the table gains the column.
    evolving = LakehouseResource(warehouse=fixed.warehouse, bucket=2)
    after = _run(evolving, spark_resource, DAYS[2], DAYS[2])
    meta = metadata_of(after, "lsm_write")
    assert (meta["schema_id"], meta["columns_added"]) == (1, COUPON_CODE)
    assert meta["columns"] == ", ".join([*EVENT_SCHEMA.names, COUPON_CODE])
    table = evolving.get_table()
    assert table.schema.field_names == [*EVENT_SCHEMA.names, COUPON_CODE]
    assert table.schema.field(COUPON_CODE).type.nullable
    merged = _merged(evolving)
    expected = apply_to_model(batches)  # coupons on day three, nulls before
    assert merged.select(expected.column_names).cast(expected.schema).equals(expected)
    coupons = {dt: merged.filter(pc.equal(merged.column("dt"), dt)).column(COUPON_CODE) for dt in DAYS}
    assert coupons[DAYS[0]].null_count == len(coupons[DAYS[0]]) > 0
    assert coupons[DAYS[1]].null_count == len(coupons[DAYS[1]]) > 0
    assert 0 < coupons[DAYS[2]].null_count < len(coupons[DAYS[2]])

    # A late file of an older day, without the column, into the evolved table: its rows read
    # null there, with evolution off too (the table has the column already; nothing to add).
    folder = fixed.landing_path / f"dt={DAYS[0]}"
    late = sorted(p for p in folder.iterdir() if p.name.startswith("orders-"))[0]
    shutil.copy(late, folder / f"late-{late.name}")  # the same events again: the same merged rows
    again = _run(fixed, spark_resource, DAYS[0], DAYS[0])
    assert metadata_of(again, "ingested_events")["evolution_columns"] == "none"
    assert (metadata_of(again, "lsm_write")["rows_written"], metadata_of(again, "lsm_write")["schema_id"]) == (
        metadata_of(again, "ingested_events")["rows_staged"], 1)
    merged = _merged(fixed).select(expected.column_names).cast(expected.schema)
    # Every row is as before but for keys day one deleted whose event the late file carries again:
    # their -D went when lsm_write took day one's level 0 up to the top level (Paimon drops deletes
    # there, as a full compaction does), so the late event has nothing newer to lose to.
    kept = merged.filter(pc.is_in(merged.column("order_id"), expected.column("order_id")))
    assert kept.equals(expected)
    back = set(merged.column("order_id").to_pylist()) - set(expected.column("order_id").to_pylist())
    deleted = {k for b in batches for k in b.column("order_id").to_pylist()} - set(expected.column("order_id").to_pylist())
    assert back <= deleted
