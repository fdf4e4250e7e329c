"""A first-row upsert commit in two checkouts of this repository, side by side, alternating.

    python -m bench.first_row_compare /work/main .   # before and after, `--passes` times each

Each pass runs in the given checkout (its own engine): a `merge-engine` = first-row table of
`--rows` rows in `--buckets` buckets, then `--upserts` commits of `--upsert` rows each (a
`--known` fraction of them keys the table holds, the rest new ones); it prints the median and the mean upsert commit (write +
prepare_commit + commit) seconds of each checkout and their ratios (the mean counts the commits
that compact; give enough `--upserts` for the num-sorted-run trigger to fire before, too). Since the first-row lookup compaction, each
commit looks the new keys up in the levels above and takes level 0 up; before, level 0 stayed.

With `--producers none,lookup` each pass times one table per `changelog-producer` in the same
process, their upserts alternating commit by commit, and prints the ratio of each to the first:
the cost of the first-row lookup changelog against none, before and after.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

_RUN = """
import json, sys, tempfile, time
import numpy as np, pyarrow as pa
from lakehouse_engine import Catalog, Schema
rows, upsert, upserts, buckets = (int(a) for a in sys.argv[1:5])
known = float(sys.argv[5])
producers = sys.argv[6].split(",")
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string()),
                    pa.field("x", pa.float64())])
def batch(ids):
    return pa.table({"id": ids, "v": pa.array(np.char.add("v", ids.astype(str))),
                     "x": np.random.default_rng(0).random(len(ids))}, schema=schema)
catalog = Catalog(tempfile.mkdtemp() + "/w")
catalog.create_database("db")
tables = {}
for p in producers:
    catalog.create_table("db." + p.replace("-", "_"), Schema.from_pyarrow_schema(schema, primary_keys=["id"],
                         options={"bucket": str(buckets), "merge-engine": "first-row", "changelog-producer": p}))
    tables[p] = catalog.get_table("db." + p.replace("-", "_"))
def commit(t, data):
    wb = t.new_batch_write_builder(); w, c = wb.new_write(), wb.new_commit()
    start = time.perf_counter()
    w.write_arrow(data); c.commit(w.prepare_commit())
    took = time.perf_counter() - start
    w.close(); c.close()
    return took
for t in tables.values():
    commit(t, batch(np.arange(rows, dtype=np.int64)))
times, top = {p: [] for p in producers}, rows
for i in range(upserts):
    n_old = int(upsert * known)
    old = np.random.default_rng(i).choice(top, n_old, replace=False).astype(np.int64)
    ids = np.concatenate([old, np.arange(top, top + upsert - n_old, dtype=np.int64)])
    top += upsert - n_old
    for p in (producers if i % 2 == 0 else producers[::-1]):  # alternating, first and second in turn
        times[p].append(commit(tables[p], batch(ids)))
print(json.dumps({p: {"best_s": min(ts), "median_s": sorted(ts)[len(ts) // 2], "mean_s": sum(ts) / len(ts)}
                  for p, ts in times.items()}))
"""


def run(checkout: Path, rows: int, upsert: int, upserts: int, buckets: int, known: float,
        producers: str = "none") -> dict[str, dict[str, float]]:
    """One pass in `checkout`: per producer, the best, median and mean upsert commit seconds."""
    root = checkout.resolve()
    out = subprocess.run([sys.executable, "-c", _RUN, str(rows), str(upsert), str(upserts), str(buckets), str(known),
                          producers],
                         cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"},
                         capture_output=True, text=True, check=True)
    result: dict[str, dict[str, float]] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="a checkout of this repository (a git worktree)")
    parser.add_argument("after", type=Path)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--upsert", type=int, default=100_000)
    parser.add_argument("--upserts", type=int, default=10)
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--known", type=float, default=0.5, help="fraction of upserted keys the table holds")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--producers", default="none",
                        help="changelog producers timed side by side in each pass (comma separated)")
    args = parser.parse_args(argv)
    producers = args.producers.split(",")
    got: dict[tuple[str, str, str], list[float]] = {}
    for _ in range(args.passes):
        for name in ("before", "after"):
            r = run(getattr(args, name), args.rows, args.upsert, args.upserts, args.buckets, args.known,
                    args.producers)
            for p in producers:
                for label in ("median", "mean"):
                    got.setdefault((name, p, label), []).append(r[p][f"{label}_s"])
                print(f"{name}, {p}: upsert commit median {r[p]['median_s']:.3f} s, mean {r[p]['mean_s']:.3f} s",
                      flush=True)
    for p in producers:
        for label in ("median", "mean"):
            b, a = min(got[("before", p, label)]), min(got[("after", p, label)])
            print(f"first-row upsert commit ({p}), {label}: before {b:.3f} s, after {a:.3f} s, ratio {a / b:.2f}x")
    for name in ("before", "after"):
        for p in producers[1:]:
            for label in ("median", "mean"):
                ratio = min(got[(name, p, label)]) / min(got[(name, producers[0], label)])
                print(f"{name}: {p} / {producers[0]}, {label}: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
