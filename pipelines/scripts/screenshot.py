"""Screenshots of the Dagster UI for the docs, and the browser test's driver: serve the code
location with `dagster dev` on a free loopback port and open its pages in Debian's Chromium with
Playwright (Playwright's own browser download is not used):

    apt-get update && apt-get install -y chromium      # `make test` does this when root
    .venv/bin/python -m pipelines.scripts.screenshot     # writes docs/ui_*.png

It stages what the pages show on a scratch warehouse and Dagster home (`stage_runs`: a published
run, then a failed audit). `DagsterDev` (start, wait for the code location through
`dagster_graphql`, stop by process group), `stage_runs` and `capture_ui` (the pages, what each
must show, the PNGs) are what the browser test uses too.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def quiet_instance(home: Path) -> None:
    """Give a Dagster home without settings the project's: no telemetry, no "join the community" dialog."""
    from pipelines.scripts.instance import prepare_home

    saved = os.environ.get("DAGSTER_HOME")
    prepare_home(home)
    if saved is None:  # prepare_home exports the home; a helper for another process must not
        del os.environ["DAGSTER_HOME"]
    else:
        os.environ["DAGSTER_HOME"] = saved


class DagsterDev:
    """`dagster dev -w <workspace>` on 127.0.0.1, in a process group of its own.

    `dagster dev` starts a webserver, a daemon and a code server and may ignore SIGTERM while it
    starts; `stop` signals the whole group by its id (SIGTERM, then SIGKILL), bounded in time.
    """

    def __init__(self, workspace: Path = REPO / "workspace.yaml", port: int | None = None,
                 env: dict[str, str] | None = None, log: Path | None = None):
        self.workspace = workspace
        self.port = port or free_port()
        self.env = {**os.environ, **(env or {})}
        self.log_path = log
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> DagsterDev:
        executable = Path(sys.executable).with_name("dagster")
        command = [str(executable) if executable.exists() else "dagster", "dev", "-w", str(self.workspace),
                   "-h", "127.0.0.1", "-p", str(self.port)]
        self._log = open(self.log_path, "wb") if self.log_path else None  # noqa: SIM115 (closed by stop)
        self.process = subprocess.Popen(
            command, cwd=self.workspace.parent, env=self.env, start_new_session=True,
            stdout=self._log or subprocess.DEVNULL, stderr=subprocess.STDOUT)
        return self

    def client(self, timeout: int = 60) -> Any:
        """A `dagster_graphql.DagsterGraphQLClient` of this server."""
        from dagster_graphql import DagsterGraphQLClient

        return DagsterGraphQLClient("127.0.0.1", port_number=self.port, timeout=timeout)

    def graphql(self, query: str, variables: dict[str, Any] | None = None, timeout: int = 60) -> dict[str, Any]:
        """The `data` of a query the client has no method for (through its gql transport);
        DagsterGraphQLClientError when the server does not answer or reports errors."""
        with warnings.catch_warnings():  # gql deprecates the call dagster_graphql makes
            warnings.simplefilter("ignore", DeprecationWarning)
            data: dict[str, Any] = self.client(timeout)._execute(query, variables)
        return data

    def wait_ready(self, timeout: float = 240) -> None:
        """Wait until the webserver answers and the code location has loaded."""
        from dagster_graphql import DagsterGraphQLClientError

        deadline = time.monotonic() + timeout
        query = ("{ workspaceOrError { ... on Workspace { locationEntries {"
                 " loadStatus locationOrLoadError { __typename } } } } }")
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"dagster dev exited with {self.process.returncode}{self.log_tail()}")
            try:
                entries = self.graphql(query, timeout=10)["workspaceOrError"]["locationEntries"]
            except (DagsterGraphQLClientError, KeyError):
                entries = []  # not serving yet
            if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                failed = [e for e in entries if e["locationOrLoadError"]["__typename"] != "RepositoryLocation"]
                if failed:
                    raise RuntimeError(f"code location failed to load: {failed}{self.log_tail()}")
                return
            time.sleep(0.25)
        raise TimeoutError(f"dagster dev did not load {self.workspace} in {timeout:.0f} s{self.log_tail()}")

    def log_tail(self) -> str:
        """The end of the server's log (when it has one), to explain a failure."""
        if self.log_path and self.log_path.exists():
            return "\n" + self.log_path.read_text(errors="replace")[-3000:]
        return ""

    def stop(self, timeout: float = 30) -> None:
        """Signal the server's process group: SIGTERM, then SIGKILL after `timeout` seconds."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    process.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if process is not None:
            # The daemon and the code server may outlive the leader: the group goes too.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> DagsterDev:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def chromium() -> str | None:
    """Debian's Chromium (`apt-get install -y chromium`), or None when it is not installed."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass(frozen=True)
