"""Drive Apache Paimon 0.9's Java core (tests/java/PaimonJudge.java) as the judge of our tables.

`make paimon-java` fetches the jar and compiles the harness into `.cache/paimon-java`. One JVM runs
a whole list of requests (read / write / compact / expire / assign), so tests batch their tables.
Values cross in one canonical JSON form (see the harness): `canonical_rows` turns Arrow into it.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

ROOT = Path(__file__).resolve().parents[2]
JUDGE_DIR = Path(os.environ.get("LAKEHOUSE_PAIMON_JAVA_DIR", ROOT / ".cache" / "paimon-java"))
ANSWER_PREFIX = "@@JUDGE@@"

Judge = Callable[[Sequence[dict[str, Any]]], list[dict[str, Any]]]


def _classpath() -> str:
    import pyspark  # the Hadoop classes Paimon's parquet reader needs ship with pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    hadoop = sorted(jars.glob("hadoop-client-api-*.jar")) + sorted(jars.glob("hadoop-client-runtime-*.jar"))
    return os.pathsep.join([str(JUDGE_DIR / "classes"), str(JUDGE_DIR / "paimon.jar")] + [str(j) for j in hadoop])


def run_judge(requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run `requests` in one JVM, in order; one answer per request (`{"error": ...}` when it failed)."""
    if not (JUDGE_DIR / ".built").exists() or shutil.which("java") is None:
        pytest.fail(f"{JUDGE_DIR} is not built or java is missing: run `make paimon-java` (make test does)")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(list(requests), f)
    try:
        # Serial GC and C1 only: the JVM starts faster and the work per call is small.
        proc = subprocess.run(
            ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", _classpath(), "PaimonJudge", f.name],
            capture_output=True, text=True, timeout=600,
        )
    finally:
        os.unlink(f.name)
    answers = [json.loads(line[len(ANSWER_PREFIX):]) for line in proc.stdout.splitlines()
               if line.startswith(ANSWER_PREFIX)]
    if proc.returncode != 0 or len(answers) != len(requests):
        raise AssertionError(f"Paimon judge failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return answers


def ok(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer, after asserting that Paimon did not raise."""
    assert "error" not in answer, f"Paimon 0.9 failed: {answer['error']} {answer.get('causes')}"
    return answer


@pytest.fixture(scope="session")
def judge() -> Judge:
    """The `run_judge` callable, for tests marked `java`."""
    return run_judge


def _canonical_column(col: pa.ChunkedArray | pa.Array) -> list[Any]:
    t = col.type
    if pa.types.is_timestamp(t):
        factor = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}[t.unit]
        return [None if v is None else v * factor for v in pc.cast(col, pa.int64()).to_pylist()]
    if pa.types.is_date32(t):
        return pc.cast(col, pa.int32()).to_pylist()
    if pa.types.is_time(t):
        return pc.cast(col, pa.int32() if t.bit_width == 32 else pa.int64()).to_pylist()
    if pa.types.is_decimal(t):
        return [None if v is None else format(v, "f") for v in col.to_pylist()]
    if pa.types.is_binary(t) or pa.types.is_fixed_size_binary(t) or pa.types.is_large_binary(t):
        return [None if v is None else v.hex() for v in col.to_pylist()]
    if pa.types.is_floating(t):
        return [_float(v) for v in col.to_pylist()]
    if pa.types.is_nested(t):
        return [_nested(v) for v in col.to_pylist()]
    return col.to_pylist()


def _nested(v: Any) -> Any:
    """A nested value as the judge writes it: ARRAY a list, MAP a list of [key, value] pairs
    (Arrow's map tuples), ROW an object by field name; inner values JSON scalars."""
    if isinstance(v, (list, tuple)):
        return [_nested(x) for x in v]
    if isinstance(v, dict):
        return {k: _nested(x) for k, x in v.items()}
    if isinstance(v, float):
        return _float(v)
    return v


def _float(v: float | None) -> Any:
    if v is None or math.isfinite(v):
        return v
    return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")


def canonical_rows(table: pa.Table, kinds: Sequence[str] | None = None) -> list[list[Any]]:
    """Rows of `table` in the judge's JSON form, each led by its row kind (`+I` unless given)."""
    columns = [_canonical_column(table.column(i)) for i in range(table.num_columns)]
    kinds = list(kinds) if kinds is not None else ["+I"] * table.num_rows
    return [[kinds[r]] + [c[r] for c in columns] for r in range(table.num_rows)]


def sorted_values(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """Rows without their row kind, in a stable order for comparison."""
    return sorted((list(r[1:]) for r in rows), key=lambda r: json.dumps(r))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/java" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.java)


def our_stream_plans(table: Any, columns: Sequence[str], start: int = 1,
                     by_key: bool = True) -> list[tuple[int, list[list[Any]]]]:
    """Our streaming scan of `table` from snapshot `start` to the latest, as the judge's `stream`
    answers it: (snapshot id, rows) for each plan with rows, a row `[_row_kind, *columns]`, rows
    sorted by the first column keeping each key's own order (the order a replay needs), or in
    read order when not `by_key`."""
    t = table.copy({"scan.mode": "from-snapshot", "scan.snapshot-id": str(start)})
    builder = t.new_stream_read_builder().with_include_row_kind()
    scan, read = builder.new_streaming_scan(), builder.new_read()
    latest = table.snapshot_manager().latest_snapshot_id()
    assert latest is not None
    out = []
    while (scan.checkpoint() or 0) <= latest:
        plan = scan.plan()
        if plan.snapshot is None:
            break
        rows = [[r["_row_kind"], *(r[c] for c in columns)] for r in read.to_arrow(plan.splits()).to_pylist()]
        if rows:
            out.append((plan.snapshot_id, sorted(rows, key=lambda r: r[1]) if by_key else rows))
    return out
