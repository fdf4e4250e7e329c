"""One record per key above level 0 for the merging engines of tables that need lookups.

Paimon 0.9 (Java) reads a table that needs lookups (`changelog-producer` = lookup, or `force-lookup`) with its
LookupMergeFunction: per key the level-0 records and only the LATEST record above level 0, taken for
the key's whole merged value (its lookup compaction writes each output record merged with the value
it looked up). Our read merges every level. For the deduplicate engine both agree (the latest record
wins); for partial-update and aggregation they agree only while no key sits in two levels above 0.
So every compaction of such a table whose output lands above level 0 also merges each file above
level 0 whose key range overlaps its files (again, until none is left), and its output goes to the
highest level it merges: a key is then in at most one level above 0. The cost is write
amplification: a level-0 file's compaction rewrites the older files holding its key range.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lakehouse_engine.mergetree.changelog import changelog_producer
from lakehouse_engine.mergetree.compact.levels import Levels
from lakehouse_engine.mergetree.compact.universal import CompactUnit
from lakehouse_engine.mergetree.interval_partition import interval_partition
from lakehouse_engine.options import MERGE_ENGINE, CoreOptions

#: The merge engines whose merged value Java's LookupMergeFunction would take from one level alone.
MERGING_ENGINES = ("partial-update", "aggregation")


def joins_runs_above_level0(options: CoreOptions) -> bool:
    """Whether a compaction of the table must merge the overlapping files above level 0 into its
    output (a `lookup` changelog table, or one with `force-lookup`, which Java reads the same way,
    with a merging engine; see the module)."""
    needs_lookup = changelog_producer(options) == "lookup" or _force_lookup(options)
    return needs_lookup and options.require(MERGE_ENGINE) in MERGING_ENGINES


def _force_lookup(options: CoreOptions) -> bool:
    """Paimon's `force-lookup` (stored here, type-checked as a boolean): Java then reads the table
    with its LookupMergeFunction too."""
    return options.raw.get("force-lookup", "false").strip().lower() == "true"


def join_overlapping_above_level0(levels: Levels, unit: CompactUnit,
                                  key_of: Callable[[bytes], tuple[Any, ...]]) -> CompactUnit:
    """`unit` with every file above level 0 whose key range overlaps one of its files (repeated
    until none is left: the unit's sections of overlapping files, Paimon's IntervalPartition), its
    output at the highest level among them; `unit` itself when its output is level 0 or no other
    file overlaps."""
    if unit.output_level == 0:
        return unit
    picked = {(f.file_name, f.level) for f in unit.files}
    others = [f for f in levels.all_files() if f.level > 0 and (f.file_name, f.level) not in picked]
    if not others:
        return unit
    joined = [f for section in interval_partition(list(unit.files) + others, key_of)
              if any((f.file_name, f.level) in picked for f in section)
              for f in section if (f.file_name, f.level) not in picked]
    if not joined:
        return unit
    output_level = max([unit.output_level] + [f.level for f in joined])
    return CompactUnit(output_level, unit.files + tuple(joined))
