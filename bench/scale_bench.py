"""Scale benchmark (issue 30): one bucket of 1M, 10M (and, with `--big`, 100M) rows in five
overlapping sorted runs; rows, seconds (wall and CPU), rows/s and peak RSS of each step, at the default
`sort-spill-buffer-size`; then a full compaction of 5 x 1M rows against plain pyarrow.

Each step runs in its own child process (`bench/memory_probe.py`), so its peak resident memory
(VmHWM) is its own; "peak above baseline" subtracts what the child held before the step (the
interpreter, pyarrow and the engine imported, the table opened). The steps: `write` (five
commits of a fifth of the rows each, keys interleaved so every run spans the whole key range,
the last run rewriting the first's keys), `read` (a merged read of the five runs through
`to_arrow_batch_reader`), `compact` (a full compaction), `read compacted` (the read again, of
the one run left), `upsert` (a fifth of the rows again, each updating a key, one commit of a
write-only writer: no compaction at commit and no lookup, so its work grows with its own rows,
not the bucket's; its time excludes the probe generating those rows, its peak includes the batch
being written). The steps that leave the bucket as they found it (the reads; the upsert, each
time on a hard-linked copy of the compacted bucket) are the best of `--repeat` children: single
runs of these short steps (50-100 ms at 1M rows) moved the time-per-row ratio by 2x from run to
run on a shared machine.

Smoke run: `.venv/bin/python -m bench.scale_bench --sizes 100000`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.machine import format_markdown_table

ROOT = Path(__file__).resolve().parents[1]
RUNS = 5
SIZES = (1_000_000, 10_000_000)
BIG_SIZES = (100_000_000,)
MIB = 1 << 20


def _probe(*args: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "bench.memory_probe", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=6 * 3600)
    if proc.returncode != 0:
        raise RuntimeError(f"memory probe {args[0]} failed:\n{proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The fastest of a step's runs (wall and CPU each), with the highest peak above baseline among them."""
    best = dict(min(runs, key=lambda r: r["seconds"]))
    highest = max(runs, key=lambda r: r["peak_kib"] - r["baseline_kib"])
    best["peak_kib"], best["baseline_kib"] = highest["peak_kib"], highest["baseline_kib"]
    best["cpu_seconds"] = min(r["cpu_seconds"] for r in runs)
    best["runs"] = len(runs)
    return best


