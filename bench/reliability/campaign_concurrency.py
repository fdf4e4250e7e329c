"""Concurrency campaign: writer processes upserting and deleting the same keys, fixed and dynamic
bucket (also with deletion vectors) and cross-partition upsert, and with the `lookup` (also with deletion vectors, dynamic
buckets and cross-partition upsert) and `full-compaction` changelog producers.

Each race starts N writer processes on one table; every writer commits rounds of a few same-key
upserts and deletes, pausing 100-300 ms between its write and its commit so others overtake it.
Every snapshot is read and compared with the acknowledged batches applied in snapshot-id order,
then the table is fully compacted and compared again (`same_key_race.run_race`). With a changelog
producer, every snapshot's changes replayed in snapshot order must give the table, each -U/-D the
row it replaces: a key that replays wrong, or a wrong before-image, counts as a wrong row, and so
does a key read twice (in two buckets or partitions).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from bench.reliability import Outcome
from bench.reliability.same_key_race import run_race


def run(quick: bool) -> list[Outcome]:
    """One outcome per bucket mode: lost and wrong rows over every snapshot and after full compaction."""
    writers, rounds, keys = (3, 8, 8) if quick else (5, 40, 16)
    outcomes = []
    labels = {"fixed": "fixed bucket", "dynamic": "dynamic bucket",
              "cross-partition": "cross-partition upsert over 3 partitions",
              "dv": "deletion vectors, fixed bucket", "dv-dynamic": "deletion vectors, dynamic bucket",
              "lookup": "lookup changelog",
              "lookup-dv": "lookup changelog, deletion vectors", "lookup-dynamic": "lookup changelog, dynamic bucket",
              "lookup-cross-partition": "lookup changelog, cross-partition upsert over 3 partitions",
              "full-compaction": "full-compaction changelog, stream writers and a compactor process"}
    for mode, label in labels.items():
        with tempfile.TemporaryDirectory(prefix=f"campaign-concurrency-{mode}-") as tmp:
            r = run_race(Path(tmp), mode, writers=writers, rounds=rounds, keys=keys)
        outcomes.append(Outcome(
            area="concurrency",
            tried=(f"{writers} writer processes x {rounds} commits of same-key upserts/deletes "
                   f"({label}, {keys} keys); every snapshot and a full compaction checked "
                   f"against snapshot order"),
            trials=r.commits,
            lost_rows=r.lost_rows + r.lost_after_full_compaction,
            wrong_rows=(r.wrong_rows + r.wrong_after_full_compaction + r.changelog_wrong_keys
                        + len(r.before_image_errors) + r.duplicate_rows + r.duplicate_after_full_compaction),
            result=(f"{r.resequenced_commits} late commits re-sequenced, "
                    f"{r.conflicts_retried} CommitConflictError retried"
                    + (f", {r.changelog_rows} changelog rows replayed" if r.changelog_rows else "")),
        ))
    return outcomes
