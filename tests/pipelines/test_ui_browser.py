"""The Dagster UI after write-audit-publish runs, in a real browser: Playwright drives Debian's
Chromium against `dagster dev` on loopback. The pages show the published run (lsm_publish moved
main), a failed audit (the run failed naming its blocking check, main's snapshot unmoved, the branch
kept) and daily_revenue's consumed snapshots and changes per row kind. The runs and the screenshots
come from the same code as the docs' (`stage_runs`, `ui_pages`, `capture_ui`).

Skips, saying why, when Playwright or Chromium is missing (`make test` installs Chromium as root).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.lib import wap
from pipelines.lib.resources import LakehouseResource, LakehouseSparkResource
from pipelines.scripts.screenshot import DagsterDev, capture_ui, chromium, stage_runs, ui_pages
from tests.pipelines.conftest import SPARK_MASTER

pytestmark = [pytest.mark.spark, pytest.mark.browser]

PAGES = ["ui_asset_graph", "ui_daily_revenue", "ui_failed_audit_run", "ui_lsm_publish", "ui_lsm_write_checks",
         "ui_lsm_write_rows_per_bucket"]


def test_the_ui_shows_the_published_run_the_failed_audit_and_the_downstream_metadata(
        tmp_path: Path, spark_resource: LakehouseSparkResource) -> None:
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (.venv/bin/pip install playwright)")
    if chromium() is None:
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium; make test does it as root)")
    home, warehouse = tmp_path / "dagster_home", tmp_path / "warehouse"
    staged = stage_runs(home, warehouse, rows_per_day=400, spark_master=SPARK_MASTER, keep_spark=True)
    # What the pages must show holds in the table too: main published once, the failed audit kept.
    table = LakehouseResource(warehouse=str(warehouse), bucket=2).get_table()
    assert table.latest_snapshot().id == staged.main_snapshot_id > 0
    assert wap.audit_branches(table) == [staged.failed_branch] == [f"audit-{staged.failed_run_id}"]
    assert table.branch_table(staged.failed_branch).latest_snapshot().id > staged.main_snapshot_id

    with DagsterDev(env={"DAGSTER_HOME": str(home), "LAKEHOUSE_WAREHOUSE": str(warehouse)},
                    log=tmp_path / "dagster-dev.log") as server:
        server.wait_ready()
        pages = ui_pages(staged.day, staged)
        try:
            shots = capture_ui(server.url, pages, tmp_path / "screens")
        except RuntimeError as e:
            pytest.fail(f"{e}{server.log_tail()}")
    assert sorted(shots) == PAGES
    expected = {p.name: p.expect for p in pages}
    # The pages were waited on for these texts (capture_ui fails on a missing one); they name the runs.
    assert f"audit-{staged.published_run_id}" in expected["ui_lsm_publish"]
    assert {"Failure", "lsm_write: contract_keys_on_branch", "lsm_publish",
            staged.failed_branch} <= set(expected["ui_failed_audit_run"])
    assert {"snapshot_range", "changes_per_row_kind"} <= set(expected["ui_daily_revenue"])
    for path in shots.values():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
