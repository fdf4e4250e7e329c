"""`make run` (`pipelines.run_main.run`) twice on one warehouse: nothing is dropped. The second
run continues the table from the ingestion ledger; a tag made between the runs survives."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import dagster as dg
import pytest

from lakehouse_engine import Catalog
from pipelines.lib.resources import LakehouseSparkResource
from pipelines.scripts.run_main import COUPONS_FROM_DAY, SAMPLE_FILE, run, sample_settings
from tests.pipelines.conftest import SPARK_MASTER

pytestmark = pytest.mark.spark

TABLE = "shop.orders"


def main_run(warehouse: Path, days: int, instance: dg.DagsterInstance) -> int:
    return run(str(warehouse), TABLE, days=days, rows_per_day=300, buckets=2, spark_master=SPARK_MASTER,
               keep_spark=True, instance=instance)


def test_a_second_run_continues_the_table_and_keeps_its_tags(
        tmp_path: Path, spark_resource: LakehouseSparkResource, capsys: pytest.CaptureFixture[str]) -> None:
    warehouse = tmp_path / "warehouse"
    instance = dg.DagsterInstance.ephemeral()
    assert main_run(warehouse, 1, instance) == 0
    table = Catalog(str(warehouse)).get_table(TABLE)
    first = table.latest_snapshot()
    assert first is not None
    table.create_tag("after-first-run")
    capsys.readouterr()

    assert main_run(warehouse, 2, instance) == 0  # one more day: its files are new, day one's are not
    out = capsys.readouterr().out
    assert "continued: nothing is dropped" in out and "model check: OK" in out
    table = Catalog(str(warehouse)).get_table(TABLE)
    assert table.tags()["after-first-run"].id == first.id
    snapshots = [s.id for s in table.snapshots()]
    assert snapshots[0] <= first.id < snapshots[-1]  # the same table, continued
    partitions = {r["partition"] for r in table.bucket_stats().to_pylist()}
    assert partitions == {"dt=2026-11-01", "dt=2026-11-02"}

    assert main_run(warehouse, 2, instance) == 0  # nothing new: the ledger has every file
    out = capsys.readouterr().out
    assert "no new files" in out
    assert Catalog(str(warehouse)).get_table(TABLE).tags()["after-first-run"].id == first.id


def test_a_sample_with_other_settings_is_refused_before_anything_changes(
        tmp_path: Path, spark_resource: LakehouseSparkResource) -> None:
    warehouse = tmp_path / "warehouse"
    instance = dg.DagsterInstance.ephemeral()
    assert main_run(warehouse, 1, instance) == 0
    before = Catalog(str(warehouse)).get_table(TABLE).latest_snapshot()
    with pytest.raises(SystemExit, match="another table"):
        run(str(warehouse), TABLE, days=1, rows_per_day=301, buckets=2, spark_master=SPARK_MASTER,
            keep_spark=True, instance=instance)
    assert Catalog(str(warehouse)).get_table(TABLE).latest_snapshot() == before


def test_a_sample_landed_before_coupons_continues_without_them(tmp_path: Path) -> None:
    start = datetime.date(2026, 11, 1)
    fresh, coupons_from = sample_settings(tmp_path, start, 100, 7)
    assert coupons_from == start + datetime.timedelta(days=COUPONS_FROM_DAY)
    assert fresh["coupons_from"] == coupons_from.isoformat()
    # A landing folder of the sample before it gained coupon_code: same settings, no coupons_from.
    (tmp_path / SAMPLE_FILE).write_text(json.dumps({"start": start.isoformat(), "rows_per_day": 100, "seed": 7}))
    settings, none = sample_settings(tmp_path, start, 100, 7)
    assert none is None and "coupons_from" not in settings
    (tmp_path / SAMPLE_FILE).write_text(json.dumps(fresh))
    assert sample_settings(tmp_path, start, 100, 7) == (fresh, coupons_from)
