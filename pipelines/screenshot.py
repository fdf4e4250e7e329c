"""Screenshot of the asset graph for the docs: serve the code location with `dagster dev` on a free
loopback port and capture its lineage page with headless Chromium. Run by hand, not in CI:

    apt-get update && apt-get install -y chromium
    .venv/bin/python -m pipelines.screenshot            # writes docs/asset_graph.png

`DagsterDev` (start, wait for GraphQL, query, stop by process group) is what the tests use too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import IO, Any

REPO = Path(__file__).resolve().parent.parent
# The lineage of the LSM write, deep enough to reach both ends of the graph: every asset, in its group.
GRAPH_PATH = "/assets/lsm_write?view=lineage&lineageScope=neighbors&lineageDepth=4"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def quiet_instance(home: Path) -> None:
    """Give a Dagster home without settings some: no telemetry, no "join the community" dialog."""
    settings = home / "dagster.yaml"
    if not settings.exists():
        home.mkdir(parents=True, exist_ok=True)
        settings.write_text("telemetry:\n  enabled: false\nnux:\n  enabled: false\n")


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

    def graphql(self, query: str, variables: dict[str, Any] | None = None, timeout: float = 60) -> dict[str, Any]:
        """The `data` of a GraphQL query; RuntimeError on GraphQL errors."""
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(f"{self.url}/graphql", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = json.loads(response.read())
        if payload.get("errors"):
            raise RuntimeError(f"GraphQL errors: {payload['errors']}")
        data: dict[str, Any] = payload["data"]
        return data

    def wait_ready(self, timeout: float = 240) -> None:
        """Wait until the webserver answers and the code location has loaded."""
        deadline = time.monotonic() + timeout
        query = ("{ workspaceOrError { ... on Workspace { locationEntries {"
                 " loadStatus locationOrLoadError { __typename } } } } }")
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"dagster dev exited with {self.process.returncode}{self.log_tail()}")
            try:
                entries = self.graphql(query, timeout=10)["workspaceOrError"]["locationEntries"]
            except (urllib.error.URLError, ConnectionError, TimeoutError, RuntimeError, KeyError):
                entries = []  # not serving yet
            if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                failed = [e for e in entries if e["locationOrLoadError"]["__typename"] != "RepositoryLocation"]
                if failed:
                    raise RuntimeError(f"code location failed to load: {failed}{self.log_tail()}")
                return
            time.sleep(1)
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


def chromium() -> str:
    """The Chromium executable (`apt-get install -y chromium`)."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    raise SystemExit("Chromium is not installed: apt-get update && apt-get install -y chromium")


def screenshot(url: str, out: Path, width: int = 2200, height: int = 1100, wait_ms: int = 20_000) -> None:
    """Render `url` headless and save a PNG of the window."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--user-data-dir={profile}", f"--window-size={width},{height}",
                        f"--virtual-time-budget={wait_ms}", f"--screenshot={out}", url],
                       check=True, timeout=180, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "asset_graph.png")
    parser.add_argument("--path", default=GRAPH_PATH, help="UI page to capture")
    parser.add_argument("--dagster-home", type=Path, default=None,
                        help="an instance with runs (e.g. DAGSTER_HOME of a `make run`) to show their "
                             "materializations; a fresh temporary one by default")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        home = args.dagster_home or Path(scratch)
        quiet_instance(home)
        env = {"DAGSTER_HOME": str(home),
               "LAKEHOUSE_WAREHOUSE": os.environ.get("LAKEHOUSE_WAREHOUSE", str(REPO / "warehouse"))}
        with DagsterDev(env=env, log=Path(scratch) / "dagster-dev.log") as server:
            server.wait_ready()
            screenshot(server.url + args.path, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
