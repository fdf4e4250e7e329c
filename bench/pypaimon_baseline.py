"""pypaimon baseline: time write, upsert and merged read of a primary-key table.

Runs in the interop venv (pypaimon 2.1.0 pins pyarrow<20)::

    .venv-interop/bin/python bench/pypaimon_baseline.py --rows 100000 --upsert 10000 \
        --out result.json [--rust]

The data comes from ``bench/bench_data.py``, loaded by file path (this script is not run
as part of the ``bench`` package), so the main venv and this venv benchmark identical rows.

``--rust`` enables pypaimon's optional ``pypaimon-rust`` runtime through the table options
``write.native.enabled``, ``commit.native.enabled`` and ``read.native.enabled`` (pypaimon
silently falls back to Python for unsupported routes; the JSON records which route ran).
If ``pypaimon_rust`` cannot be imported the JSON says ``"rust": "unavailable: <reason>"``
and the timings are those of the pure-Python path.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
NATIVE_OPTIONS = {
    "write.native.enabled": "true",
    "commit.native.enabled": "true",
    "read.native.enabled": "true",
}


def _load_by_path(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


bench_data = _load_by_path("_bench_data", HERE / "bench_data.py")


def _rust_status() -> tuple[bool, str]:
    try:
        import pypaimon_rust  # noqa: F401
        import pypaimon_rust.datafusion  # noqa: F401
    except Exception as exc:  # ImportError, or a broken native extension
        return False, f"unavailable: pypaimon_rust cannot be imported ({type(exc).__name__}: {exc})"
    from importlib.metadata import PackageNotFoundError, version

    try:
        return True, f"pypaimon-rust {version('pypaimon-rust')}"
    except PackageNotFoundError:
        return True, "pypaimon-rust (version unknown)"


class _RouteRecorder:
    """Record which pypaimon routes (Python or native) actually ran.

    Uses private pypaimon 2.1.0 hooks; if they move, recording is skipped, never the run.
    """

    def __init__(self) -> None:
        self.read_fallbacks: list[str] = []
        self.native_commits = 0
        self.python_commits = 0
        self._installed = False

    def install(self) -> None:
        try:
            from pypaimon.read.table_read import TableRead
            from pypaimon.write.table_commit import TableCommit
        except ImportError:
            return
        recorder = self
        orig_fallback = getattr(TableRead, "_native_fallback", None)
        orig_prepare = getattr(TableCommit, "_prepare_native_commit", None)
        if orig_fallback is None or orig_prepare is None:
            return

        def _native_fallback(self: Any, reason: Any, *args: Any, **kwargs: Any) -> Any:
            recorder.read_fallbacks.append(str(reason))
            return orig_fallback(self, reason, *args, **kwargs)

        def _prepare_native_commit(self: Any, messages: Any) -> Any:
            prepared = orig_prepare(self, messages)
            if prepared is None:
                recorder.python_commits += 1
            else:
                recorder.native_commits += 1
            return prepared

        TableRead._native_fallback = _native_fallback
        TableCommit._prepare_native_commit = _prepare_native_commit
        self._installed = True

    def summary(self) -> dict[str, Any]:
        if not self._installed:
            return {"recorded": False}
        return {
            "recorded": True,
            "native_commits": self.native_commits,
            "python_commits": self.python_commits,
            "read_native": not self.read_fallbacks,
            "read_fallback_reasons": sorted(set(self.read_fallbacks)),
        }


def _write_and_commit(table: Any, data: Any) -> str:
    builder = table.new_batch_write_builder()
    writer = builder.new_write()
    commit = builder.new_commit()
    try:
        writer.write_arrow(data)
        commit.commit(writer.prepare_commit())
    finally:
        writer.close()
        commit.close()
    return type(writer).__name__


def _read_all(table: Any) -> Any:
    builder = table.new_read_builder()
    splits = builder.new_scan().plan().splits()
    return builder.new_read().to_arrow(splits)


def run_pypaimon_baseline(
    rows: int, upsert: int, workdir: Path, *, rust: bool = False, seed: int = 1, verify: bool = True
) -> dict[str, Any]:
    import pyarrow as pa
    import pypaimon
    from pypaimon import CatalogFactory, Schema

    initial, upsert_tbl = bench_data.make_bench_data(rows, upsert, seed=seed)

    result: dict[str, Any] = {
        "engine": "pypaimon",
        "pypaimon": getattr(pypaimon, "__version__", "2.1.0"),
        "pyarrow": pa.__version__,
        "python": platform.python_version(),
        "rows": rows,
        "upsert": upsert,
        "bucket": 4,
        "rust": "off",
    }
    options = {"bucket": "4", "file.format": "parquet"}
    recorder = _RouteRecorder()
    if rust:
        available, status = _rust_status()
        result["rust"] = status
        if available:
            options.update(NATIVE_OPTIONS)
            recorder.install()

    catalog = CatalogFactory.create({"warehouse": str(workdir / "warehouse")})
    catalog.create_database("bench", False)
    schema = Schema.from_pyarrow_schema(
        bench_data.BENCH_SCHEMA, primary_keys=[bench_data.PRIMARY_KEY], options=options
    )
    catalog.create_table("bench.orders", schema, False)
    table = catalog.get_table("bench.orders")

    t0 = time.perf_counter()
    writer_kind = _write_and_commit(table, initial)
    t1 = time.perf_counter()
    _write_and_commit(table, upsert_tbl)
    t2 = time.perf_counter()
    merged = _read_all(table)
    t3 = time.perf_counter()

    result.update(
        write_s=t1 - t0,
        upsert_s=t2 - t1,
        read_s=t3 - t2,
        result_rows=merged.num_rows,
        writer=writer_kind,
    )
    if rust and result["rust"].startswith("pypaimon-rust"):
        result["native_routes"] = recorder.summary()
    if verify:
        expected = bench_data.expected_merged(initial, upsert_tbl)
        got = merged.select(expected.column_names).cast(expected.schema).sort_by("id")
        result["verified"] = bool(got.equals(expected))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--upsert", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, help="write the JSON result here")
    parser.add_argument("--rust", action="store_true", help="use pypaimon-rust if installed")
    parser.add_argument("--workdir", type=Path, help="keep the table here (default: temp dir)")
    parser.add_argument("--no-verify", dest="verify", action="store_false")
    args = parser.parse_args(argv)

    tmp: str | None = None
    if args.workdir is None:
        tmp = tempfile.mkdtemp(prefix="bench-pypaimon-")
        workdir = Path(tmp)
    else:
        workdir = args.workdir
        workdir.mkdir(parents=True, exist_ok=True)
    try:
        result = run_pypaimon_baseline(
            args.rows, args.upsert, workdir, rust=args.rust, seed=args.seed, verify=args.verify
        )
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    text = json.dumps(result, indent=2)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
