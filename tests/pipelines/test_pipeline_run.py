"""Every asset and check through `materialize` on a small sample, on the shared Spark session.

One run of the whole graph over two days sets the table up (module fixture); the tests after it
read what it did, then drive the table further in file order: ingest again, trigger the sensor
and compact, rescale, expire. After each, the table still equals the model of the valid events.
"""

from __future__ import annotations

import datetime
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.json as pa_json
import pytest

from pipelines.defs.compaction.assets import full_compaction, sorted_run_compaction
from pipelines.defs.compaction.sensors import sorted_runs_sensor
from pipelines.defs.downstream.assets import CONSUMER_ID, daily_revenue
from pipelines.defs.downstream.publish import daily_revenue_publish
from pipelines.defs.ingestion.assets import ingested_events
from pipelines.defs.lsm.assets import bucket_assignment, lsm_write
from pipelines.defs.lsm.publish import lsm_publish
from pipelines.defs.maintenance.assets import (
    ExpiryConfig,
    RescaleConfig,
    postpone_compaction,
    rescale,
    snapshot_expiry,
)
from pipelines.lib.bucket_report import bucket_rows
from pipelines.lib.contract import MALFORMED, REASON, SOURCE_FILE
from pipelines.lib.partitions import partition_name
from pipelines.lib.resources import LakehouseResource, LakehouseSparkResource
from pipelines.lib.sample_data import PRIMARY_KEY, apply_to_model, generate_order_events
from pipelines.scripts.run_main import write_landing
from tests.pipelines.conftest import (
    ASSET_CHECKS,
    DAYS,
    check_results,
    metadata_by_partition,
    metadata_of,
)

pytestmark = pytest.mark.spark

ASSETS = [ingested_events, bucket_assignment, lsm_write, lsm_publish, sorted_run_compaction, full_compaction,
          postpone_compaction, rescale, daily_revenue, daily_revenue_publish, snapshot_expiry]
RANGE = {"dagster/asset_partition_range_start": DAYS[0], "dagster/asset_partition_range_end": DAYS[-1]}


@dataclass
class Pipeline:
    lakehouse: LakehouseResource
    resources: dict[str, Any]
    instance: dg.DagsterInstance
    batches: list[pa.Table]
    first: Any  # the result of the first run

    def materialize(self, selection: Any, **kwargs: Any) -> Any:
        return dg.materialize([*ASSETS, *ASSET_CHECKS], selection=selection, resources=self.resources,
                              instance=self.instance, **kwargs)

    def table_equals_model(self) -> bool:
        table = self.lakehouse.get_table()
        rb = table.new_read_builder()
        merged = rb.new_read().to_arrow(rb.new_scan().plan().splits())
        expected = apply_to_model(self.batches)
        got = merged.select(expected.column_names).sort_by([(k, "ascending") for k in PRIMARY_KEY])
        return got.cast(expected.schema).equals(expected)


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory, spark_resource: LakehouseSparkResource) -> Pipeline:
    warehouse = tmp_path_factory.mktemp("pipeline") / "warehouse"
    lakehouse = LakehouseResource(warehouse=str(warehouse), bucket=2,
                                  table_options={"num-sorted-run.compaction-trigger": "2"})
    batches = generate_order_events(days=len(DAYS), rows_per_day=400, seed=3,
                                    start=datetime.date.fromisoformat(DAYS[0]))
    write_landing(lakehouse.landing_path, batches)
    resources = {"spark": spark_resource, "lakehouse": lakehouse}
    instance = dg.DagsterInstance.ephemeral()
    first = dg.materialize([*ASSETS, *ASSET_CHECKS], resources=resources, instance=instance, tags=RANGE)
    return Pipeline(lakehouse, resources, instance, batches, first)


