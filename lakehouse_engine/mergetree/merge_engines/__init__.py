"""Paimon's partial-update and aggregation merge engines, vectorised over key groups.

`mergetree.merge.merge_records` dispatches here; deduplicate and first-row stay there as row
selections. Modules: `ordering` (row kinds, merge order), `groups` (key groups and per-group
primitives), `merge_options` (parsing and create-time validation), `aggregators` (the field
aggregate functions), `aggregation` and `partial_update` (the engines), `records` (assembly).
"""

from lakehouse_engine.mergetree.merge_engines.merge_options import (
    AGGREGATE_FUNCTIONS,
    MergeOptions,
    validate_merge_options,
)
from lakehouse_engine.mergetree.merge_engines.records import merge_with_engine

__all__ = ["AGGREGATE_FUNCTIONS", "MergeOptions", "merge_with_engine", "validate_merge_options"]