class Page:
    """A UI page to capture: its path, the texts that prove it rendered, and its PNG's name."""

    name: str
    path: str
    expect: tuple[str, ...]
    #: A text to click once the page has loaded (a list entry whose details the picture shows).
    click: str | None = None


@dataclass(frozen=True)
class StagedRuns:
    """What `stage_runs` left on the instance: a published run and a failed audit after it."""

    published_run_id: str
    failed_run_id: str
    #: The day the published run wrote (its lsm_write and lsm_publish partition).
    day: str
    #: Main's snapshot after the publish, and still after the failed audit.
    main_snapshot_id: int
    #: The failed audit's branch, kept for inspection.
    failed_branch: str


def stage_runs(home: Path, warehouse: Path, rows_per_day: int = 2_000, buckets: int = 2,
               spark_master: str = "local[2]", keep_spark: bool = False) -> StagedRuns:
    """Two `main_job` runs on a fresh warehouse and instance, for the UI to show: today's sample,
    published (main advances, daily_revenue consumes it), then yesterday's, whose audit fails.

    The failure is simulated: `contract_keys_on_branch` is made to count one more staged key than
    lsm_write wrote, as if the write had lost a key; the run fails naming the check, lsm_publish
    does not run, main keeps its snapshot and the branch stays. RuntimeError when a run does
    otherwise."""
    from unittest import mock

    import dagster as dg

    from pipelines.defs.lsm import checks as lsm_checks
    from pipelines.lib import wap
    from pipelines.lib.resources import LakehouseResource
    from pipelines.scripts.run_main import run

    quiet_instance(home)
    saved = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(home)  # DagsterInstance.get() reads the home from it
    try:
        instance = dg.DagsterInstance.get()
    finally:
        if saved is None:
            del os.environ["DAGSTER_HOME"]
        else:
            os.environ["DAGSTER_HOME"] = saved
    lakehouse = LakehouseResource(warehouse=str(warehouse), bucket=buckets)
    common: dict[str, Any] = {"rows_per_day": rows_per_day, "buckets": buckets,
                              "spark_master": spark_master, "instance": instance}
    if run(str(warehouse), days=1, keep_spark=True, **common) != 0:
        raise RuntimeError("the first main_job run (to publish) failed")
    published = instance.get_runs(limit=1)[0]
    latest = lakehouse.get_table().latest_snapshot()
    main_after_publish = latest.id if latest is not None else 0
    real = lsm_checks.keys_staged_in_run
    with mock.patch.object(lsm_checks, "keys_staged_in_run", lambda context: (real(context) or 0) + 1):
        if run(str(warehouse), days=2, keep_spark=keep_spark, **common) == 0:
            raise RuntimeError("the second main_job run passed its audit; it was meant to fail")
    failed = instance.get_runs(limit=1)[0]
    table = lakehouse.get_table()
    latest = table.latest_snapshot()
    branch = wap.audit_branch_name(failed.run_id)
    if (latest.id if latest else 0) != main_after_publish or wap.audit_branches(table) != [branch]:
        raise RuntimeError(f"after the failed audit main is at {latest} (was {main_after_publish}) and "
                           f"the audit branches are {wap.audit_branches(table)} (expected [{branch}])")
    day = published.tags.get("dagster/asset_partition_range_end", "")
    return StagedRuns(published.run_id, failed.run_id, day, main_after_publish, branch)