def test_one_run_materializes_every_asset_and_passes_every_check(pipeline: Pipeline) -> None:
    assert pipeline.first.success
    materialized = sorted((e.asset_key.to_user_string(), e.partition)
                          for e in pipeline.first.get_asset_materialization_events())
    per_day = [(a, d) for a in ("bucket_assignment", "ingested_events", "lsm_write", "lsm_publish") for d in DAYS]
    once = [(a, None) for a in ("full_compaction", "postpone_compaction", "rescale", "snapshot_expiry",
                                "sorted_run_compaction", "daily_revenue", "daily_revenue_publish")]
    assert materialized == sorted(per_day + once)
    checks = check_results(pipeline.first)
    assert len(checks) == len(ASSET_CHECKS)
    assert {name: e.passed for name, e in checks.items() if not e.passed} == {}


def day_events(pipeline: Pipeline) -> dict[str, int]:
    return {d: sum(b.num_rows for b in pipeline.batches if b.num_rows and b.column("dt")[0].as_py() == d)
            for d in DAYS}


def test_ingestion_stages_valid_rows_and_quarantines_the_rest_with_reasons(pipeline: Pipeline) -> None:
    per_day = metadata_by_partition(pipeline.first, "ingested_events")
    # Each day's materialization carries that day's figures: 4 event files + 1 rejects file, 6 rejects.
    assert {d: (m["new_files"], m["rows_staged"], m["rows_quarantined"]) for d, m in per_day.items()} == {
        d: (5, n, 6) for d, n in day_events(pipeline).items()}
    assert [r.data["file"] for r in per_day[DAYS[1]]["files"].records] == sorted(
        f"dt={DAYS[1]}/{p.name}" for p in (pipeline.lakehouse.landing_path / f"dt={DAYS[1]}").iterdir())
    meta = per_day[DAYS[0]]
    parts = sorted((Path(meta["quarantine"])).glob("part-*.json"))
    quarantined = pa.concat_tables([pa_json.read_json(p) for p in parts if p.stat().st_size])
    reasons = quarantined.column(REASON).to_pylist()
    assert reasons.count(MALFORMED) == 2
    assert reasons.count("dt differs from the dt of its landing folder") == 2
    assert reasons.count("order_id: not_nullable") == 2
    assert reasons.count("amount: in_range(0, 9999999999.99)") == 2
    assert reasons.count("quantity: in_range(1, 10000)") == 2
    assert sum(r.startswith("_rowkind: isin(") for r in reasons) == 2
    assert all(s.endswith("/rejects.jsonl") for s in quarantined.column(SOURCE_FILE).to_pylist())
    assert meta["quarantine_reason_counts"][MALFORMED] == 2
    assert Path(meta["ledger"]).exists() and "staging" not in meta  # no link to a folder lsm_write deletes


def test_bucket_assignment_reports_rows_and_new_buckets_per_day(pipeline: Pipeline) -> None:
    per_day = metadata_by_partition(pipeline.first, "bucket_assignment")
    for day, n in day_events(pipeline).items():
        meta = per_day[day]
        assert meta["bucket_mode"] == "fixed"
        assert meta["rows"] == n
        assert (meta["buckets_assigned"], meta["new_buckets"]) == (2, 2)
        table = meta["rows_per_bucket"]
        assert isinstance(table, dg.TableMetadataValue)
        assert {(r.data["partition"], r.data["bucket"]) for r in table.records} == {
            (f"dt={day}", "0"), (f"dt={day}", "1")}
        assert sum(r.data["rows"] for r in table.records) == n
        assert "█" in meta["rows_per_bucket_chart"]
        assert Path(meta["plan"]).exists()


