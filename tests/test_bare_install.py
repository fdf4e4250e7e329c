"""`pip install lakehouse-engine` without extras: the engine and its CLI work with pyspark,
dagster and pandas absent.

The wheel is built from a copy of the sources and installed with its declared dependencies only
into a fresh venv that does not see this environment's packages. uv (in the `dev` extra) builds
the wheel and the venv in seconds from its cache; pip would take about ten times longer.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ABSENT = ("pyspark", "dagster", "dagster_pyspark", "pandera", "pandas", "obstore")

# Runs inside the bare venv: every step of the engine's life on a small table.
SCRIPT = """
import importlib.util, json, sys
import pyarrow as pa
from lakehouse_engine import Catalog, Schema

absent = json.loads(sys.argv[2])
present = [name for name in absent if importlib.util.find_spec(name) is not None]
assert not present, f"installed without being asked for: {present}"

catalog = Catalog(sys.argv[1])
catalog.create_database("shop", ignore_if_exists=True)
schema = pa.schema([pa.field("order_id", pa.int64(), nullable=False),
                    pa.field("dt", pa.string(), nullable=False), pa.field("amount", pa.int64())])
catalog.create_table("shop.orders", Schema.from_pyarrow_schema(
    schema, primary_keys=["order_id", "dt"], partition_keys=["dt"], options={"bucket": "2"}))
table = catalog.get_table("shop.orders")
for amounts in ([10, 20, 30], [11, 21, 31]):
    wb = table.new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(pa.table({"order_id": [1, 2, 3], "dt": ["d1"] * 3, "amount": amounts},
                               schema=schema))
    commit.commit(write.prepare_commit())
    write.close(); commit.close()
table.compact(full=True)
rb = table.new_read_builder()
rows = rb.new_read().to_arrow(rb.new_scan().plan().splits()).sort_by("order_id")
assert rows.column("amount").to_pylist() == [11, 21, 31], rows
assert [m for m in sys.modules if m.split(".")[0] in absent] == []
print("ok")
"""


def _uv() -> str:
    found = Path(sys.executable).with_name("uv")
    if found.exists():
        return str(found)
    on_path = shutil.which("uv")
    if on_path is None:
        pytest.skip("uv is not installed (it is in the dev extra: pip install -e '.[dev]')")
    return on_path


def _run(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)  # type: ignore[call-overload]
    assert proc.returncode == 0, f"{args}: {proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc  # type: ignore[no-any-return]


def test_the_bare_package_runs_the_engine_and_cli_without_spark_or_dagster(tmp_path: Path) -> None:
    uv = _uv()
    source = tmp_path / "src"          # setuptools writes build/ beside the sources: not ours
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for package in ("lakehouse_engine", "pipelines"):
        shutil.copytree(REPO / package, source / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    _run([uv, "build", "--wheel", "--quiet", "-o", str(tmp_path / "dist"), str(source)], env=env)
    [wheel] = (tmp_path / "dist").glob("lakehouse_engine-*.whl")
    venv = tmp_path / "venv"
    _run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], env=env)
    python = venv / "bin" / "python"
    _run([uv, "pip", "install", "--quiet", "--python", str(python), str(wheel)], env=env)

    warehouse = tmp_path / "warehouse"
    script = tmp_path / "bare.py"
    script.write_text(SCRIPT)
    # run outside the repository so its sources cannot shadow the installed package
    proc = _run([str(python), str(script), str(warehouse), json.dumps(ABSENT)],
                cwd=tmp_path, env=env)
    assert proc.stdout.strip() == "ok"

    lakehouse = str(venv / "bin" / "lakehouse")
    tables = _run([lakehouse, "--json", "tables", str(warehouse)], cwd=tmp_path, env=env)
    assert [t["table"] for t in json.loads(tables.stdout)["tables"]] == ["orders"], tables.stdout
    read = _run([lakehouse, "read", str(warehouse), "shop.orders", "--columns", "order_id,amount"],
                cwd=tmp_path, env=env)
    assert "31" in read.stdout and "30" not in read.stdout, read.stdout
    _run([lakehouse, "compact", str(warehouse), "shop.orders", "--full"], cwd=tmp_path, env=env)
    buckets = _run([lakehouse, "--json", "buckets", str(warehouse), "shop.orders"],
                   cwd=tmp_path, env=env)
    assert sum(b["record_count"] for b in json.loads(buckets.stdout)["buckets"]) == 3, buckets.stdout