def ui_pages(day: str, staged: StagedRuns | None = None) -> list[Page]:
    """The pages the docs show: the asset graph, a day's lsm_write materialization (its
    rows-per-bucket table), lsm_publish's publish, and daily_revenue's consumed snapshots and
    changes; given the runs `stage_runs` made, also the failed audit: lsm_write's failed check and
    the failed run. With `staged`, each page must also show the runs' own audit branches."""
    published = (f"audit-{staged.published_run_id}",) if staged else ()
    pages = [
        # The lineage of the LSM write, deep enough to reach both ends: every asset, in its group.
        Page("ui_asset_graph", "/assets/lsm_write?view=lineage&lineageScope=neighbors&lineageDepth=4",
             ("ingested_events", "bucket_assignment", "lsm_publish", "daily_revenue", "snapshot_expiry")),
        Page("ui_lsm_write_rows_per_bucket", f"/assets/lsm_write?view=events&partition={day}",
             ("rows_per_bucket", "sorted_runs", f"dt={day}", "audit_branch")),
        # The published run: main went from main_snapshot_before to main_snapshot_id.
        Page("ui_lsm_publish", f"/assets/lsm_publish?view=events&partition={day}",
             ("published", "main_snapshot_before", "main_snapshot_id", "snapshots_published", *published)),
        # What daily_revenue consumed from the orders' changelog.
        Page("ui_daily_revenue", "/assets/daily_revenue?view=events",
             ("snapshot_range", "first_snapshot", "last_snapshot", "consumer_next_snapshot", "changes_insert",
              "changes_update_before", "changes_update_after", "changes_delete", "changes_per_row_kind")),
    ]
    if staged is not None:
        failed = f"audit-{staged.failed_run_id}"
        pages += [
            # The failed audit: the check, its figures, the branch kept and main's snapshot unmoved.
            Page("ui_lsm_write_checks", "/assets/lsm_write?view=checks",
                 ("Failed", "primary keys were staged but", "keys_staged", "keys_on_branch",
                  "main_snapshot_id", failed),
                 click="contract_keys_on_branch"),
            # Its run: failed naming the check; lsm_publish never ran.
            Page("ui_failed_audit_run", f"/runs/{staged.failed_run_id}?logs=step%3Alsm_write_contract_keys_on_branch",
                 ("Failure", "1 blocking asset check failed", "lsm_write: contract_keys_on_branch",
                  "lsm_publish", "main_snapshot_id", failed)),
        ]
    return pages


def capture_ui(url: str, pages: list[Page], out_dir: Path, width: int = 1600, height: int = 1000,
               timeout_ms: int = 60_000) -> dict[str, Path]:
    """Open each page in headless Chromium, wait until every expected text shows, save a PNG.

    RuntimeError naming the page and the missing text when one does not render in time.
    """
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    browser_path = chromium()
    if browser_path is None:
        raise RuntimeError("Chromium is not installed: apt-get update && apt-get install -y chromium")
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            for target in pages:
                page.goto(url + target.path, wait_until="domcontentloaded", timeout=timeout_ms)
                if target.click is not None:
                    try:
                        page.get_by_text(target.click, exact=True).filter(visible=True).first.click(timeout=timeout_ms)
                    except PlaywrightError as e:
                        raise RuntimeError(f"{target.path}: {target.click!r} to click did not render ({e})") from None
                for text in target.expect:
                    try:
                        page.get_by_text(text, exact=False).filter(visible=True).first.wait_for(timeout=timeout_ms)
                    except PlaywrightError as e:
                        raise RuntimeError(f"{target.path}: {text!r} did not render ({e})") from None
                page.wait_for_timeout(500)  # let late layout (graph edges, fonts) settle for the picture
                written[target.name] = out_dir / f"{target.name}.png"
                page.screenshot(path=str(written[target.name]))
        finally:
            browser.close()
    return written


def main(argv: list[str] | None = None) -> int:
    """Stage a published run and a failed audit on a scratch warehouse and instance, serve the code
    location on them and write the UI screenshots."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs")
    parser.add_argument("--rows-per-day", type=int, default=2_000, help="sample events per day of the two runs")
    parser.add_argument("--spark-master", default="local[2]")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lakehouse-screenshots-") as scratch:
        root = Path(scratch)
        staged = stage_runs(root / "dagster_home", root / "warehouse", rows_per_day=args.rows_per_day,
                            spark_master=args.spark_master)
        env = {"DAGSTER_HOME": str(root / "dagster_home"), "LAKEHOUSE_WAREHOUSE": str(root / "warehouse")}
        with DagsterDev(env=env, log=root / "dagster-dev.log") as server:
            server.wait_ready()
            for path in capture_ui(server.url, ui_pages(staged.day, staged), args.out).values():
                print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
