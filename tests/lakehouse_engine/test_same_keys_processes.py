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


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["fixed", "dynamic"])
def test_five_writer_processes_for_sixty_rounds_read_in_snapshot_order(tmp_path: Path, mode: str) -> None:
    report = run_race(tmp_path, mode, writers=5, rounds=60, keys=20)
    assert report.commits == 5 * 60  # every writer commits once per round
    assert (report.lost_rows, report.wrong_rows) == (0, 0)
    assert (report.lost_after_full_compaction, report.wrong_after_full_compaction) == (0, 0)