def test_the_lsm_write_commits_once_and_reports_each_days_buckets(pipeline: Pipeline) -> None:
    per_day = metadata_by_partition(pipeline.first, "lsm_write")
    table = pipeline.lakehouse.get_table()
    snapshot = table.snapshot(2)

    def records(snapshot_id: int) -> dict[tuple[str, int], int]:
        added = table.files_added([snapshot_id]).group_by(["partition", "bucket"]).aggregate([("row_count", "sum")])
        return {(r["partition"], r["bucket"]): r["row_count_sum"] for r in added.to_pylist()}

    # What the write's files hold, and what its level 0 became (the run's full compaction found
    # one sorted run per bucket already, and the files stayed as they were).
    stats, taken_up = records(1), records(2)
    for day, n in day_events(pipeline).items():
        meta = per_day[day]
        # Snapshot 1 holds the write-only commit's rows (no changelog); snapshot 2 is the COMPACT
        # that took its level 0 up, one sorted run per bucket, with the lookup changelog.
        assert (meta["snapshot_id"], meta["commit_kind"], meta["files_added"]) == (2, "COMPACT", 2)
        assert meta["level0_up_snapshots"] == "2"
        assert table.snapshot(1).commit_kind == "APPEND" and table.snapshot(1).changelog_manifest_list is None
        assert snapshot.changelog_manifest_list is not None and snapshot.changelog_record_count
        assert meta["rows_written"] == n
        assert meta["table_records"] == snapshot.total_record_count
        day_records = stats[(f"dt={day}", 0)] + stats[(f"dt={day}", 1)]
        assert meta["records_in_files_added"] == day_records
        # Live now: the write's records merged per key as its level 0 went up.
        live = taken_up[(f"dt={day}", 0)] + taken_up[(f"dt={day}", 1)]
        assert meta["dagster/row_count"] == live <= day_records
        assert (meta["buckets"], meta["max_sorted_runs"]) == (2, 1)
        assert [(r.data["partition"], r.data["bucket"], r.data["rows"], r.data["sorted_runs"])
                for r in meta["rows_per_bucket"].records] == [
            (f"dt={day}", "0", taken_up[(f"dt={day}", 0)], 1), (f"dt={day}", "1", taken_up[(f"dt={day}", 1)], 1)]
        assert "sorted runs per bucket" in meta["sorted_runs_per_bucket"]
        # What was written, per bucket: one file each, every bucket new.
        assert [r.data for r in meta["buckets_written"].records] == [
            {"partition": f"dt={day}", "bucket": str(b), "files": 1, "records": stats[(f"dt={day}", b)], "new": True}
            for b in (0, 1)]
        assert meta["new_buckets_written"] == 2
    staged = metadata_by_partition(pipeline.first, "ingested_events")[DAYS[0]]["staged_batch"].split(" (")[0]
    assert not Path(staged).exists()  # committed: gone
    assert pipeline.table_equals_model()


def test_running_ingestion_again_adds_nothing(pipeline: Pipeline) -> None:
    before = pipeline.lakehouse.get_table().latest_snapshot()
    result = pipeline.materialize(dg.AssetSelection.assets(ingested_events, bucket_assignment, lsm_write, lsm_publish), tags=RANGE)
    assert result.success
    assert metadata_of(result, "ingested_events")["new_files"] == 0
    assert metadata_of(result, "lsm_write")["rows_written"] == 0
    assert pipeline.lakehouse.get_table().latest_snapshot() == before


def test_new_files_raise_sorted_runs_until_the_sensor_requests_compaction(pipeline: Pipeline) -> None:
    lakehouse, day = pipeline.lakehouse, DAYS[0]
    folder = lakehouse.landing_path / f"dt={day}"
    originals = sorted(p for p in folder.iterdir() if p.name.startswith("orders-"))
    for copy in (1, 2):  # the same events again under new names: new files, same merged rows
        for path in originals:
            shutil.copy(path, folder / f"again{copy}-{path.name}")
        result = pipeline.materialize(dg.AssetSelection.assets(ingested_events, bucket_assignment, lsm_write, lsm_publish),
                                      partition_key=day)
        assert metadata_of(result, "ingested_events")["new_files"] == len(originals)
    runs = {(r.partition, r.bucket): r.sorted_runs for r in bucket_rows(lakehouse.get_table())}
    assert runs == {(partition_name(day), 0): 3, (partition_name(day), 1): 3,
                    (partition_name(DAYS[1]), 0): 1, (partition_name(DAYS[1]), 1): 1}

    context = dg.build_sensor_context(instance=pipeline.instance, resources={"lakehouse": lakehouse})
    verdict = sorted_runs_sensor(context)
    assert isinstance(verdict, dg.SensorResult)
    [request] = verdict.run_requests or []
    result = pipeline.materialize(dg.AssetSelection.assets(sorted_run_compaction), run_config=request.run_config)
    assert result.success
    meta = metadata_of(result, "sorted_run_compaction")
    assert (meta["buckets_requested"], meta["buckets_compacted"], meta["max_sorted_runs"]) == (2, 2, 1)
    assert check_results(result)["sorted_run_compaction:bucket_row_counts_match_snapshot"].passed
    after = dg.build_sensor_context(instance=pipeline.instance, resources={"lakehouse": lakehouse},
                                    cursor=verdict.cursor)
    assert isinstance(sorted_runs_sensor(after), dg.SkipReason)
    assert pipeline.table_equals_model()


