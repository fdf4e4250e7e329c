"""Writer processes of the same keys racing: the table reads as their commits in snapshot order,
and a changelog producer's changes, replayed in snapshot order, give the table with exact before-images."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.reliability.same_key_race import RaceReport, run_race


def _assert_snapshot_order(report: RaceReport) -> None:
    """Every snapshot checked, and the table after a full compaction, read as the acknowledged
    commits in snapshot order, with no key read twice (in two buckets or partitions)."""
    assert (report.lost_rows, report.wrong_rows, report.duplicate_rows) == (0, 0, 0)
    assert (report.lost_after_full_compaction, report.wrong_after_full_compaction,
            report.duplicate_after_full_compaction) == (0, 0, 0)


@pytest.mark.parametrize("mode", ["fixed", "dynamic"])
def test_three_writer_processes_of_the_same_keys_read_in_snapshot_order(tmp_path: Path, mode: str) -> None:
    report = run_race(tmp_path, mode, writers=3, rounds=8)
    assert report.commits == 24
    assert report.resequenced_commits > 0  # the race really overlapped
    _assert_snapshot_order(report)


@pytest.mark.parametrize("mode", ["dv", "dv-dynamic"])
def test_writer_processes_of_the_same_keys_keep_a_dv_tables_vectors_exact(tmp_path: Path, mode: str) -> None:
    """Racing commits of one bucket never lose a vector (a replaced row shows again) nor apply one
    twice (a live row goes missing): stale vectors conflict and are recomputed against what landed."""
    report = run_race(tmp_path, mode, writers=3, rounds=8)
    assert report.commits == 24
    assert report.resequenced_commits > 0  # the race really overlapped
    # A commit ends with its level 0 looked up (one compaction may settle several writers' commits).
    assert report.snapshots_checked >= report.commits // 2
    _assert_snapshot_order(report)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["fixed", "dynamic", "cross-partition"])
def test_five_writer_processes_for_sixty_rounds_read_in_snapshot_order(tmp_path: Path, mode: str) -> None:
    report = run_race(tmp_path, mode, writers=5, rounds=60, keys=20)
    assert report.commits == 5 * 60  # every writer commits once per round
    _assert_snapshot_order(report)


def _assert_changelog_replays(report: RaceReport) -> None:
    assert report.changelog_rows > 0
    # Every snapshot's changes, concatenated in snapshot order and replayed on the empty table,
    # give the table; and each -U / -D is exactly the row it replaces (Paimon's before-images).
    assert report.changelog_wrong_keys == 0
    assert report.before_image_errors == []


def test_cross_partition_writer_processes_of_the_same_keys_never_leave_a_key_in_two_partitions(
        tmp_path: Path) -> None:
    """Writers whose rows keep moving the same keys between three partitions: a commit routed by a
    global index that another writer's commit made stale conflicts, and the writer writes again."""
    report = run_race(tmp_path, "cross-partition", writers=3, rounds=8)
    assert report.commits == 24
    assert report.conflicts_retried > 0  # the race really overlapped
    _assert_snapshot_order(report)


@pytest.mark.parametrize("mode", ["lookup", "lookup-dv", "lookup-dynamic", "lookup-cross-partition"])
def test_writer_processes_of_the_same_keys_keep_a_lookup_changelog_in_snapshot_order(
        tmp_path: Path, mode: str) -> None:
    """A late writer's lookup changelog compared its rows with the bucket before the others'
    commits: the commit conflicts and the writer writes again, against what landed. Dynamic-bucket
    writers may also place a new key in two buckets (the index conflicts), and cross-partition
    writers in two partitions (the routing conflicts); a moved key's changes are a `-D` in the old
    partition and a `+I` in the new."""
    report = run_race(tmp_path, mode, writers=3, rounds=8)
    assert report.commits == 24
    assert report.conflicts_retried > 0  # the race really overlapped: stale lookups conflicted
    if mode == "lookup-dv":
        assert report.snapshots_checked >= report.commits // 2
    _assert_snapshot_order(report)
    _assert_changelog_replays(report)


def test_stream_writers_and_a_compactor_process_keep_a_full_compaction_changelog_in_snapshot_order(
        tmp_path: Path) -> None:
    """Stream writers compacting fully every other commit (`full-compaction.delta-commits` = 2)
    and a compactor process: each full compaction's changelog is the difference from the top
    level it compacted, so a late one loses (its data is re-sequenced and lands) instead of
    committing changes against a stale top level."""
    report = run_race(tmp_path, "full-compaction", writers=3, rounds=8)
    assert report.commits == 24
    assert report.resequenced_commits > 0  # the race really overlapped
    assert report.compactions > 0
    _assert_snapshot_order(report)
    _assert_changelog_replays(report)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["lookup", "lookup-dv", "lookup-dynamic", "lookup-cross-partition",
                                  "full-compaction"])
def test_five_writer_processes_for_forty_rounds_keep_the_changelog_in_snapshot_order(
        tmp_path: Path, mode: str) -> None:
    report = run_race(tmp_path, mode, writers=5, rounds=40, keys=20)
    assert report.commits == 5 * 40
    _assert_snapshot_order(report)
    _assert_changelog_replays(report)
