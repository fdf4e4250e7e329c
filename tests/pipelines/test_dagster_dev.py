"""`dagster dev` serves the code location: its GraphQL API lists the assets, checks, sensor and
schedules, and a launched ingestion run succeeds. The server is stopped by its process group id.

The run targets a day without landing files, so it exercises the whole ingestion job (ledger,
table creation, checks) without starting a second Spark JVM on this machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterRunStatus

from pipelines.scripts.screenshot import DagsterDev, quiet_instance
from tests.pipelines.conftest import DAYS
from tests.pipelines.test_definitions import ASSETS, CHECKS

DAY = DAYS[1]

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

MATERIALIZATIONS = """
query Materializations($id: ID!) {
  runOrError(runId: $id) { ... on Run { assetMaterializations { assetKey { path } partition } } }
}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One `dagster dev` for the module. When the module's tests are done, it must end promptly on
    a SIGTERM to its leader alone (`make dev` runs it in the foreground: a shell or make delivers
    the SIGTERM, or Ctrl-C, so): checked here, on this server, rather than by starting a second
    one (~15 s)."""
    home = tmp_path_factory.mktemp("dagster_home")
    quiet_instance(home)
    dev = DagsterDev(env={"DAGSTER_HOME": str(home), "LAKEHOUSE_WAREHOUSE": str(home / "warehouse")},
                     log=home / "dagster-dev.log")
    with dev:
        dev.wait_ready()
        yield dev
        assert dev.process is not None and dev.process.poll() is None, f"dagster dev died{dev.log_tail()}"
        process = dev.process
        os.kill(process.pid, signal.SIGTERM)  # the leader only, as a shell or make would deliver it
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail(f"dagster dev ignored SIGTERM for 20 s{dev.log_tail()}")
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
    assert {s["name"] for s in repository["sensors"]} == {"sorted_runs_sensor", "lakehouse_automation"}
    assert {(s["name"], s["cronSchedule"]) for s in repository["schedules"]} == {("hourly_ingestion", "0 * * * *")}
    assert "ingest_job" in {j["name"] for j in repository["jobs"]}


def test_the_home_has_the_projects_quiet_settings(server: DagsterDev) -> None:
    settings = (Path(server.env["DAGSTER_HOME"]) / "dagster.yaml").read_text()
    assert "telemetry:\n  enabled: false" in settings and "nux:\n  enabled: false" in settings


def test_a_launched_ingestion_run_succeeds(server: DagsterDev, tmp_path: Path) -> None:
    client = server.client()
    run_id = client.submit_job_execution("ingest_job", repository_location_name="lakehouse",
                                         tags={"dagster/partition": DAY})
    deadline, status = time.monotonic() + 240, None
    while time.monotonic() < deadline:
        status = client.get_run_status(run_id)
        if status in (DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED):
            break
        time.sleep(0.5)
    assert status == DagsterRunStatus.SUCCESS, server.log_tail()
    materialized = server.graphql(MATERIALIZATIONS, {"id": run_id})["runOrError"]["assetMaterializations"]
    assert sorted(("/".join(m["assetKey"]["path"]), m["partition"]) for m in materialized) == [
        ("bucket_assignment", DAY), ("ingested_events", DAY), ("lsm_publish", DAY), ("lsm_write", DAY)]
