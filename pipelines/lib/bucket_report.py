"""What every asset and check shows of a table's buckets, and how a commit changed them.

Rows, files and sorted runs per (partition, bucket) from `table.bucket_stats()` (manifests only),
as a markdown table, Dagster table metadata and a markdown bar chart, with numeric summaries
Dagster plots across materializations; and the before/after diff of a maintenance commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine import POSTPONE_BUCKET, FileStoreTable
from pipelines.lib.partitions import names

_CHART_WIDTH = 24  # narrow enough that the UI's metadata panel shows each bar's number unclipped
_CHART_MAX_LINES = 64


@dataclass(frozen=True)
class BucketRow:
    """One (partition, bucket) of `table.bucket_stats()`."""

    partition: str
    bucket: int
    total_buckets: int
    records: int
    files: int
    sorted_runs: int
    size_bytes: int

    @property
    def label(self) -> str:
        return bucket_label(self.partition, self.bucket)


def bucket_label(partition: str, bucket: int) -> str:
    """`dt=2026-11-21/3`, or `dt=2026-11-21/postpone` for bucket-postpone."""
    return f"{partition}/{'postpone' if bucket == POSTPONE_BUCKET else bucket}"


def bucket_rows(table: FileStoreTable, dts: Iterable[str] | None = None) -> list[BucketRow]:
    """The table's (partition, bucket) statistics, of the given days only when `dts` is set."""
    stats = table.bucket_stats()
    if dts is not None:
        stats = stats.filter(pc.is_in(stats.column("partition"),
                                      pa.array(names(dts))))
    return [BucketRow(r["partition"], r["bucket"], r["total_buckets"], r["record_count"],
                      r["file_count"], r["sorted_runs"], r["size_bytes"]) for r in stats.to_pylist()]


