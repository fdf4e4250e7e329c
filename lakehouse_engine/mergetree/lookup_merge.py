"""Paimon's LookupMergeFunction: how a table that needs lookups merges a key's records.

Paimon 0.9 (Java) merges the records of a table that "needs lookup" (`changelog-producer` =
lookup, or `force-lookup`; deletion-vector tables too, but their rows above level 0 are unique
once their vectors apply) with its merge engine wrapped in LookupMergeFunction: per key it keeps
the level-0 records and only the LATEST record above level 0 (the last in merge order: key,
`sequence.field`, sequence number), and merges those. Its lookup compaction writes each output
record merged with the key's value looked up in the levels below the output, so the newest record
above level 0 is the key's whole merged value and the older ones above it must not count again.

For the deduplicate engine the rule changes nothing (the latest record wins anyway), and
first-row Java does not wrap; for partial-update and aggregation it decides the result as soon
as a key sits in two levels above 0 (Java's own tables: a level-4 merged value beside the level-5
older one). Every path here that merges a bucket's files (merge-on-read, compaction, the lookup
of old values for the lookup changelog, diff reads) applies it through `latest_above_level0_mask` (`MergeFunction.lookup_candidates`),
given which records come from files above level 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from lakehouse_engine.mergetree.merge_engines.ordering import key_change_mask, merge_sort_indices
from lakehouse_engine.options import CHANGELOG_PRODUCER, FORCE_LOOKUP, MERGE_ENGINE, CoreOptions
from lakehouse_engine.schema import SEQUENCE_NUMBER

__all__ = ["MERGING_ENGINES", "latest_above_level0_mask", "needs_lookup_merge", "row_levels"]

#: The merge engines whose merged value the rule changes (they build a record from several).
MERGING_ENGINES = ("partial-update", "aggregation")


def needs_lookup_merge(options: CoreOptions) -> bool:
    """Whether merges of the table's files keep per key only the latest record above level 0
    (Paimon's `needLookup()` with a merging engine; deletion-vector tables apart: their vectors
    leave one live record per key above level 0 already)."""
    if options.require(MERGE_ENGINE) not in MERGING_ENGINES or options.deletion_vectors_enabled():
        return False
    # (`force-lookup`: Paimon's table that needs lookups without a lookup changelog)
    return options.require(CHANGELOG_PRODUCER) == "lookup" or bool(options.require(FORCE_LOOKUP))


def row_levels(row_counts: Sequence[int], levels: Sequence[int]) -> np.ndarray:
    """Per row of files concatenated (`row_counts` rows each, at `levels`): its file's level."""
    return np.repeat(np.asarray(levels, dtype=np.int64), np.asarray(row_counts, dtype=np.int64))


def latest_above_level0_mask(table: pa.Table, levels: np.ndarray, key_names: Sequence[str],
                             sequence_fields: Sequence[str] = (), sequence_descending: bool = False,
                             rows_in_sequence_order: bool = False) -> np.ndarray | None:
    """The records of `table` LookupMergeFunction takes, as a mask (None: all of them): the
    records above level 0 (`levels`: per row, its file's level) but the latest of their key in
    merge order go, the level-0 records stay. `table` holds the key columns, the sequence fields
    and `_SEQUENCE_NUMBER` unless `rows_in_sequence_order` (rows already in sequence order).

    Two records of a key above level 0 with equal sequence (Java's lookup compaction gives a
    merged record the sequence number of the value it looked up when the new record does not
    advance it, e.g. a partial-update retraction) are ordered by level: the lower level, written
    later, is the latest.
    """
    above = levels > 0
    upper = np.flatnonzero(above)
    if len(upper) < 2 or levels[upper].min() == levels[upper].max():
        return None  # one level above 0: no key twice there
    columns = list(key_names) + [f for f in sequence_fields if f not in key_names]
    in_order = rows_in_sequence_order
    if SEQUENCE_NUMBER in table.column_names:
        columns.append(SEQUENCE_NUMBER)
        # Highest level first: a stable sort by (key, sequence) then puts the lower level last.
        upper = upper[np.argsort(-levels[upper], kind="stable")]
        in_order = False
    sub = table.select(columns).take(pa.array(upper))
    order = merge_sort_indices(sub, key_names, sequence_fields, sequence_descending, in_order)
    last = key_change_mask(sub, key_names, order)
    if last.all():
        return None  # no key twice above level 0
    keep = ~above
    keep[upper[order[last]]] = True
    return keep
