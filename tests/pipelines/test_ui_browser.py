"""The Dagster UI after a run, in a real browser: Playwright drives Debian's Chromium against
`dagster dev` on loopback, and the asset graph, a materialization's rows-per-bucket table and the
check results render. The screenshots come from the same code as the docs' (`capture_ui`).

Skips, saying why, when Playwright or Chromium is missing (`make test` installs Chromium as root).
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from pipelines.lib.partitions import DAILY_PARTITIONS
from pipelines.lib.resources import LakehouseSparkResource
from pipelines.scripts.run_main import run
from pipelines.scripts.screenshot import DagsterDev, capture_ui, chromium, quiet_instance, ui_pages
from tests.pipelines.conftest import SPARK_MASTER

pytestmark = [pytest.mark.spark, pytest.mark.browser]

DAY = DAILY_PARTITIONS.get_last_partition_key() or ""  # run(days=1) lands today only


def test_the_ui_shows_the_asset_graph_a_rows_per_bucket_table_and_the_checks(
        tmp_path: Path, spark_resource: LakehouseSparkResource) -> None:
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (.venv/bin/pip install playwright)")
    if chromium() is None:
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium; make test does it as root)")
    home = tmp_path / "dagster_home"
    quiet_instance(home)
    warehouse = tmp_path / "warehouse"
    with _instance(home) as instance:
        assert run(str(warehouse), days=1, rows_per_day=400, buckets=2, spark_master=SPARK_MASTER,
                   keep_spark=True, instance=instance) == 0

    with DagsterDev(env={"DAGSTER_HOME": str(home), "LAKEHOUSE_WAREHOUSE": str(warehouse)},
                    log=tmp_path / "dagster-dev.log") as server:
        server.wait_ready()
        try:
            shots = capture_ui(server.url, ui_pages(DAY), tmp_path / "screens")
        except RuntimeError as e:
            pytest.fail(f"{e}{server.log_tail()}")
    assert sorted(shots) == ["ui_asset_graph", "ui_lsm_write_checks", "ui_lsm_write_rows_per_bucket"]
    for path in shots.values():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


def _instance(home: Path) -> dg.DagsterInstance:
    from dagster._core.instance.ref import InstanceRef

    return dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))
