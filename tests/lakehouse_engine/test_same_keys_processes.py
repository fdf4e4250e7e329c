"""Writer processes of the same keys racing: the table reads as their commits in snapshot order."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.reliability.same_key_race import run_race


@pytest.mark.parametrize("mode", ["fixed", "dynamic"])
def test_three_writer_processes_of_the_same_keys_read_in_snapshot_order(tmp_path: Path, mode: str) -> None:
    report = run_race(tmp_path, mode, writers=3, rounds=8)
    assert report.commits == 24
    assert report.resequenced_commits > 0  # the race really overlapped
    assert (report.lost_rows, report.wrong_rows) == (0, 0)
    assert (report.lost_after_full_compaction, report.wrong_after_full_compaction) == (0, 0)


@pytest.mark.parametrize("mode", ["dv", "dv-dynamic"])
def test_writer_processes_of_the_same_keys_keep_a_dv_tables_vectors_exact(tmp_path: Path, mode: str) -> None:
    """Racing commits of one bucket never lose a vector (a replaced row shows again) nor apply one
    twice (a live row goes missing): stale vectors conflict and are recomputed against what landed."""
    report = run_race(tmp_path, mode, writers=3, rounds=8)
    assert report.commits == 24
    assert report.resequenced_commits > 0  # the race really overlapped
    # A commit ends with its level 0 looked up (one compaction may settle several writers' commits).
    assert report.snapshots_checked >= report.commits // 2
    assert (report.lost_rows, report.wrong_rows) == (0, 0)
    assert (report.lost_after_full_compaction, report.wrong_after_full_compaction) == (0, 0)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["fixed", "dynamic"])
def test_five_writer_processes_for_sixty_rounds_read_in_snapshot_order(tmp_path: Path, mode: str) -> None:
    report = run_race(tmp_path, mode, writers=5, rounds=60, keys=20)
    assert report.commits == 5 * 60  # every writer commits once per round
    assert (report.lost_rows, report.wrong_rows) == (0, 0)
    assert (report.lost_after_full_compaction, report.wrong_after_full_compaction) == (0, 0)
