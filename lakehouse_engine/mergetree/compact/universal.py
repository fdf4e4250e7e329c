"""Universal compaction: Paimon's picker, which decides which sorted runs of a bucket to merge.

`UniversalCompaction.pick` follows Paimon's order: (0) early full compaction by size
thresholds, (1) size amplification -> full compaction, (2) size ratio from the newest run,
(3) run count over `num-sorted-run.compaction-trigger`. Runs are given newest first.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.mergetree.compact.levels import Levels, LevelSortedRun
from lakehouse_engine.options import (
    COMPACTION_INCREMENTAL_SIZE_THRESHOLD,
    COMPACTION_MAX_SIZE_AMPLIFICATION_PERCENT,
    COMPACTION_SIZE_RATIO,
    COMPACTION_TOTAL_SIZE_THRESHOLD,
    NUM_SORTED_RUN_COMPACTION_TRIGGER,
    CoreOptions,
)


@dataclass(frozen=True)
class CompactUnit:
    """The files to compact together and the level their output goes to."""

    output_level: int
    files: tuple[DataFileMeta, ...]

    @staticmethod
    def from_level_runs(output_level: int, runs: Sequence[LevelSortedRun]) -> CompactUnit:
        return CompactUnit(output_level, tuple(f for r in runs for f in r.run.files))


class UniversalCompaction:
    """Picks a CompactUnit from a bucket's sorted runs, or None when nothing needs compacting."""

    def __init__(self, max_size_amp_percent: int = 200, size_ratio: int = 1,
                 num_run_compaction_trigger: int = 5, total_size_threshold: int | None = None,
                 incremental_size_threshold: int | None = None):
        self.max_size_amp = max_size_amp_percent
        self.size_ratio = size_ratio
        self.trigger = num_run_compaction_trigger
        self.total_size_threshold = total_size_threshold
        self.incremental_size_threshold = incremental_size_threshold

    def pick(self, num_levels: int, runs: Sequence[LevelSortedRun]) -> CompactUnit | None:
        max_level = num_levels - 1
        # 0. early full compaction: small tables, or a lot of new data above the last level.
        unit = self.pick_early_full(max_level, runs)
        if unit is not None:
            return unit
        # 1. size amplification
        unit = self.pick_for_size_amp(max_level, runs)
        if unit is not None:
            return unit
        # 2. size ratio
        unit = self.pick_for_size_ratio(max_level, runs)
        if unit is not None:
            return unit
        # 3. run count
        if len(runs) > self.trigger:
            candidate_count = len(runs) - self.trigger + 1
            return self.pick_for_size_ratio(max_level, runs, candidate_count)
        return None

    def pick_early_full(self, max_level: int, runs: Sequence[LevelSortedRun]) -> CompactUnit | None:
        if len(runs) <= 1:
            return None
        total = sum(r.run.total_size for r in runs)
        if self.total_size_threshold is not None and total < self.total_size_threshold:
            return CompactUnit.from_level_runs(max_level, runs)
        if self.incremental_size_threshold is not None:
            incremental = sum(r.run.total_size for r in runs if r.level != max_level)
            if incremental > self.incremental_size_threshold:
                return CompactUnit.from_level_runs(max_level, runs)
        return None

    def pick_for_size_amp(self, max_level: int, runs: Sequence[LevelSortedRun]) -> CompactUnit | None:
        """Full compaction when the newer runs together exceed `max-size-amplification-percent`
        of the oldest run."""
        if len(runs) < self.trigger:
            return None
        candidate_size = sum(r.run.total_size for r in runs[:-1])
        earliest_size = runs[-1].run.total_size
        if candidate_size * 100 > self.max_size_amp * earliest_size:
            return CompactUnit.from_level_runs(max_level, runs)
        return None

    def pick_for_size_ratio(self, max_level: int, runs: Sequence[LevelSortedRun],
                            candidate_count: int | None = None, force_pick: bool = False) -> CompactUnit | None:
        """Grow the candidate from the newest run while the next run is not much larger."""
        if candidate_count is None:
            if len(runs) < self.trigger:
                return None
            candidate_count = 1
        candidate_size = sum(r.run.total_size for r in runs[:candidate_count])
        for nxt in runs[candidate_count:]:
            if candidate_size * (100.0 + self.size_ratio) / 100.0 < nxt.run.total_size:
                break
            candidate_size += nxt.run.total_size
            candidate_count += 1
        if force_pick or candidate_count > 1:
            return self.create_unit(runs, max_level, candidate_count)
        return None

    @staticmethod
    def create_unit(runs: Sequence[LevelSortedRun], max_level: int, run_count: int) -> CompactUnit:
        """The output level is the level below the next run not picked (never level 0)."""
        # The level below the next run not picked (all picked: the top level).
        output_level = max_level if run_count == len(runs) else max(0, runs[run_count].level - 1)
        if output_level == 0:
            # Do not output level 0: take runs up to the next non-zero level.
            for nxt in runs[run_count:]:
                run_count += 1
                if nxt.level != 0:
                    output_level = nxt.level
                    break
        if run_count == len(runs):
            output_level = max_level
        return CompactUnit.from_level_runs(output_level, runs[:run_count])


