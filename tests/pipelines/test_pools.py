"""One pool per table: a step of an asset that commits to `shop.orders` waits while another run
holds the table's pool, on an instance with the project's dagster.yaml (default pool limit 1)."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._core.instance.ref import InstanceRef

from pipelines.lib.resources import LakehouseResource, LakehouseSparkResource, table_pool
from tests.pipelines.conftest import ASSET_CHECKS, ASSETS, engine_write, events

REPO = Path(__file__).resolve().parents[2]
POOL = table_pool("shop.orders")


def test_a_rescale_waits_while_another_run_holds_the_tables_pool(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copyfile(REPO / "dagster.yaml", home / "dagster.yaml")
    lakehouse = LakehouseResource(warehouse=str(tmp_path / "warehouse"), bucket=2)
    engine_write(lakehouse, events(rows_per_day=50))
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        storage = instance.event_log_storage
        assert storage.initialize_concurrency_limit_to_default(POOL)
        assert storage.get_concurrency_info(POOL).slot_count == 1  # dagster.yaml: default_limit 1
        # Another run's step (an LSM write, say) holds the pool.
        assert storage.claim_concurrency_slot(POOL, "another-run", "lsm_write").is_claimed

        finished: dict[str, Any] = {}

        def rescale() -> None:
            result = dg.materialize(
                [*ASSETS, *ASSET_CHECKS], selection=dg.AssetSelection.assets("rescale"), instance=instance,
                resources={"lakehouse": lakehouse, "spark": LakehouseSparkResource(master="spark://unused:1")})
            finished["at"], finished["success"] = time.monotonic(), result.success

        def blocked() -> list[Any]:
            return [e for run in instance.get_runs() for e in instance.all_logs(run.run_id)
                    if e.is_dagster_event and "blocked by limit for pool" in (e.dagster_event.message or "")]

        worker = threading.Thread(target=rescale)
        worker.start()
        # Until the step reports waiting for the pool (it did after ~2 s; a fixed 6 s sleep before).
        deadline = time.monotonic() + 120
        while not blocked() and not finished and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)  # and a little longer: still waiting
        assert finished == {}  # blocked on the pool, not failed
        assert blocked(), "the step did not report waiting for the pool"
        released = time.monotonic()
        storage.free_concurrency_slots_for_run("another-run")
        worker.join(120)
        assert finished["success"] and finished["at"] > released
