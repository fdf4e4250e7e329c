"""`make run` (`pipelines.scripts.run_main.run`) twice on one warehouse: nothing is dropped. The
second run continues the table from the ingestion ledger; a tag made between the runs survives.
The sample covers a fixed window of days ending today, each day a function of itself and the seed."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import dagster as dg
import pytest

from lakehouse_engine import Catalog
from pipelines.lib.partitions import WINDOW_DAYS
from pipelines.lib.resources import LakehouseSparkResource
from pipelines.scripts.run_main import (
    COUPONS_FROM_DAY,
    SAMPLE_FILE,
    run,
    sample_days,
    sample_events,
    sample_settings,
)
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
    today = datetime.datetime.now(datetime.timezone.utc).date()
    assert partitions == {f"dt={today - datetime.timedelta(days=1)}", f"dt={today}"}

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


def test_the_sample_is_the_same_size_any_day_and_each_day_is_regenerated_exactly(tmp_path: Path) -> None:
    for today in (datetime.date(2026, 11, 27), datetime.date(2027, 6, 30)):
        days = sample_days(WINDOW_DAYS, today)
        assert len(days) == WINDOW_DAYS and days[-1] == today
    first = datetime.date(2026, 11, 20)
    settings = sample_settings(tmp_path, first, 100, 7)
    assert settings["coupons_from"] == (first + datetime.timedelta(days=COUPONS_FROM_DAY)).isoformat()
    # A day's events do not depend on which window it is generated in.
    day = datetime.date(2026, 11, 23)
    alone = sample_events(settings, [day])
    in_window = [b for b in sample_events(settings, sample_days(WINDOW_DAYS, day + datetime.timedelta(days=3)))
                 if b.num_rows and b.column("dt")[0].as_py() == day.isoformat()]
    assert [b.num_rows for b in alone] == [b.num_rows for b in in_window] and all(
        a.equals(b) for a, b in zip(alone, in_window, strict=True))
    assert "coupon_code" in alone[0].column_names  # on or after coupons_from
    assert "coupon_code" not in sample_events(settings, [first])[0].column_names


def test_the_stored_sample_settings_are_kept_and_other_settings_refused(tmp_path: Path) -> None:
    first = datetime.date(2026, 11, 20)
    fresh = sample_settings(tmp_path, first, 100, 7)
    (tmp_path / SAMPLE_FILE).write_text(json.dumps(fresh))
    later = first + datetime.timedelta(days=5)  # a later window: coupons still start where they did
    assert sample_settings(tmp_path, later, 100, 7) == fresh
    with pytest.raises(SystemExit, match="another table"):
        sample_settings(tmp_path, first, 100, 8)
    # A landing folder of the earlier sample, whose days depended on its first day: refused.
    (tmp_path / SAMPLE_FILE).write_text(json.dumps({"start": "2026-11-01", "rows_per_day": 100, "seed": 7}))
    with pytest.raises(SystemExit, match="another table"):
        sample_settings(tmp_path, first, 100, 7)
