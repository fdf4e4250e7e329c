"""Levels of one bucket's LSM tree: level 0 holds one sorted run per file, each higher level one run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from lakehouse_engine.format.manifest_entries import DataFileMeta


@dataclass(frozen=True)
class SortedRun:
    """Files whose key ranges do not overlap, read in order; its size is the sum of file sizes."""

    files: tuple[DataFileMeta, ...]

    @property
    def total_size(self) -> int:
        return sum(f.file_size for f in self.files)


@dataclass(frozen=True)
class LevelSortedRun:
    """A sorted run and the level it lives on."""

    level: int
    run: SortedRun


def _level0_order(f: DataFileMeta) -> tuple[int, int, int, str]:
    # Newest first, as Paimon's Levels orders level 0 (by max sequence number, descending).
    return (-f.max_sequence_number, -f.min_sequence_number, -(f.creation_time_millis or 0), f.file_name)


class Levels:
    """The files of one bucket by level (`num-levels` of them), restored from manifests or built up."""

    def __init__(self, files: Iterable[DataFileMeta], num_levels: int):
        self.num_levels = num_levels
        self.level0: list[DataFileMeta] = []
        self.levels: dict[int, list[DataFileMeta]] = {i: [] for i in range(1, num_levels)}
        self.add_files(files)

    @property
    def max_level(self) -> int:
        return self.num_levels - 1

    def add_files(self, files: Iterable[DataFileMeta]) -> None:
        for f in files:
            if f.level == 0:
                self.level0.append(f)
            else:
                if f.level >= self.num_levels:
                    # A table written with more levels: widen rather than lose files.
                    for lvl in range(self.num_levels, f.level + 1):
                        self.levels[lvl] = []
                    self.num_levels = f.level + 1
                self.levels[f.level].append(f)
        self.level0.sort(key=_level0_order)
        for lvl in self.levels:
            self.levels[lvl].sort(key=lambda f: (f.min_sequence_number, f.file_name))

    def remove_files(self, files: Iterable[DataFileMeta]) -> None:
        gone = {(f.file_name, f.level) for f in files}
        self.level0 = [f for f in self.level0 if (f.file_name, 0) not in gone]
        for lvl, fs in self.levels.items():
            self.levels[lvl] = [f for f in fs if (f.file_name, lvl) not in gone]

    def update(self, before: Iterable[DataFileMeta], after: Iterable[DataFileMeta]) -> None:
        """Apply a compaction: `before` leave their levels, `after` join theirs."""
        self.remove_files(before)
        self.add_files(after)

    def all_files(self) -> list[DataFileMeta]:
        return self.level0 + [f for lvl in sorted(self.levels) for f in self.levels[lvl]]

    def level_sorted_runs(self) -> list[LevelSortedRun]:
        """Runs from newest to oldest: each level-0 file, then levels 1.. as one run each."""
        runs = [LevelSortedRun(0, SortedRun((f,))) for f in self.level0]
        for lvl in sorted(self.levels):
            if self.levels[lvl]:
                runs.append(LevelSortedRun(lvl, SortedRun(tuple(self.levels[lvl]))))
        return runs

    def number_of_sorted_runs(self) -> int:
        return len(self.level0) + sum(1 for fs in self.levels.values() if fs)

    def non_empty_highest_level(self) -> int:
        """The highest level holding a file (-1 when the bucket is empty)."""
        for lvl in sorted(self.levels, reverse=True):
            if self.levels[lvl]:
                return lvl
        return 0 if self.level0 else -1