def scale_steps(rows: int, options: dict[str, str] | None = None, repeat: int = 1) -> list[dict[str, Any]]:
    """The five steps on a fresh bucket of `rows` rows; one result dict per step, the reads and the
    upsert the best of `repeat` runs."""
    opts = json.dumps(options or {})
    work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    repeat = max(repeat, 1)
    try:
        warehouse = str(work / "warehouse")
        results = [_probe("prepare", warehouse, str(rows), str(RUNS), opts, "t")]
        results[-1]["path"] = "write"
        results.append(_best([_probe("read", warehouse, opts) for _ in range(repeat)]))
        results.append(_probe("compact", warehouse, opts))
        results.append({**_best([_probe("read", warehouse, opts) for _ in range(repeat)]), "path": "read compacted"})
        for r in results:
            r["input_rows"] = rows
        upsert = json.dumps({**(options or {}), "probe.rows": str(rows // RUNS), "probe.runs": str(RUNS)})
        upserts = []
        for i in range(repeat):
            # Each upsert into the compacted bucket as the steps above left it. Hard links: a
            # commit writes new files and replaces its hint files (never rewrites one in place).
            copy = work / f"upsert-{i}"
            shutil.copytree(warehouse, copy, copy_function=os.link)
            upserts.append(_probe("upsert", str(copy), upsert))
            shutil.rmtree(copy, ignore_errors=True)
        results.append({**_best(upserts), "input_rows": rows // RUNS})
        for r in results:
            r["bucket_rows"] = rows
        return results
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _row(r: dict[str, Any]) -> dict[str, Any]:
    rows = r["input_rows"]
    return {"bucket rows": f"{r['bucket_rows']:,}", "step": r["path"], "rows": f"{rows:,}",
            "seconds": f"{r['seconds']:.2f}", "CPU seconds": f"{r['cpu_seconds']:.2f}",
            "rows/s": f"{rows / r['seconds']:,.0f}",
            "peak RSS MiB": f"{r['peak_kib'] / 1024:,.0f}",
            "peak above baseline MiB": f"{(r['peak_kib'] - r['baseline_kib']) / 1024:,.0f}"}


def _growth(results: list[dict[str, Any]], measure: str) -> dict[str, float]:
    """Per step: `measure` per input row at the largest bucket size over that at the smallest."""
    per_row: dict[str, list[float]] = {}
    for r in results:
        per_row.setdefault(r["path"], []).append(r[measure] / r["input_rows"])
    return {step: v[-1] / v[0] for step, v in per_row.items() if len(v) > 1}


def run_scale_bench(sizes: tuple[int, ...] = SIZES, compaction_rows_per_run: int = 1_000_000,
                    repeat: int = 3) -> str:
    """The scale section of docs/benchmarks.md."""
    from bench.compaction_bench import full_compaction_bench
    from bench.memory_probe import SLICE_ROWS
    from bench.memory_probe import rows as probe_rows

    row_bytes = probe_rows(0, 1, 1024, 0).nbytes / 1024  # (every name once)

    results = [r for n in sorted(sizes) for r in scale_steps(n, repeat=repeat)]
    rows = [_row(r) for r in results]
    columns = ["bucket rows", "step", "rows", "seconds", "CPU seconds", "rows/s", "peak RSS MiB",
               "peak above baseline MiB"]
    # Per-row time of the largest size over the smallest's (sizes run smallest first), from the
    # measured seconds (not the table's rounded ones: 0.05 s shown is 0.045-0.055 s): above 1,
    # cost grows faster than rows; below 1, fixed costs (a process's first pyarrow calls, its
    # threads) weigh more on the small bucket.
    growth, cpu_growth = _growth(results, "seconds"), _growth(results, "cpu_seconds")
    linear = ", ".join(f"{step} {g:.2f}x" for step, g in growth.items())
    full = full_compaction_bench(rows_per_run=compaction_rows_per_run, runs=RUNS, repeat=repeat)
    lines = [
        f"## Scale: one bucket of {RUNS} overlapping sorted runs, merged in bounded memory",
        "",
        "Each step in a child process of its own at the default `sort-spill-buffer-size` (64 mb); "
        "peak RSS is the child's VmHWM, \"above baseline\" subtracts what it held before the step "
        f"(`bench/scale_bench.py`). The reads and the upsert are the best of {max(repeat, 1)} runs "
        "(the highest peak of them), the write and the compaction one run. \"rows\" are the step's "
        "input rows (the bucket's; the upsert's own), and time per row is compared across bucket "
        "sizes. The upsert is one commit of a write-only writer (no compaction at commit, no lookup): "
        "its work grows with its own rows, not with the bucket's. The write and upsert times leave "
        "out the bench generating their rows; their peaks include the batch being written (at most "
        f"{SLICE_ROWS:,} rows, about {SLICE_ROWS * row_bytes / MIB:,.0f} MiB). \"CPU seconds\": the "
        "step's process, every thread (the best of the runs).",
        "",
        format_markdown_table(rows, columns),
        "",
    ]
    if linear:
        met = "yes" if all(g <= 1.3 for g in growth.values()) else "no"
        cpu = ", ".join(f"{step} {g:.2f}x" for step, g in cpu_growth.items())
        lines += [f"Time per row, largest size over smallest: {linear} (target: at most 1.3x: "
                  f"**{met}**). CPU seconds per row (every thread of the step's process), largest "
                  f"size over smallest: {cpu}.", ""]
    lines += [
        f"Full compaction of {RUNS} x {compaction_rows_per_run:,} overlapping rows: "
        f"{full['compact_s']:.2f} s ({full['compact_rows_per_s']:,.0f} input rows/s, target 5,000,000); "
        f"plain pyarrow read + sort + dedup + write of the same files {full['pyarrow_merge_s']:.2f} s "
        f"(ours {full['pyarrow_merge_s'] / full['compact_s']:.2f}x as fast, target 1.5x); "
        f"verified: {'yes' if full['verified'] else 'no'}.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES),
                        help="comma-separated bucket sizes in rows")
    parser.add_argument("--big", action="store_true", help="also 100M rows (about 3 minutes on 2 quiet cores; several GB of disk)")
    parser.add_argument("--compaction-rows", type=int, default=1_000_000,
                        help="rows per run of the 5-run full compaction against pyarrow")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of the reads, the upsert and the full compaction (the best is reported)")
    args = parser.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(",") if s) + (BIG_SIZES if args.big else ())
    print(run_scale_bench(sizes, args.compaction_rows, args.repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
