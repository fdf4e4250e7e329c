"""Fixtures for the pipeline tests: one Spark session for the whole pytest session (started by
the first test that asks for it), fresh warehouses, and tables written with the engine alone."""

from __future__ import annotations

import datetime
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from pipelines.defs.downstream.assets import daily_revenue
from pipelines.defs.downstream.checks import revenue_equals_full_recompute
from pipelines.defs.downstream.publish import daily_revenue_publish
from pipelines.lib.events import EVENT_SCHEMA
from pipelines.lib.partitions import DAILY_PARTITIONS
from pipelines.lib.resources import LakehouseResource, LakehouseSparkResource
from pipelines.lib.sample_data import generate_order_events
from tests.lakehouse_engine.conftest import write

with warnings.catch_warnings():
    # The daily assets' single-run backfill policy is a beta API: say so once, not per module.
    warnings.simplefilter("ignore", dg.BetaWarning)
    from pipelines.definitions import defs as DEFS

#: Every asset and every check of the code location (materialize needs the checks' assets).
ASSETS = list(DEFS.assets or [])
ASSET_CHECKS = list(DEFS.asset_checks or [])
#: The first two days of the daily partitions' window (it ends today).
DAY = DAILY_PARTITIONS.get_first_partition_key() or ""
DAYS = (DAY, (datetime.date.fromisoformat(DAY) + datetime.timedelta(days=1)).isoformat())

# The same master as tests/lakehouse_engine/spark: whichever suite starts the shared session first,
# tasks get two threads and one retry.
SPARK_MASTER = "local[2,2]"


@pytest.fixture(scope="session")
def spark_resource() -> Iterator[LakehouseSparkResource]:
    """The Spark resource every test run shares: it joins the session started here and leaves it
    running between runs; the session stops when the pytest session ends."""
    from lakehouse_engine.spark.session import create_session

    session = create_session(SPARK_MASTER, app_name="pipelines-tests", shuffle_partitions=2)
    yield LakehouseSparkResource(master=SPARK_MASTER, shuffle_partitions=2, stop_on_teardown=False)
    session.stop()


@pytest.fixture
def lakehouse(tmp_path: Path) -> LakehouseResource:
    """A fresh warehouse with a fixed two-bucket table (created on first use)."""
    return LakehouseResource(warehouse=str(tmp_path / "warehouse"), bucket=2)


def events(rows_per_day: int = 200, days: int = 1, seed: int = 5) -> pa.Table:
    """Sample order events as one table, from the window's first day."""
    return pa.concat_tables(generate_order_events(days=days, rows_per_day=rows_per_day, seed=seed,
                                                  start=datetime.date.fromisoformat(DAY)))


def engine_write(lakehouse: LakehouseResource, rows: pa.Table) -> int:
    """One commit of `rows` through the engine (no Spark), then, as `lsm_write` does, its level 0
    taken up (`take_level0_up`: one new sorted run per bucket, with the lookup changelog); returns
    the last snapshot id."""
    from pipelines.defs.lsm.assets import take_level0_up

    table = lakehouse.get_or_create_table()
    ids = write(table, rows.select(EVENT_SCHEMA.names))
    ids += take_level0_up(table, sorted(set(rows.column("dt").to_pylist())))
    return ids[-1]


def only_keys(rows: pa.Table, order_ids: Sequence[int]) -> pa.Table:
    """The rows of these order ids."""
    import pyarrow.compute as pc

    return rows.filter(pc.is_in(rows.column("order_id"), pa.array(list(order_ids), pa.int64())))


def metadata_of(result: Any, asset: str) -> dict[str, Any]:
    """The metadata values of the asset's (first) materialization in a run."""
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        if mat.asset_key.to_user_string() == asset:
            return {k: getattr(v, "value", v) for k, v in mat.metadata.items()}
    raise AssertionError(f"{asset} was not materialized")


def metadata_by_partition(result: Any, asset: str) -> dict[str | None, dict[str, Any]]:
    """The metadata values of each of the asset's materializations in a run, by partition."""
    found = {}
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        if mat.asset_key.to_user_string() == asset:
            found[mat.partition] = {k: getattr(v, "value", v) for k, v in mat.metadata.items()}
    assert found, f"{asset} was not materialized"
    return found


def check_results(result: Any) -> dict[str, Any]:
    """`asset:check` -> its evaluation, for every check evaluated in a run."""
    return {f"{e.asset_check_key.asset_key.to_user_string()}:{e.asset_check_key.name}": e
            for e in result.get_asset_check_evaluations()}


#: What the project's `.env` gives the code location's dg.EnvVar settings.
LAKEHOUSE_ENV = {"LAKEHOUSE_WAREHOUSE": "./warehouse", "LAKEHOUSE_TABLE": "shop.orders", "LAKEHOUSE_BUCKET": "4",
                 "LAKEHOUSE_CATALOG_OPTIONS": "", "LAKEHOUSE_PIPELINE_DIR": "", "LAKEHOUSE_SPARK_MASTER": "local[*]"}


@pytest.fixture
def lakehouse_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The code location's environment variables set as `.env` sets them (for validating run config)."""
    for name, value in LAKEHOUSE_ENV.items():
        monkeypatch.setenv(name, value)
    return dict(LAKEHOUSE_ENV)


def run_daily_revenue(lakehouse: LakehouseResource) -> Any:
    """Materialize daily_revenue with its recompute check and its publish; assert they passed."""
    result = dg.materialize([daily_revenue, revenue_equals_full_recompute, daily_revenue_publish],
                            resources={"lakehouse": lakehouse}, raise_on_error=False)
    checks = [e.event_specific_data for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
    assert result.success and checks and all(c.passed for c in checks), [c.description for c in checks]
    return result


def three_batches() -> list[pa.Table]:
    """One day's 120 events in three batches of 40, for runs between writes."""
    rows = events(rows_per_day=120, seed=3)
    return [rows.slice(0, 40), rows.slice(40, 40), rows.slice(80, 40)]
