"""The universal compaction picker, one rule at a time, with runs posed as Paimon's tests pose them."""

from __future__ import annotations

from lakehouse_engine.format.manifest_entries import DataFileMeta, SimpleStats
from lakehouse_engine.mergetree.compact.levels import Levels, LevelSortedRun, SortedRun
from lakehouse_engine.mergetree.compact.universal import (
    CompactUnit,
    UniversalCompaction,
    pick_level0_up,
)

_counter = iter(range(10**9))


def run(level: int, size: int) -> LevelSortedRun:
    n = next(_counter)
    f = DataFileMeta(f"f{n}", size, 1, b"", b"", SimpleStats.EMPTY, SimpleStats.EMPTY, n, n, 0, level)
    return LevelSortedRun(level, SortedRun((f,)))


def levels(*lvls: int) -> list[LevelSortedRun]:
    return [run(lvl, 1) for lvl in lvls]


def sizes_after(unit: CompactUnit | None, runs: list[LevelSortedRun]) -> list[int]:
    """Run sizes after applying `unit` (picked runs replaced by one run of their total size)."""
    if unit is None:
        return [r.run.total_size for r in runs]
    picked = {f.file_name for f in unit.files}
    rest = [r.run.total_size for r in runs if r.run.files[0].file_name not in picked]
    merged = sum(f.file_size for f in unit.files)
    n_picked = sum(1 for r in runs if r.run.files[0].file_name in picked)
    return [merged] + rest if n_picked else rest


def test_output_level_is_below_the_next_run_and_never_zero() -> None:
    picker = UniversalCompaction(25, 1, 3)
    runs = levels(0, 0, 1, 3, 4)
    assert [picker.create_unit(runs, 5, n).output_level for n in (1, 2, 3, 4, 5)] == [1, 1, 2, 3, 5]


def test_output_level_skips_over_level_zero_runs() -> None:
    picker = UniversalCompaction(25, 1, 3)
    unit = picker.create_unit(levels(0, 0, 0, 2, 4), 5, 1)
    assert unit.output_level == 2 and len(unit.files) == 4
    # Swallowing every run makes it a full compaction: the output goes to the top level.
    everything = picker.create_unit(levels(0, 0, 0, 2), 5, 1)
    assert everything.output_level == 5 and len(everything.files) == 4


def test_rule_1_size_amplification_triggers_full_compaction() -> None:
    picker = UniversalCompaction(max_size_amp_percent=25, size_ratio=0, num_run_compaction_trigger=1)
    sizes = [1]
    history = []
    for _ in range(6):
        runs = [run(0, 1)] + [run(5, s) for s in sizes]  # a new level-0 run on top of the rest
        unit = picker.pick_for_size_amp(5, runs)
        if unit is not None:
            assert unit.output_level == 5 and len(unit.files) == len(runs)
        sizes = sizes_after(unit, runs)
        history.append(sizes)
    # 1+1 > 25% -> [2]; 1 > 25% of 2 -> [3]; [4]; 1 is 25% of 4: no -> [1, 4]; 2 > 25% of 4 -> [6]
    assert history[:5] == [[2], [3], [4], [1, 4], [6]]


def test_rule_1_needs_at_least_the_trigger_run_count() -> None:
    picker = UniversalCompaction(25, 1, 5)
    assert picker.pick_for_size_amp(5, [run(0, 100), run(5, 1)]) is None


def test_rule_2_size_ratio_grows_the_candidate_from_the_newest_run() -> None:
    picker = UniversalCompaction(max_size_amp_percent=200, size_ratio=1, num_run_compaction_trigger=5)
    runs = [run(0, 1), run(0, 1), run(0, 1), run(0, 1), run(3, 100)]
    unit = picker.pick_for_size_ratio(5, runs)
    assert unit is not None
    # 1, 2, 3 each within 101% of the next run: the four small runs; 4 * 1.01 < 100 stops.
    assert len(unit.files) == 4 and unit.output_level == 2
    assert picker.pick_for_size_ratio(5, runs[:4]) is None  # fewer runs than the trigger


def test_rule_2_no_pick_when_the_newest_run_is_already_small_relative_to_the_next() -> None:
    picker = UniversalCompaction(200, 1, 3)
    runs = [run(0, 1), run(1, 10), run(2, 100)]
    assert picker.pick_for_size_ratio(5, runs) is None


def test_rule_3_run_count_above_the_trigger_forces_a_pick() -> None:
    picker = UniversalCompaction(max_size_amp_percent=10_000, size_ratio=0, num_run_compaction_trigger=3)
    runs = [run(0, 1), run(0, 10), run(0, 100), run(3, 1000), run(5, 100_000)]
    assert picker.pick_for_size_ratio(5, runs) is None  # rule 2 alone would not pick
    unit = picker.pick(6, runs)
    assert unit is not None
    # 5 runs > trigger 3: candidate count 5 - 3 + 1 = 3 newest runs, output below the next run.
    assert len(unit.files) == 3 and unit.output_level == 3 - 1


def test_pick_order_prefers_size_amplification() -> None:
    picker = UniversalCompaction(max_size_amp_percent=200, size_ratio=1, num_run_compaction_trigger=3)
    runs = [run(0, 5), run(0, 5), run(5, 4)]
    unit = picker.pick(6, runs)
    assert unit is not None and unit.output_level == 5 and len(unit.files) == 3


def test_nothing_to_do_below_the_trigger() -> None:
    picker = UniversalCompaction(200, 1, 5)
    assert picker.pick(6, [run(0, 1), run(0, 1), run(5, 100)]) is None


def test_early_full_compaction_by_total_size() -> None:
    picker = UniversalCompaction(200, 1, 5, total_size_threshold=1000)
    unit = picker.pick(6, [run(0, 10), run(5, 100)])
    assert unit is not None and unit.output_level == 5
    assert UniversalCompaction(200, 1, 5, total_size_threshold=50).pick(6, [run(0, 10), run(5, 100)]) is None


def test_early_full_compaction_by_incremental_size() -> None:
    picker = UniversalCompaction(200, 1, 5, incremental_size_threshold=15)
    unit = picker.pick(6, [run(0, 10), run(0, 10), run(5, 1000)])
    assert unit is not None and unit.output_level == 5 and len(unit.files) == 3


def _levels_of(*runs: LevelSortedRun, num_levels: int = 6) -> Levels:
    return Levels([f for r in runs for f in r.run.files], num_levels)


def test_level0_up_takes_every_level0_file_into_one_run_below_the_first_run_above_it() -> None:
    new, newer, above = run(0, 5), run(0, 1), run(3, 1)  # sizes the universal pick would merge
    unit = pick_level0_up(_levels_of(new, newer, above))
    assert unit is not None and unit.output_level == 2
    assert {f.file_name for f in unit.files} == {new.run.files[0].file_name, newer.run.files[0].file_name}


def test_level0_up_goes_to_the_top_level_of_a_bucket_with_nothing_above_level0() -> None:
    unit = pick_level0_up(_levels_of(run(0, 1), num_levels=3))
    assert unit is not None and unit.output_level == 2


def test_level0_up_picks_nothing_without_level0_or_without_a_free_level() -> None:
    assert pick_level0_up(_levels_of(run(1, 1), run(4, 1))) is None
    assert pick_level0_up(_levels_of(run(0, 1), run(1, 1), run(5, 1))) is None
