"""Checks on the compaction commits: rows per bucket still add up to the snapshot's record count."""

from pipelines.lib import keys
from pipelines.lib.table_checks import row_counts_check

sorted_run_compaction_row_counts = row_counts_check(keys.SORTED_RUN_COMPACTION)
full_compaction_row_counts = row_counts_check(keys.FULL_COMPACTION)
