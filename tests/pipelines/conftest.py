"""Fixtures for the pipeline tests: one Spark session for the whole pytest session (started by
the first test that asks for it), fresh warehouses, and tables written with the engine alone."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from pipelines.resources import LakehouseResource, SparkResource
from pipelines.sample_data import EVENT_SCHEMA, generate_order_events
from tests.lakehouse_engine.conftest import write

with warnings.catch_warnings():
    # The daily assets' single-run backfill policy is a beta API: say so once, not per module.
    warnings.simplefilter("ignore", dg.BetaWarning)
    import pipelines.definitions  # noqa: F401

# The same master as tests/lakehouse_engine/spark: whichever suite starts the shared session first,
# tasks get two threads and one retry.
SPARK_MASTER = "local[2,2]"


@pytest.fixture(scope="session")
def spark_resource() -> Iterator[SparkResource]:
    """The Spark resource every test run shares: it joins the session started here and leaves it
    running between runs; the session stops when the pytest session ends."""
    from lakehouse_engine.spark.session import create_session

    session = create_session(SPARK_MASTER, app_name="pipelines-tests", shuffle_partitions=2)
    yield SparkResource(master=SPARK_MASTER, shuffle_partitions=2, stop_on_teardown=False)
    session.stop()


@pytest.fixture
def lakehouse(tmp_path: Path) -> LakehouseResource:
    """A fresh warehouse with a fixed two-bucket table (created on first use)."""
    return LakehouseResource(warehouse=str(tmp_path / "warehouse"), bucket=2)


def events(rows_per_day: int = 200, days: int = 1, seed: int = 5) -> pa.Table:
    """Sample order events as one table."""
    return pa.concat_tables(generate_order_events(days=days, rows_per_day=rows_per_day, seed=seed))


def engine_write(lakehouse: LakehouseResource, rows: pa.Table) -> int:
    """One commit of `rows` through the engine (no Spark); returns the (last) snapshot id."""
    return write(lakehouse.get_or_create_table(), rows.select(EVENT_SCHEMA.names))[-1]


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
