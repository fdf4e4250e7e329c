"""`make run`: generate sample order events, write them into a Paimon table, print what landed.

This is the engine path on its own (no Spark, no Dagster): a fresh `shop.orders` table in the
warehouse, one commit per batch of events, then a summary read from the table's metadata and a
merged read checked against an independent model of the events.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine import Catalog, Schema
from pipelines.sample_data import (
    EVENT_SCHEMA,
    PARTITION_KEY,
    PRIMARY_KEY,
    ROWKIND,
    apply_to_model,
    generate_order_events,
)

TABLE = "shop.orders"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", default=os.environ.get("LAKEHOUSE_WAREHOUSE", "./warehouse"))
    parser.add_argument("--days", type=int, default=3)
    parser.add_argument("--rows-per-day", type=int, default=50_000)
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    catalog = Catalog(args.warehouse)
    catalog.create_database("shop", ignore_if_exists=True)
    catalog.drop_table(TABLE, ignore_if_not_exists=True)
    catalog.create_table(TABLE, Schema.from_pyarrow_schema(
        EVENT_SCHEMA, partition_keys=[PARTITION_KEY], primary_keys=list(PRIMARY_KEY),
        options={"bucket": str(args.buckets), "rowkind.field": ROWKIND}))
    table = catalog.get_table(TABLE)

    batches = generate_order_events(days=args.days, rows_per_day=args.rows_per_day, seed=args.seed)
    started = time.perf_counter()
    events = 0
    for batch in batches:
        wb = table.new_batch_write_builder()
        write, commit = wb.new_write(), wb.new_commit()
        write.write_arrow(batch)
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()
        events += batch.num_rows
    elapsed = time.perf_counter() - started

    snapshot = table.latest_snapshot()
    assert snapshot is not None
    print(f"table {TABLE} at {os.path.abspath(args.warehouse)}")
    print(f"wrote {events:,} events in {len(batches)} commits, {elapsed:.2f} s "
          f"({events / max(elapsed, 1e-9):,.0f} events/s); latest snapshot {snapshot.id} "
          f"({snapshot.commit_kind}), {snapshot.total_record_count:,} records in files")

    per_bucket: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0, 0])
    codec = table.partition_codec()
    for e in table.manifest_io().live_entries(snapshot):
        stats = per_bucket[(codec.from_binary(e.partition).path_string(), e.bucket)]
        stats[0] += e.file.row_count
        stats[1] += 1
        stats[2] += e.file.file_size
    print(f"\n{'partition':<16}{'bucket':>7}{'records':>10}{'files':>7}{'bytes':>11}")
    for (partition, bucket), (records, files, size) in sorted(per_bucket.items()):
        print(f"{partition:<16}{bucket:>7}{records:>10,}{files:>7}{size:>11,}")

    rb = table.new_read_builder()
    merged = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    counts = merged.group_by(PARTITION_KEY).aggregate([(PARTITION_KEY, "count")]).sort_by(PARTITION_KEY)
    print("\nmerged rows per partition: " + ", ".join(
        f"{d}={n:,}" for d, n in zip(counts.column(0).to_pylist(), counts.column(1).to_pylist(), strict=True)))
    expected = apply_to_model(batches)
    got = merged.select(expected.column_names).sort_by([(k, "ascending") for k in PRIMARY_KEY])
    ok = got.num_rows == expected.num_rows and got.cast(expected.schema).equals(expected)
    deleted = int(pc.sum(pc.equal(pa.concat_tables(batches).column(ROWKIND), "-D")).as_py() or 0)
    print(f"model check: {'OK' if ok else 'MISMATCH'} ({got.num_rows:,} rows; {deleted:,} delete events applied)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