def test_the_full_compaction_leaves_one_sorted_run_per_bucket(pipeline: Pipeline) -> None:
    meta = metadata_of(pipeline.first, "full_compaction")
    assert (meta["compaction"], meta["max_sorted_runs"]) == ("full", 1)
    # 2 days x 2 buckets, each one sorted run at the top level already (lsm_write took its only
    # write's level 0 up there): nothing to rewrite.
    assert (meta["buckets_requested"], meta["buckets_compacted"]) == (4, 0)
    assert check_results(pipeline.first)["full_compaction:bucket_row_counts_match_snapshot"].passed
    assert {r.sorted_runs for r in bucket_rows(pipeline.lakehouse.get_table())} == {1}


def test_rescale_applies_the_configured_bucket_count(pipeline: Pipeline) -> None:
    config = dg.RunConfig(ops={"rescale": RescaleConfig(bucket_num=3, partitions=[DAYS[1]])})
    result = pipeline.materialize(dg.AssetSelection.assets(rescale), run_config=config)
    assert result.success
    meta = metadata_of(result, "rescale")
    assert meta["partitions_rescaled"] == 1
    assert f"| {partition_name(DAYS[1])} | 2 |" in meta["advice"] and "rescaled to 3" in meta["advice"]
    counts = {r.partition: r.total_buckets for r in bucket_rows(pipeline.lakehouse.get_table())}
    assert counts == {partition_name(DAYS[0]): 2, partition_name(DAYS[1]): 3}
    assert check_results(result)["rescale:bucket_row_counts_match_snapshot"].passed
    assert pipeline.table_equals_model()


def test_snapshot_expiry_keeps_the_retained_snapshots_and_removes_orphans(pipeline: Pipeline) -> None:
    table = pipeline.lakehouse.get_table()
    latest = table.latest_snapshot()
    assert latest is not None and len(table.snapshots()) > 2
    orphan = Path(table.path) / f"dt={DAYS[0]}" / "bucket-0" / "data-orphan-0.parquet"
    orphan.write_bytes(b"left by a failed writer")
    os.utime(orphan, (time.time() - 3 * 86_400,) * 2)

    # daily_revenue's consumer holds the snapshots it has not read: expiry keeps those too.
    consumer = table.consumer_manager().consumer(CONSUMER_ID)
    assert consumer is not None
    kept = max(2, latest.id - consumer.next_snapshot + 1)
    config = dg.RunConfig(ops={"snapshot_expiry": ExpiryConfig(retain_max=2, retain_min=1)})
    result = pipeline.materialize(dg.AssetSelection.assets(snapshot_expiry), run_config=config)
    assert result.success
    meta = metadata_of(result, "snapshot_expiry")
    assert meta["snapshots_retained"] == kept and meta["latest_snapshot"] == latest.id
    assert meta["snapshots_expired"] == meta["snapshots_before"] - kept
    assert kept > 2  # the compactions after the last daily_revenue run are not read yet
    # Once daily_revenue has read them (and published: the consumer moves then), expiry keeps
    # only the retained two.
    assert pipeline.materialize(dg.AssetSelection.assets(daily_revenue, daily_revenue_publish)).success
    again = pipeline.materialize(dg.AssetSelection.assets(snapshot_expiry), run_config=config)
    assert metadata_of(again, "snapshot_expiry")["snapshots_retained"] == 2
    assert meta["orphan_files_removed"] == 1 and not orphan.exists()
    assert pipeline.table_equals_model()