def universal_compaction(options: CoreOptions) -> UniversalCompaction:
    """The picker configured by a table's `compaction.*` options."""
    return UniversalCompaction(
        options.require(COMPACTION_MAX_SIZE_AMPLIFICATION_PERCENT),
        options.require(COMPACTION_SIZE_RATIO),
        options.require(NUM_SORTED_RUN_COMPACTION_TRIGGER),
        options.get(COMPACTION_TOTAL_SIZE_THRESHOLD),
        options.get(COMPACTION_INCREMENTAL_SIZE_THRESHOLD),
    )


def pick_level0_up(levels: Levels) -> CompactUnit | None:
    """Every level-0 file of a bucket into ONE new sorted run, merging no run above level 0: at the
    highest empty level below the first non-empty level above 0 (the top level when level 0 is all
    there is), as Paimon's ForceUpLevel0Compaction's second branch places level 0 when it adds no
    run by size ratio. None when level 0 is empty, or when level 1 holds files (no level is free:
    the bucket's next universal compaction takes level 0 up). A `lookup` partial-update or
    aggregation table's compactor merges level 0 with the values below (`lookup_levels`)."""
    runs = levels.level_sorted_runs()
    level0 = list(itertools.takewhile(lambda r: r.level == 0, runs))
    if not level0:
        return None
    above = runs[len(level0):]
    output_level = above[0].level - 1 if above else levels.max_level
    if output_level < 1:
        return None
    return CompactUnit.from_level_runs(output_level, level0)


def pick_unit(levels: Levels, options: CoreOptions, full: bool, force_up_level0: bool = False,
              level0_only: bool = False) -> CompactUnit | None:
    """What to compact in a bucket: everything into the top level (full), or what the picker picks;
    with `force_up_level0`, when it picks nothing, all of level 0 (and the runs the size ratio
    adds) into the level below the next run: Paimon's ForceUpLevel0Compaction, which the writers
    of `changelog-producer` = lookup tables run at every commit, so that readers may skip level 0
    (Paimon's first streaming plan of such a table does). With `level0_only` (not with `full`),
    only `pick_level0_up`: level 0 into one new run, no universal pick, no run merged."""
    if level0_only and not full:
        return pick_level0_up(levels)
    runs = levels.level_sorted_runs()
    if not runs:
        return None
    if full:
        top = levels.max_level
        only_top = len(runs) == 1 and runs[0].level == top
        if only_top and all(f.delete_row_count == 0 for f in runs[0].run.files):
            return None  # already one clean sorted run at the top level
        return CompactUnit.from_level_runs(top, runs)
    picker = universal_compaction(options)
    unit = picker.pick(levels.num_levels, runs)
    if unit is None and force_up_level0:
        level0 = sum(1 for _ in itertools.takewhile(lambda r: r.level == 0, runs))
        if level0:
            unit = picker.pick_for_size_ratio(levels.num_levels - 1, runs, level0, force_pick=True)
    return unit
