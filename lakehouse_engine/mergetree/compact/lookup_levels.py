"""A lookup compaction's values from the levels below its output (Paimon's LookupLevels as its
LookupChangelogMergeFunctionWrapper uses it).

A table that needs lookups with a merging engine is read by Paimon's LookupMergeFunction (per key
the level-0 records and only the latest record above level 0: `mergetree.lookup_merge`). So a
compaction of such a table whose output lands above level 0 writes each key's whole merged value:
a key none of its inputs above level 0 holds is merged with the key's record found in the levels
below the output (output level + 1 first, the first level holding it wins), and the output record
is that merge. The older record stays where it is (Paimon's layout: a key may sit in two levels
above 0, the upper one its merged value). A level-0 file such a compaction would move up unchanged
is rewritten instead (merged with those values), unless no level lies below the output.

The keys are looked up with `mergetree.lookup` (file key ranges prune, the lookup cache serves the
columns) one merge range at a time: memory is one range's keys and the rows matched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.mergetree.lookup import keys_held, lookup
from lakehouse_engine.schema import VALUE_KIND

__all__ = ["LevelsBelow"]

#: Reads columns of a data file (`mergetree.lookup.ReadFile`).
ReadFile = Callable[[DataFileMeta, list[str]], pa.Table]


class LevelsBelow:
    """The files below a compaction's output level, where the keys of its records that no input
    above level 0 holds are looked up."""

    def __init__(self, files: Sequence[DataFileMeta], output_level: int, read_file: ReadFile,
                 key_names: Sequence[str], read_schema: pa.Schema,
                 key_range: Callable[[DataFileMeta], tuple[Any, Any]],
                 comparable: Callable[[tuple[Any, ...]], Any]):
        """`files`: the bucket's files (those above `output_level` are looked in, level by level);
        `read_schema`: the columns a compaction merges (key and value fields, sequence, kind)."""
        below = sorted({f.level for f in files if f.level > output_level})
        self.levels = [[f for f in files if f.level == lvl] for lvl in below]
        self.read_file = read_file
        self.key_names = list(key_names)
        self.read_schema = read_schema
        self.key_range = key_range
        self.comparable = comparable

    def __bool__(self) -> bool:
        return bool(self.levels)

    def with_values_below(self, rows: pa.Table, levels: np.ndarray) -> pa.Table:
        """`rows` (a merge range's records, `levels`: per row its file's level) with, before them,
        the record found below the output of each key that has no record above level 0 among them
        (so a merge not in sequence order puts it first: it is older than every input)."""
        level0 = levels == 0
        if not level0.any():
            return rows
        keys = rows.filter(pa.array(level0)).select(self.key_names)
        keys = keys.group_by(self.key_names, use_threads=False).aggregate([])
        if not level0.all():
            upper = rows.filter(pa.array(~level0)).select(self.key_names)
            keys = keys.filter(pa.array(~keys_held(keys, upper, self.key_names)))
        if not keys.num_rows:
            return rows
        found = lookup(keys, self.levels, self.read_file, self.key_names, self.read_schema, self.key_range,
                       self.comparable, read_with_keys=[VALUE_KIND])
        if not found.old_rows.num_rows:
            return rows
        old = found.old_rows.select(rows.column_names)
        if old.schema != rows.schema:
            old = old.cast(rows.schema)
        return pa.concat_tables([old, rows])
