"""A seeded randomized sweep: pypaimon 2.1.0's StreamReadBuilder reads our changelog of random
workloads (tests/java/changelog_workloads.py), and a consumer file both sides honour.

Per seed, with the stream's plans (snapshot, rows) as our stream read gives them and a split point
`mid` among them:

* forward: pypaimon streams with consumer `py` (reset to snapshot 1) until it has the plan of
  `mid`; each plan's rows are ours for that snapshot. Its consumer then points past the plan
  before `mid` and at most past `mid` (pypaimon records a plan as processed when the next one is
  asked for: at least once), and our stream continued from that consumer gives exactly the
  plans from there on;
* reverse: our stream with consumer `ours` (reset to snapshot 1) takes the plans up to `mid` and
  notifies each checkpoint; pypaimon continued from that consumer gives exactly the plans after it.

pypaimon's default catch-up (one diff plan of the whole gap when more than 10 snapshots are behind)
is raised out of the way: the sweep compares the changelog snapshot by snapshot. Both consumers
are registered before the workload runs, so its snapshot expiries keep what they need: pypaimon's
stream reads snapshots only (never a long-lived `changelog/` file; at an expired snapshot it waits
for it to appear), as Paimon's consumers are meant to prevent. One pypaimon subprocess judges
every seed of a run.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from lakehouse_engine import Catalog
from tests.java.changelog_workloads import COLUMNS, Workload, accepted, build, multisets, our_stream

SEEDS = range(0, 16)
SOAK_SEEDS = range(2000, 2150)
#: Seeds that once found a disagreement (seed: what it was), run with SEEDS.
PINNED: dict[int, str] = {}
#: The options pypaimon refused, across a run.
REFUSED: set[str] = set()

PYPAIMON_STREAMS = """
import signal
class Late(Exception):
    pass
def _late(signum, frame):
    raise Late()
signal.signal(signal.SIGALRM, _late)
out = []
for job in ARGS["jobs"]:
    catalog = CatalogFactory.create({"warehouse": job["warehouse"]})
    table = catalog.get_table(job["table"])
    builder = table.new_stream_read_builder().with_include_row_kind(True).with_consumer_id(job["consumer"])
    builder.with_poll_interval_ms(10)
    try:
        scan, read = builder.new_streaming_scan(), builder.new_read()
    except NotImplementedError as e:  # options pypaimon does not implement: it says which
        out.append({"plans": [], "late": False, "refused": str(e)})
        continue
    scan._diff_threshold = 1 << 30  # per-snapshot plans, not one catch-up diff (see the module)
    plans, late = [], False
    if job["until"] is None:  # nothing after our consumer: pypaimon would wait for a snapshot
        out.append({"plans": plans, "late": late})
        continue
    signal.alarm(20)  # a plan we expect and pypaimon never yields: report, do not hang
    try:
        for plan in scan.stream_sync():
            rows = read.to_arrow(plan.splits()).to_pylist()
            plans.append([plan.snapshot_id, [[r["_row_kind"], *(r[c] for c in ARGS["columns"])] for r in rows]])
            if plan.snapshot_id is not None and plan.snapshot_id >= job["until"]:
                break
    except Late:
        late = True
    except Exception as e:
        plans.append([None, [["error", repr(e)]]])
    signal.alarm(0)
    out.append({"plans": plans, "late": late})
