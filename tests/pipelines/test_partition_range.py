"""The documented command that materializes a range of days in one run works: every asset has a
single-run backfill policy, which `dagster asset materialize --partition-range` requires."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
from dagster._core.instance.ref import InstanceRef

from pipelines.scripts.instance import prepare_home
from tests.pipelines.conftest import DAYS

REPO = Path(__file__).resolve().parents[2]
THIRD = (datetime.date.fromisoformat(DAYS[1]) + datetime.timedelta(days=1)).isoformat()


def test_dagster_asset_materialize_partition_range_runs_every_asset_once(tmp_path: Path) -> None:
    home = tmp_path / "dagster_home"
    env = {**os.environ, "DAGSTER_HOME": str(home), "LAKEHOUSE_WAREHOUSE": str(tmp_path / "warehouse"),
           "PYTHONPATH": str(REPO)}
    prepare_home(home)
    dagster = Path(sys.executable).with_name("dagster")
    # No landing files: every asset runs (and the checks), none has rows, so Spark never starts.
    proc = subprocess.run([str(dagster), "asset", "materialize", "-m", "pipelines.definitions", "--select", "*",
                           "--partition-range", f"{DAYS[0]}...{THIRD}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        [run] = instance.get_runs()
        assert run.tags["dagster/asset_partition_range_start"] == DAYS[0]
        records = instance.fetch_materializations(dg.AssetKey("lsm_write"), limit=10).records
        assert sorted(r.partition_key for r in records) == [*DAYS, THIRD]
        assert instance.fetch_materializations(dg.AssetKey("snapshot_expiry"), limit=10).records