def buckets_markdown(rows: Sequence[BucketRow]) -> str:
    """Rows, files, sorted runs and bytes per bucket as a markdown table."""
    if not rows:
        return "The table has no data files yet."
    lines = ["| partition | bucket | rows | files | sorted runs | bytes |", "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        bucket = "postpone" if r.bucket == POSTPONE_BUCKET else str(r.bucket)
        lines.append(f"| {r.partition} | {bucket} | {r.records:,} | {r.files} | {r.sorted_runs} | {r.size_bytes:,} |")
    return "\n".join(lines)


BUCKETS_TABLE_SCHEMA = dg.TableSchema(columns=[
    dg.TableColumn("partition", "string"), dg.TableColumn("bucket", "string"),
    dg.TableColumn("rows", "int", description="records in the bucket's live files, before merging"),
    dg.TableColumn("files", "int"), dg.TableColumn("sorted_runs", "int"),
    dg.TableColumn("bytes", "int")])


def buckets_table(rows: Sequence[BucketRow]) -> dg.TableMetadataValue:
    """Rows, files, sorted runs and bytes per (partition, bucket) as Dagster table metadata."""
    return dg.MetadataValue.table(
        [dg.TableRecord({"partition": r.partition, "bucket": "postpone" if r.bucket == POSTPONE_BUCKET else str(r.bucket),
                         "rows": r.records, "files": r.files, "sorted_runs": r.sorted_runs,
                         "bytes": r.size_bytes}) for r in rows],
        schema=BUCKETS_TABLE_SCHEMA)


def bar_chart_markdown(values: Sequence[tuple[str, int]], unit: str = "rows") -> str:
    """A horizontal bar chart in a markdown code block, one bar per label."""
    if not values:
        return "Nothing to chart."
    top = max(v for _, v in values) or 1
    width = max(len(label) for label, _ in values[:_CHART_MAX_LINES])
    lines = []
    for label, value in values[:_CHART_MAX_LINES]:
        bar = "█" * max(1 if value else 0, round(_CHART_WIDTH * value / top))
        lines.append(f"{label:<{width}}  {bar:<{_CHART_WIDTH}}  {value:,}")
    if len(values) > _CHART_MAX_LINES:
        lines.append(f"... and {len(values) - _CHART_MAX_LINES} more")
    return f"{unit} per bucket\n```\n" + "\n".join(lines) + "\n```"


def skew(records: Sequence[int]) -> float:
    """Largest over mean of the row counts (1.0 when even; 0.0 without rows)."""
    total = sum(records)
    return max(records) * len(records) / total if total else 0.0


def bucket_metadata(rows: Sequence[BucketRow]) -> dict[str, Any]:
    """Rows per bucket as a table and a chart, sorted runs per bucket, and numbers to plot."""
    real = [r for r in rows if r.bucket != POSTPONE_BUCKET]
    counts = [r.records for r in real]
    return {
        "rows_per_bucket": buckets_table(rows),
        "rows_per_bucket_chart": dg.MetadataValue.md(bar_chart_markdown([(r.label, r.records) for r in rows])),
        "sorted_runs_per_bucket": dg.MetadataValue.md(
            bar_chart_markdown([(r.label, r.sorted_runs) for r in rows], unit="sorted runs")),
        "buckets": len(real),
        "max_rows_in_a_bucket": max(counts, default=0),
        "mean_rows_per_bucket": float(round(sum(counts) / len(counts), 1)) if counts else 0.0,
        "bucket_skew": float(round(skew(counts), 3)) if counts else 0.0,
        "max_sorted_runs": max((r.sorted_runs for r in rows), default=0),
        "rows_in_postpone_bucket": sum(r.records for r in rows if r.bucket == POSTPONE_BUCKET),
    }


def buckets_over_trigger(rows: Iterable[BucketRow], trigger: int) -> list[BucketRow]:
    """Real buckets holding more sorted runs than `num-sorted-run.compaction-trigger`."""
    return [r for r in rows if r.bucket != POSTPONE_BUCKET and r.sorted_runs > trigger]


# ---- before and after a commit ------------------------------------------------------------------
BucketKey = tuple[str, int]


def by_bucket(rows: Iterable[BucketRow]) -> dict[BucketKey, BucketRow]:
    """The rows keyed by (partition, bucket)."""
    return {(r.partition, r.bucket): r for r in rows}


def changed_buckets(before: Mapping[BucketKey, BucketRow], after: Mapping[BucketKey, BucketRow]) -> list[BucketKey]:
    """The (partition, bucket)s whose files, sorted runs, records or bytes differ between two
    reports (new, changed or gone), sorted. A file rewritten to the same shape shows in none of
    these: `table.files_added` of the commit names every bucket a compaction rewrote."""
    keys = set(before) | set(after)
    return sorted(k for k in keys if k not in before or k not in after
                  or (after[k].files, after[k].sorted_runs, after[k].records, after[k].size_bytes)
                  != (before[k].files, before[k].sorted_runs, before[k].records, before[k].size_bytes))


def changes_markdown(before: Mapping[BucketKey, BucketRow], after: Mapping[BucketKey, BucketRow],
                     empty: str = "Nothing changed.") -> str:
    """Sorted runs, files and rows in files per changed bucket, before -> after, as a markdown table."""
    changed = changed_buckets(before, after)
    if not changed:
        return empty
    lines = ["| partition | bucket | sorted runs | files | rows in files |", "|---|---:|---|---|---|"]
    for key in changed:
        b, a = before.get(key), after.get(key)
        lines.append(f"| {key[0]} | {bucket_text(key[1])} | {b.sorted_runs if b else 0} → {a.sorted_runs if a else 0} | "
                     f"{b.files if b else 0} → {a.files if a else 0} | "
                     f"{b.records if b else 0:,} → {a.records if a else 0:,} |")
    return "\n".join(lines)


def bucket_text(bucket: int) -> str:
    """A bucket number as shown: `postpone` for bucket-postpone."""
    return "postpone" if bucket == POSTPONE_BUCKET else str(bucket)
