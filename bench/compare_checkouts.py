"""The foundation steps of one checkout of this repository, to compare two versions side by side.

    git worktree add --detach /tmp/before <commit>
    python -m bench.compare_checkouts /tmp/before   # then the same with `.` and again, alternating

Runs `bench.engine_bench.run_engine` from the given checkout (its own engine and benchmark code)
on the foundation data and prints the best write, upsert and read seconds of `--repeat` fresh
tables. Alternate the two checkouts a few times: one machine's passes differ more than small
changes do.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

_RUN = """
import json, sys, tempfile
from pathlib import Path
from bench.bench_data import make_bench_data
from bench.engine_bench import run_engine
rows, upsert, repeat = (int(a) for a in sys.argv[1:4])
initial, up = make_bench_data(rows, upsert)
runs = [run_engine(initial, up, Path(tempfile.mkdtemp()) / "ours", verify=False) for _ in range(repeat)]
print(json.dumps({s: min(r[s] for r in runs) for s in ("write_s", "upsert_s", "read_s")}))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="a checkout of this repository (a git worktree)")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--upsert", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    root = args.checkout.resolve()
    out = subprocess.run([sys.executable, "-c", _RUN, str(args.rows), str(args.upsert), str(args.repeat)],
                         cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"},
                         capture_output=True, text=True, check=True)
    best = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"{root}: write {best['write_s']:.3f} s, upsert {best['upsert_s']:.3f} s, read {best['read_s']:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
