"""An Azure warehouse on Azurite (Microsoft's Blob Storage emulator, started on 127.0.0.1 when it is
installed: `make azurite`): write, read, compaction, and the conditional put (`If-None-Match: *`)
refusing a second snapshot of the same id."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.io_object_store import ObjectStoreFileIO
from tests.lakehouse_engine.conftest import create_table, read, write

# Azurite's well-known development account (public, documented by Microsoft).
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
_LOCAL_AZURITE = Path(__file__).resolve().parents[3] / ".cache" / "azurite" / "node_modules" / ".bin" / "azurite-blob"


def _azurite() -> str | None:
    return shutil.which("azurite-blob") or (str(_LOCAL_AZURITE) if _LOCAL_AZURITE.exists() else None)


@pytest.fixture(scope="module")
def azurite_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = _azurite()
    if binary is None:
        pytest.skip("Azurite is not installed (make azurite: npm install into .cache/azurite)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = subprocess.Popen([binary, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--silent",
                             "--skipApiVersionCheck", "--location", str(tmp_path_factory.mktemp("azurite"))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"Azurite did not start on port {port}")
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_table_on_azure_commits_by_conditional_put(azurite_endpoint: str) -> None:
    container = f"lake{uuid.uuid4().hex[:10]}"
    options = {"azure.account-key": ACCOUNT_KEY, "azure.endpoint": azurite_endpoint}
    uri = f"abfs://{container}@{ACCOUNT}.dfs.core.windows.net/warehouse"
    catalog = Catalog(uri, options)
    assert isinstance(catalog.file_io, ObjectStoreFileIO)
    catalog.file_io.fs.create_dir(container)
    catalog.create_database("db")
    table = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "2"})
    write(table, pa.table({"id": list(range(50)), "v": ["a"] * 50}, schema=SCHEMA))
    write(table, pa.table({"id": list(range(25, 75)), "v": ["b"] * 50}, schema=SCHEMA))
    assert table.compact(full=True)

    again = Catalog(uri, options).get_table("db.t")
    got = read(again).sort_by("id")
    assert got.column("v").to_pylist() == ["a"] * 25 + ["b"] * 50
    snapshot_2 = f"{table.path}/snapshot/snapshot-2"
    before = catalog.file_io.read_bytes(snapshot_2)
    assert not catalog.file_io.try_put_if_absent(snapshot_2, b"{}")  # If-None-Match: * refused it
    assert catalog.file_io.read_bytes(snapshot_2) == before


def test_an_input_changelog_sharing_its_runs_files_reads_on_azure(azurite_endpoint: str) -> None:
    # A flush that merged nothing names its run's files again as changelog files: a copy on Azure.
    container = f"lake{uuid.uuid4().hex[:10]}"
    options = {"azure.account-key": ACCOUNT_KEY, "azure.endpoint": azurite_endpoint}
    catalog = Catalog(f"abfs://{container}@{ACCOUNT}.dfs.core.windows.net/warehouse", options)
    catalog.file_io.fs.create_dir(container)
    catalog.create_database("db")
    table = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "2", "changelog-producer": "input"})
    write(table, pa.table({"id": list(range(30)), "v": ["a"] * 30}, schema=SCHEMA))
    changes = table.changes(0)
    assert sorted(changes.column("id").to_pylist()) == list(range(30))
    assert set(changes.column("_row_kind").to_pylist()) == {"+I"}
