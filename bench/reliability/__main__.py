"""`python -m bench.reliability [--quick] [--only NAME]`: run the campaigns, print and record their table."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time
from pathlib import Path

from bench.reliability import Outcome

DOC = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"
BEGIN, END = "<!-- reliability-table:begin -->", "<!-- reliability-table:end -->"


def campaigns() -> list[str]:
    """Module names of the campaigns, in name order."""
    import bench.reliability as pkg

    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if m.name.startswith("campaign_"))


def render(outcomes: list[Outcome], command: str, seconds: float) -> str:
    """The Markdown table of outcomes, with its totals and the command that produced it."""
    lines = [
        "| area | what was tried | trials | lost rows | wrong rows | unclear errors | what happened |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for o in outcomes:
        lines.append(f"| {o.area} | {o.tried} | {o.trials:,} | {o.lost_rows} | {o.wrong_rows} | "
                     f"{o.unclear_errors} | {o.result} |")
    lines.append(f"| **total** | | {sum(o.trials for o in outcomes):,} | "
                 f"{sum(o.lost_rows for o in outcomes)} | {sum(o.wrong_rows for o in outcomes)} | "
                 f"{sum(o.unclear_errors for o in outcomes)} | |")
    return "\n".join(lines) + f"\n\nProduced by `{command}` in {seconds:.0f} s.\n"


def record(table: str) -> None:
    """Replace the table between the markers in docs/reliability.md (append the markers if absent)."""
    text = DOC.read_text()
    block = f"{BEGIN}\n{table}{END}"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n## What was tried\n\n" + block + "\n"
    DOC.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reliability", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    parser.add_argument("--only", action="append", default=[], help="run only campaign_NAME")
    parser.add_argument("--no-record", action="store_true", help="print only; leave the doc alone")
    args = parser.parse_args(argv)
    names = [n for n in campaigns() if not args.only or n.removeprefix("campaign_") in args.only]
    start = time.monotonic()
    outcomes: list[Outcome] = []
    for name in names:
        print(f"-- {name}", flush=True)
        module = importlib.import_module(f"bench.reliability.{name}")
        outcomes.extend(module.run(args.quick))
    command = "make reliability" + (" RELIABILITY_ARGS=--quick" if args.quick else "")
    table = render(outcomes, command, time.monotonic() - start)
    print(table)
    if not args.no_record and not args.only:
        record(table)
    bad = sum(o.lost_rows + o.wrong_rows + o.unclear_errors for o in outcomes)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
