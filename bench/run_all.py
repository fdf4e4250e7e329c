"""`make bench`: every benchmark side by side in one run; results go to docs/benchmarks.md.

Foundation benchmark (issue 2): 1M rows (id BIGINT primary key, a 20-character string, BIGINT,
DOUBLE, TIMESTAMP) into `bucket = 4`: initial write, an upsert of 200k rows of which half
update, and a full merged read, for our engine, pypaimon 2.1.0 (pure Python and with
pypaimon-rust), and plain pyarrow (sort + write_table / read_table). Each engine runs
`--repeat` times on a fresh table; the best time of each step is reported. The Spark section
(`bench/spark_bench.py`) reports the median and range of `--repeat` runs instead: its runs vary
more, and its method is printed above its table.
"""

from __future__ import annotations

import argparse
import importlib
import json
import multiprocessing
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from bench.bench_data import make_bench_data
from bench.engine_bench import run_engine
from bench.machine import describe_machine, format_markdown_table
from bench.pyarrow_baseline import run_pyarrow_baseline

ROOT = Path(__file__).resolve().parents[1]
INTEROP_PYTHON = ROOT / ".venv-interop" / "bin" / "python"
SPARK_DOC = ROOT / "docs" / "spark.md"
# docs/spark.md carries the Spark section's table between these markers; `make bench` replaces it.
SPARK_TABLE_START = "<!-- make bench: spark table -->"
SPARK_TABLE_END = "<!-- end of make bench: spark table -->"
# What follows this line in the output file is hand-written (measured by tests or by hand) and kept.
KEPT_MARKER = "<!-- make bench keeps what follows: hand-written sections -->"
STEPS = ("write_s", "upsert_s", "read_s")


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    best = dict(runs[-1])
    for step in STEPS:
        best[step] = min(r[step] for r in runs)
    return best


def _call(target: str, kwargs: dict[str, Any]) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)(**kwargs)


