"""The code location loads: `dagster definitions validate`, and what the definitions contain."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

from pipelines.definitions import defs

REPO = Path(__file__).resolve().parents[2]
ASSETS = {"ingested_events", "bucket_assignment", "lsm_write", "sorted_run_compaction",
          "postpone_compaction", "rescale", "snapshot_expiry"}
CHECKS = {"lsm_write:bucket_row_counts_match_snapshot", "lsm_write:dynamic_buckets_within_target",
          "lsm_write:no_duplicate_primary_key", "lsm_write:bucket_skew",
          "postpone_compaction:postpone_bucket_empty", "rescale:bucket_row_counts_match_snapshot",
          "sorted_run_compaction:bucket_row_counts_match_snapshot"}


def test_dagster_definitions_validate_passes(tmp_path: Path) -> None:
    dagster = Path(sys.executable).with_name("dagster")
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "LAKEHOUSE_WAREHOUSE": str(tmp_path / "warehouse")}
    done = subprocess.run([str(dagster), "definitions", "validate", "-w", "workspace.yaml"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Validation successful" in done.stdout + done.stderr
    assert not (tmp_path / "warehouse").exists()  # loading definitions touches no data


def test_the_definitions_hold_the_graph_checks_jobs_and_automation() -> None:
    graph = defs.resolve_asset_graph()
    assert {k.to_user_string() for k in graph.get_all_asset_keys()} == ASSETS
    assert {f"{k.asset_key.to_user_string()}:{k.name}" for k in graph.asset_check_keys} == CHECKS
    upstream = {k.to_user_string(): {p.to_user_string() for p in graph.get(k).parent_keys}
                for k in graph.get_all_asset_keys()}
    assert upstream == {
        "ingested_events": set(), "bucket_assignment": {"ingested_events"}, "lsm_write": {"bucket_assignment"},
        "postpone_compaction": {"lsm_write"}, "sorted_run_compaction": {"lsm_write"},
        "rescale": {"postpone_compaction"}, "snapshot_expiry": {"rescale", "sorted_run_compaction"}}
    assert {j.name for j in defs.resolve_all_job_defs()} >= {
        "main_job", "ingest_job", "compaction_job", "maintenance_job", "snapshot_expiry_job"}
    assert {s.name for s in defs.sensors or []} == {"sorted_runs_sensor"}
    assert {s.name for s in defs.schedules or []} == {
        "hourly_ingestion", "daily_snapshot_expiry", "nightly_full_compaction"}


def test_runs_use_the_in_process_executor() -> None:
    assert defs.resolve_job_def("main_job").executor_def.name == dg.in_process_executor.name


def test_blocking_checks_are_the_error_checks() -> None:
    blocking = {f"{spec.asset_key.to_user_string()}:{spec.name}"
                for check in defs.asset_checks or [] for spec in check.check_specs if spec.blocking}
    assert blocking == CHECKS - {"lsm_write:bucket_skew"}
