"""`dagster dev` serves the code location: its GraphQL API lists the assets, checks, sensor and
schedules, and a launched ingestion run succeeds. The server is stopped by its process group id.

The run targets a day without landing files, so it exercises the whole ingestion job (ledger,
table creation, checks) without starting a second Spark JVM on this machine.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from pipelines.screenshot import DagsterDev, quiet_instance
from tests.pipelines.test_definitions import ASSETS, CHECKS

DAY = "2026-11-05"

DEFINITIONS = """
{
  assetNodes { assetKey { path } assetChecksOrError { ... on AssetChecks { checks { name } } } }
  repositoriesOrError {
    ... on RepositoryConnection {
      nodes { name location { name } sensors { name } schedules { name cronSchedule } jobs { name } }
    }
  }
}
"""

LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""

STATUS = "query Status($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"

MATERIALIZATIONS = """
query Materializations($id: ID!) {
  runOrError(runId: $id) { ... on Run { assetMaterializations { assetKey { path } partition } } }
}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    home = tmp_path_factory.mktemp("dagster_home")
    quiet_instance(home)
    dev = DagsterDev(env={"DAGSTER_HOME": str(home), "LAKEHOUSE_WAREHOUSE": str(home / "warehouse")},
                     log=home / "dagster-dev.log")
    with dev:
        dev.wait_ready()
        yield dev
    assert dev.process is None


def test_graphql_lists_assets_checks_sensor_and_schedules(server: DagsterDev) -> None:
    data = server.graphql(DEFINITIONS)
    nodes = data["assetNodes"]
    assert {"/".join(n["assetKey"]["path"]) for n in nodes} == ASSETS
    checks = {f"{'/'.join(n['assetKey']['path'])}:{c['name']}"
              for n in nodes for c in n["assetChecksOrError"].get("checks", [])}
    assert checks == CHECKS
    [repository] = data["repositoriesOrError"]["nodes"]
    assert repository["location"]["name"] == "lakehouse"
    assert {s["name"] for s in repository["sensors"]} == {"sorted_runs_sensor"}
    assert {(s["name"], s["cronSchedule"]) for s in repository["schedules"]} == {
        ("hourly_ingestion", "0 * * * *"), ("daily_snapshot_expiry", "30 3 * * *"),
        ("nightly_full_compaction", "0 2 * * *")}
    assert "ingest_job" in {j["name"] for j in repository["jobs"]}


def test_a_launched_ingestion_run_succeeds(server: DagsterDev, tmp_path: Path) -> None:
    [repository] = server.graphql(DEFINITIONS)["repositoriesOrError"]["nodes"]
    params = {"selector": {"repositoryLocationName": "lakehouse", "repositoryName": repository["name"],
                           "jobName": "ingest_job"},
              "runConfigData": {},
              "executionMetadata": {"tags": [{"key": "dagster/partition", "value": DAY}]}}
    launched = server.graphql(LAUNCH, {"params": params})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]

    deadline, status = time.monotonic() + 240, None
    while time.monotonic() < deadline:
        status = server.graphql(STATUS, {"id": run_id})["runOrError"]["status"]
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            break
        time.sleep(2)
    assert status == "SUCCESS", server.log_tail()
    materialized = server.graphql(MATERIALIZATIONS, {"id": run_id})["runOrError"]["assetMaterializations"]
    assert sorted(("/".join(m["assetKey"]["path"]), m["partition"]) for m in materialized) == [
        ("bucket_assignment", DAY), ("ingested_events", DAY), ("lsm_write", DAY)]