emit(out)
"""


def _ours_with_consumer(table: Any, consumer: str, until: int) -> list[tuple[int, list[list[Any]]]]:
    """Our stream with `consumer`, plan by plan until the plan of snapshot `until` (notifying
    each checkpoint, as a checkpointing reader does), or to the latest."""
    builder = table.new_stream_read_builder().with_include_row_kind().with_consumer_id(consumer)
    scan, rd = builder.new_streaming_scan(), builder.new_read()
    latest = table.snapshot_manager().latest_snapshot_id()
    out = []
    while (scan.checkpoint() or 0) <= latest:
        plan = scan.plan()
        if plan.snapshot is None:
            break
        rows = [[r["_row_kind"], *(r[c] for c in COLUMNS)] for r in rd.to_arrow(plan.splits()).to_pylist()]
        scan.notify_checkpoint_complete(scan.checkpoint())
        if rows:
            out.append((plan.snapshot_id, rows))
        if plan.snapshot_id >= until:
            break
    return multisets(out)


def _sweep(tmp: Any, pypaimon: Callable[..., Any], seeds: list[int]) -> list[str]:
    warehouse = tmp / "warehouse"
    catalog = Catalog(str(warehouse))
    catalog.create_database("db")
    cases: list[tuple[Workload, Any, list[tuple[int, list[list[Any]]]], int, list[Any]]] = []
    jobs: list[dict[str, Any]] = []
    for seed in seeds:
        w = accepted(catalog, seed)
        table, _ = build(catalog, f"s{seed}", w, consumers=("py", "ours"))
        full = multisets(our_stream(table))
        assert full, f"no changelog: {w.describe()}"
        m = random.Random(seed).randrange(len(full) - 1) if len(full) > 1 else 0
        ours_first = _ours_with_consumer(table, "ours", full[m][0])
        cases.append((w, table, full, m, ours_first))
        name = f"db.s{seed}"
        jobs += [{"warehouse": str(warehouse), "table": name, "consumer": "py", "until": full[m][0]},
                 {"warehouse": str(warehouse), "table": name, "consumer": "ours",
                  "until": full[-1][0] if m + 1 < len(full) else None}]
    answers = pypaimon(PYPAIMON_STREAMS, jobs=jobs, columns=COLUMNS)
    failures = []
    for i, (w, table, full, m, ours_first) in enumerate(cases):
        forward, reverse = answers[2 * i], answers[2 * i + 1]
        problems = _disagreements(table, full, m, ours_first, forward, reverse)
        failures += [f"{p}\n    {w.describe()}" for p in problems]
    return failures


def _disagreements(table: Any, full: list[tuple[int, list[list[Any]]]], m: int, ours_first: Any,
                   forward: dict[str, Any], reverse: dict[str, Any]) -> list[str]:
    out = []
    if "refused" in forward or "refused" in reverse:
        return _refusal(table, str(forward.get("refused") or reverse.get("refused")))
    if ours_first != full[:m + 1]:
        out.append(f"our consumer's first half {ours_first} != {full[:m + 1]}")
    theirs = multisets([(sid, rows) for sid, rows in forward["plans"]])
    if forward["late"] or theirs != full[:m + 1]:
        out.append(f"pypaimon from snapshot 1 (late={forward['late']}) {theirs} != ours {full[:m + 1]}")
    position = table.consumer_manager().consumers().get("py")
    low = full[m - 1][0] + 1 if m > 0 else 1
    if position is None or not low <= position <= full[m][0] + 1:
        out.append(f"pypaimon's consumer at {position}, not in [{low}, {full[m][0] + 1}]")
    else:
        rest = _ours_with_consumer(table, "py", full[-1][0])
        if rest != [p for p in full if p[0] >= position]:
            out.append(f"ours from pypaimon's consumer {position}: {rest} != {full}")
    theirs = multisets([(sid, rows) for sid, rows in reverse["plans"]])
    if reverse["late"] or theirs != full[m + 1:]:
        out.append(f"pypaimon from our consumer (late={reverse['late']}) {theirs} != ours {full[m + 1:]}")
    return out


def _refusal(table: Any, message: str) -> list[str]:
    """pypaimon 2.1.0 refuses to read a partial-update table with `ignore-delete` or
    `partial-update.remove-record-on-*` (even its changelog): fine when it names options the table
    sets, and only those."""
    named = message.split("does not yet implement: ", 1)[-1].split(". ", 1)[0].split(", ")
    options = table.options.raw
    if "'partial-update'" in message and named and all(options.get(o) == "true" for o in named):
        REFUSED.update(named)
        return []
    return [f"pypaimon refused: {message}"]


def test_pypaimon_streams_our_changelog_of_random_workloads_through_consumers_both_honour(
        tmp_path: Any, pypaimon: Callable[..., Any]) -> None:
    failures = _sweep(tmp_path, pypaimon, sorted(set(SEEDS) | set(PINNED)))
    print(f"options pypaimon refused: {sorted(REFUSED)}")
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_soak_pypaimon_streams_our_changelog_of_random_workloads(tmp_path: Any, pypaimon: Callable[..., Any]) -> None:
    failures = _sweep(tmp_path, pypaimon, list(SOAK_SEEDS))
    print(f"options pypaimon refused: {sorted(REFUSED)}")
    assert not failures, "\n".join(failures)
