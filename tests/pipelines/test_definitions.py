"""The code location loads: `dagster definitions validate`, and what the definitions contain."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

from pipelines.definitions import defs

REPO = Path(__file__).resolve().parents[2]
ASSETS = {"ingested_events", "bucket_assignment", "lsm_write", "lsm_publish", "sorted_run_compaction",
          "full_compaction", "postpone_compaction", "rescale", "snapshot_expiry", "daily_revenue",
          "daily_revenue_publish"}
CHECKS = {"lsm_write:bucket_row_counts_match_snapshot", "lsm_write:dynamic_buckets_within_target",
          "lsm_write:no_duplicate_primary_key", "lsm_write:bucket_skew", "lsm_write:contract_keys_on_branch",
          "daily_revenue:revenue_equals_full_recompute",
          "postpone_compaction:postpone_bucket_empty", "rescale:bucket_row_counts_match_snapshot",
          "sorted_run_compaction:bucket_row_counts_match_snapshot",
          "full_compaction:bucket_row_counts_match_snapshot"}
#: The assets that commit to shop.orders: each holds its pool.
COMMITTING = {"lsm_write", "lsm_publish", "sorted_run_compaction", "full_compaction", "postpone_compaction", "rescale",
              "snapshot_expiry"}


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
        "lsm_publish": {"lsm_write"}, "daily_revenue": {"lsm_publish"}, "daily_revenue_publish": {"daily_revenue"},
        "postpone_compaction": {"lsm_publish"}, "sorted_run_compaction": {"lsm_publish"},
        "full_compaction": {"lsm_publish"}, "rescale": {"postpone_compaction"},
        "snapshot_expiry": {"rescale", "sorted_run_compaction", "full_compaction", "daily_revenue_publish"}}
    assert {j.name for j in defs.resolve_all_job_defs()} >= {
        "main_job", "ingest_job", "compaction_job", "maintenance_job", "snapshot_expiry_job"}
    assert {s.name for s in defs.sensors or []} == {"sorted_runs_sensor", "lakehouse_automation"}
    assert {s.name for s in defs.schedules or []} == {"hourly_ingestion"}


def test_runs_use_the_in_process_executor() -> None:
    assert defs.resolve_job_def("main_job").executor_def.name == dg.in_process_executor.name


def test_blocking_checks_are_the_error_checks() -> None:
    blocking = {f"{spec.asset_key.to_user_string()}:{spec.name}"
                for check in defs.asset_checks or [] for spec in check.check_specs if spec.blocking}
    assert blocking == CHECKS - {"lsm_write:bucket_skew"}


def test_every_asset_runs_a_partition_range_in_one_run() -> None:
    # `dagster asset materialize --partition-range` refuses a selection with any asset lacking
    # BackfillPolicy.single_run(), partitioned or not (test_partition_range runs the command).
    graph = defs.resolve_asset_graph()
    policies = {k.to_user_string(): graph.get(k).backfill_policy for k in graph.get_all_asset_keys()}
    assert set(policies) == ASSETS
    assert {name for name, policy in policies.items() if policy != dg.BackfillPolicy.single_run()} == set()


def test_every_asset_that_commits_to_the_table_holds_its_pool_and_the_instance_admits_one() -> None:
    import yaml

    graph = defs.resolve_asset_graph()
    pools = {k.to_user_string(): graph.get(k).pools for k in graph.get_all_asset_keys()}
    assert {name for name, p in pools.items() if p} == COMMITTING | {"daily_revenue", "daily_revenue_publish"}
    assert {frozenset(p) for name, p in pools.items() if p and name in COMMITTING} == {frozenset({"paimon-shop.orders"})}
    assert pools["daily_revenue"] == pools["daily_revenue_publish"] == {"paimon-shop.daily_revenue"}
    settings = yaml.safe_load((REPO / "dagster.yaml").read_text())
    assert settings["concurrency"]["pools"] == {"granularity": "op", "default_limit": 1}


def test_settings_are_env_vars_resolved_at_launch_not_at_import() -> None:
    """The resources hold dg.EnvVar references (the UI shows the variable, a run resolves it); no
    module of the code location reads os.environ."""
    lakehouse, spark = defs.resources["lakehouse"], defs.resources["spark"]
    assert lakehouse.warehouse == dg.EnvVar("LAKEHOUSE_WAREHOUSE")
    assert lakehouse.table == dg.EnvVar("LAKEHOUSE_TABLE")
    assert spark.master == dg.EnvVar("LAKEHOUSE_SPARK_MASTER")
    sources = [p for p in (REPO / "pipelines").rglob("*.py") if "scripts" not in p.parts]
    assert [p.name for p in sources if "os.environ" in p.read_text() or "getenv" in p.read_text()] == []


def test_definitions_py_only_assembles_and_loads_no_script() -> None:
    """pipelines/definitions.py defines no asset, check, sensor or schedule itself, and loading the
    code location imports none of the scripts (run_main, summary, screenshot, instance)."""
    source = (REPO / "pipelines" / "definitions.py").read_text()
    assert "@dg." not in source and "load_from_defs_folder" in source
    code = ("import sys, pipelines.definitions; "
            "print(sorted(m for m in sys.modules if m.startswith('pipelines.scripts')))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_spark_resource_is_dagster_pysparks_lazy_resource() -> None:
    from dagster_pyspark import LazyPySparkResource

    spark = defs.resources["spark"]
    assert isinstance(spark, LazyPySparkResource)
    conf = type(spark)(master="local[1]", spark_config={"spark": {"executor": {"memory": "1g"}}}).session_conf()
    assert conf["spark.executor.memory"] == "1g"  # nested settings flattened as dagster-pyspark does