def in_own_process(target: str, **kwargs: Any) -> Any:
    """`module:function`(**kwargs) run in a fresh interpreter of its own, its result returned.

    Each section runs in a process of its own, so what an earlier section left in this one (the
    allocator's heap after a 10M-key index, caches, threads) does not weigh on a later section's
    timings: the changelog section's warm `lookup` upsert measured 1.77x of `none` after the
    sections before it in one process and 1.40x-1.55x in a process of its own, on the same tree."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(_call, target, kwargs).result()


def _pypaimon(rows: int, upsert: int, rust: bool) -> dict[str, Any]:
    cmd = [str(INTEROP_PYTHON), str(ROOT / "bench" / "pypaimon_baseline.py"), "--rows", str(rows),
           "--upsert", str(upsert)]
    if rust:
        cmd.append("--rust")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"pypaimon baseline failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def foundation(rows: int, upsert: int, repeat: int, with_pypaimon: bool) -> tuple[list[dict[str, Any]], str]:
    initial, upsert_tbl = make_bench_data(rows, upsert)
    results: dict[str, dict[str, Any]] = {}
    runs: dict[str, list[dict[str, Any]]] = {"lakehouse_engine": [], "pyarrow": []}
    for _ in range(repeat):
        work = Path(tempfile.mkdtemp(prefix="bench-"))
        try:
            runs["lakehouse_engine"].append(run_engine(initial, upsert_tbl, work / "ours"))
            runs["pyarrow"].append(run_pyarrow_baseline(initial, upsert_tbl, work / "pyarrow"))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    results["lakehouse_engine"] = _best(runs["lakehouse_engine"])
    results[PYARROW_LABEL] = _best(runs["pyarrow"])
    notes = []
    if with_pypaimon:
        for rust in (False, True):
            label = RUST_LABEL if rust else "pypaimon 2.1.0 (pure Python)"
            r = _best([_pypaimon(rows, upsert, rust) for _ in range(repeat)])
            if rust and not str(r.get("rust", "")).startswith("pypaimon-rust"):
                notes.append(f"pypaimon-rust: {r.get('rust')}")
            elif rust and r.get("native_routes"):
                notes.append(f"pypaimon-rust routes taken: {json.dumps(r['native_routes'])}")
            results[label] = r
    ours = results["lakehouse_engine"]
    table_rows = []
    for label, r in results.items():
        row: dict[str, Any] = {"engine": label}
        for step in STEPS:
            name = step[:-2]
            row[f"{name} s"] = f"{r[step]:.3f}"
            rows_in_step = rows if name == "write" else upsert if name == "upsert" else r["result_rows"]
            row[f"{name} rows/s"] = f"{rows_in_step / r[step]:,.0f}"
            row[f"{name} vs ours"] = f"{r[step] / ours[step]:.2f}x"
        row["verified"] = r.get("verified", "-")
        table_rows.append(row)
    columns = ["engine"] + [f"{s[:-2]} {c}" for s in STEPS for c in ("s", "rows/s", "vs ours")] + ["verified"]
    md = format_markdown_table(table_rows, columns)
    targets = foundation_targets(results)
    if targets:
        md += "\n\n" + targets
    if notes:
        md += "\n\n" + "\n".join(f"- {n}" for n in notes)
    return table_rows, md


RUST_LABEL = "pypaimon 2.1.0 + pypaimon-rust"
PYARROW_LABEL = "pyarrow (sort + write_table / read_table)"


def foundation_targets(results: dict[str, dict[str, Any]]) -> str:
    """Issue 19's targets per step: at least 2x faster than pypaimon + pypaimon-rust, and within
    1.2x of plain pyarrow; one Markdown line per target ("" without the reference rows)."""
    ours = results["lakehouse_engine"]
    lines = []
    for label, bound, wording in ((RUST_LABEL, 0.5, "at least 2x faster than pypaimon + pypaimon-rust"),
                                  (PYARROW_LABEL, 1.2, "within 1.2x of plain pyarrow")):
        ref = results.get(label)
        if ref is None:
            continue
        verdicts = [f"{step[:-2]} {ours[step] / ref[step]:.2f}x ({'yes' if ours[step] <= bound * ref[step] else 'no'})"
                    for step in STEPS]
        lines.append(f"Target: {wording}, every step (ours / theirs): " + ", ".join(verdicts) + ".")
    return "\n".join(lines)


def replace_marked(text: str, replacement: str, start: str = SPARK_TABLE_START,
                   end: str = SPARK_TABLE_END) -> str:
    """`text` with what lies between the `start` and `end` marker lines replaced by `replacement`.

    Raises ValueError when either marker is missing, so a renamed marker is not silently skipped.
    """
    head, found, rest = text.partition(start)
    _, found_end, tail = rest.partition(end)
    if not found or not found_end:
        raise ValueError(f"markers {start!r} and {end!r} not found")
    return f"{head}{start}\n{replacement.strip()}\n{end}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--upsert", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each measurement (foundation: best; Spark: median and range)")
    parser.add_argument("--no-pypaimon", dest="pypaimon", action="store_false")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--only", default="foundation,compaction,buckets,checksums,schema,scale,changelog,dv,spark",
                        help="comma-separated sections to run (foundation, compaction, buckets, "
                             "checksums, schema, scale, changelog, dv, spark)")
    parser.add_argument("--scale-big", action="store_true",
                        help="scale section: also a bucket of 100M rows (about 3 minutes more on 2 quiet cores)")
    parser.add_argument("--scale", type=float, default=1.0, help="size factor of the later sections")
    parser.add_argument("--spark-scale", type=float, default=1.0, help="size factor of the Spark section")
    args = parser.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()}

    machine = describe_machine()
    md = ""
    if "foundation" in only:
        _, md = foundation(args.rows, args.upsert, args.repeat, args.pypaimon and INTEROP_PYTHON.exists())
        print(md)
    command = (f"make bench  # = python -m bench.run_all --rows {args.rows} --upsert {args.upsert} "
               f"--repeat {args.repeat} --only {','.join(sorted(only))} --scale {args.scale} "
               f"--spark-scale {args.spark_scale}")
    doc = [
        "# Benchmarks",
        "",
        "Produced by:",
        "",
        "```",
        command,
        "```",
        "",
        "Machine: " + ", ".join(f"{k}: {v}" for k, v in machine.items()),
        "",
        "Every engine runs in the same `make bench` invocation on identical data "
        "(`bench/bench_data.py`); each foundation step is the best of the repeats (the Spark section: "
        "the median). \"vs ours\" is the "
        "engine's time divided by ours (above 1.00x: slower than ours). Every section after the "
        "foundation runs in a fresh Python process of its own, so what one section leaves in memory "
        "does not weigh on the next one's timings.",
        "",
    ]
    if md:
        doc += [
            f"## Foundation: {args.rows:,} rows into `bucket = 4`, then an upsert of {args.upsert:,} "
            "(half updates), then a full merged read",
            "",
            md,
            "",
        ]
    if "compaction" in only:
        doc.append(in_own_process("bench.compaction_bench:run_compaction_bench", scale=args.scale,
                                  png_path=args.out.parent / "sorted_runs.png"))
    if "buckets" in only:
        doc.append(in_own_process("bench.bucket_bench:run_bucket_bench", scale=args.scale))
    if "checksums" in only:
        doc.append(in_own_process("bench.checksum_bench:run_checksum_bench", scale=args.scale, repeat=args.repeat))
    if "schema" in only:
        doc.append(in_own_process("bench.schema_evolution_bench:run_schema_evolution_bench", scale=args.scale,
                                  repeat=max(args.repeat, 5)))
    if "scale" in only:
        from bench.scale_bench import BIG_SIZES, SIZES

        sizes = tuple(max(10_000, int(n * args.scale)) for n in SIZES) + (BIG_SIZES if args.scale_big else ())
        doc.append(in_own_process("bench.scale_bench:run_scale_bench", sizes=sizes,
                                  compaction_rows_per_run=max(10_000, int(1_000_000 * args.scale)),
                                  repeat=args.repeat))
    if "changelog" in only:
        print("changelog ...", file=sys.stderr)
        doc.append(in_own_process("bench.changelog_bench:run_changelog_bench", scale=args.scale, repeat=args.repeat))
    if "dv" in only:
        doc.append(in_own_process("bench.deletion_vector_bench:run_deletion_vector_bench", scale=args.scale,
                                  repeat=args.repeat))
    if "spark" in only:
        try:
            from bench.spark_bench import SPARK_METHOD, run_spark_bench
        except ImportError as e:
            doc.append(f"## Spark\n\nnot run: {e}\n")
        else:
            sizes = tuple(max(10_000, int(r * args.spark_scale)) for r in (1_000_000, 5_000_000, 10_000_000))
            spark_md = run_spark_bench(rows_list=sizes, repeat=args.repeat)
            doc.append("## Spark: write and read through PySpark next to the single-process engine\n\n"
                       + SPARK_METHOD + "\n\n" + spark_md)
            if args.out == ROOT / "docs" / "benchmarks.md":  # partial runs elsewhere leave docs alone
                machine_line = f"Measured by `{command.split('  #')[0]}` on " + ", ".join(
                    f"{k}: {v}" for k, v in machine.items() if k in ("cpu", "cores", "memory")) + "."
                SPARK_DOC.write_text(replace_marked(SPARK_DOC.read_text(), machine_line + "\n\n" + spark_md))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    kept = args.out.read_text().partition(KEPT_MARKER)[2] if args.out.exists() else ""
    if kept:
        doc += ["", KEPT_MARKER + kept.rstrip("\n") + "\n"]
    args.out.write_text("\n".join(doc))
    print(f"\nwritten to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
