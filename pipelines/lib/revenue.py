"""Daily revenue and order counts per (dt, status): the aggregate `daily_revenue` keeps in its own
Paimon table, from `shop.orders`'s changes (signed) or from its rows in full (the check).

The table uses the aggregation merge engine (`sum` on both values), so a commit of per-group
deltas adds to what the table holds: `+I`/`+U` rows add their amount and one order, `-U`/`-D`
rows subtract theirs. A group whose orders all moved away keeps a row with zero orders; the
full recompute and the comparison leave such rows out.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine import Catalog, FileStoreTable, Schema, TableNotExistError

GROUP = ("dt", "status")
REVENUE = "revenue"
ORDERS = "orders"
ROW_KIND = "_row_kind"
ADDS = ("+I", "+U")
SUBTRACTS = ("-U", "-D")
REVENUE_TYPE = pa.decimal128(22, 2)
REVENUE_SCHEMA = pa.schema([pa.field("dt", pa.string(), nullable=False),
                            pa.field("status", pa.string(), nullable=False),
                            pa.field(REVENUE, REVENUE_TYPE), pa.field(ORDERS, pa.int64())])
REVENUE_OPTIONS = {"merge-engine": "aggregation", "bucket": "1",
                   f"fields.{REVENUE}.aggregate-function": "sum", f"fields.{ORDERS}.aggregate-function": "sum"}
#: What a null status is grouped under (a primary-key field is never null).
NO_STATUS = "(none)"


def get_or_create(catalog: Catalog, identifier: str) -> FileStoreTable:
    """The revenue table, created on first use (primary key dt, status; sums aggregate)."""
    try:
        return catalog.get_table(identifier)
    except TableNotExistError:
        catalog.create_database(identifier.split(".", 1)[0], ignore_if_exists=True)
        catalog.create_table(identifier, Schema.from_pyarrow_schema(
            REVENUE_SCHEMA, primary_keys=list(GROUP), options=REVENUE_OPTIONS), ignore_if_exists=True)
        return catalog.get_table(identifier)


def _grouped(rows: pa.Table, sign: pa.Array) -> pa.Table:
    """Sum of signed amounts and signed order counts per (dt, status)."""
    status = pc.fill_null(rows.column("status"), NO_STATUS)
    amount = pc.fill_null(rows.column("amount").cast(REVENUE_TYPE), pa.scalar(0, REVENUE_TYPE))
    signed = pa.table({"dt": rows.column("dt"), "status": status,
                       REVENUE: pc.if_else(pc.less(sign, 0), pc.negate(amount), amount), ORDERS: sign})
    out = signed.group_by(list(GROUP)).aggregate([(REVENUE, "sum"), (ORDERS, "sum")])
    return pa.table({"dt": out.column("dt"), "status": out.column("status"),
                     REVENUE: out.column(f"{REVENUE}_sum").cast(REVENUE_TYPE),
                     ORDERS: out.column(f"{ORDERS}_sum").cast(pa.int64())}, schema=REVENUE_SCHEMA)


def deltas(changes: pa.Table) -> pa.Table:
    """Per (dt, status) what `changes` (with `_row_kind`) add: +I/+U add, -U/-D subtract."""
    if changes.num_rows == 0:
        return REVENUE_SCHEMA.empty_table()
    kinds = changes.column(ROW_KIND)
    sign = pc.if_else(pc.is_in(kinds, pa.array(SUBTRACTS)), -1, 1).cast(pa.int64())
    return _grouped(changes, sign)


def full_aggregate(rows: pa.Table) -> pa.Table:
    """The aggregate of every live row of `shop.orders` (groups with orders only), sorted."""
    if rows.num_rows == 0:
        return REVENUE_SCHEMA.empty_table()
    out = _grouped(rows, pa.nulls(rows.num_rows, pa.int64()).fill_null(1))
    return sort(out)


def live_groups(table: pa.Table) -> pa.Table:
    """The groups of a revenue table that hold orders, sorted: what a full recompute gives."""
    return sort(table.select(REVENUE_SCHEMA.names).cast(REVENUE_SCHEMA).filter(pc.not_equal(table.column(ORDERS), 0)))


@dataclass(frozen=True)
class Comparison:
    """A revenue table (or branch) against the aggregate recomputed from the orders in full."""

    got: pa.Table
    expected: pa.Table

    @property
    def same(self) -> bool:
        return self.got.equals(self.expected)

    @property
    def groups_differing(self) -> int:
        """The (dt, status) groups whose sums or counts differ, or that only one side has."""
        if self.same:
            return 0
        joined = self.got.join(self.expected, list(GROUP), join_type="full outer", right_suffix="_expected",
                               coalesce_keys=True)
        same = pc.and_(pc.equal(joined.column(REVENUE), joined.column(f"{REVENUE}_expected")),
                       pc.equal(joined.column(ORDERS), joined.column(f"{ORDERS}_expected")))
        return joined.num_rows - int(pc.sum(pc.fill_null(same, False).cast(pa.int64())).as_py() or 0)

    def describe(self, at: int) -> str:
        return f"{self.groups_differing} (dt, status) groups differ from the full recompute at orders snapshot {at}"


def compare_with_recompute(table: FileStoreTable, orders: FileStoreTable, at: int) -> Comparison:
    """The live groups of `table` against the aggregate of every row of `orders` at snapshot `at`."""
    return Comparison(live_groups(read_all(table)), full_aggregate(read_all(orders, at)))


def sort(table: pa.Table) -> pa.Table:
    return table.sort_by([(c, "ascending") for c in GROUP])


def counts_by_kind(changes: pa.Table) -> dict[str, int]:
    """Changes per row kind (+I, -U, +U, -D; zero for kinds absent)."""
    found = {r["values"]: r["counts"] for r in pc.value_counts(changes.column(ROW_KIND)).to_pylist()} \
        if changes.num_rows else {}
    return {kind: int(found.get(kind, 0)) for kind in ("+I", "-U", "+U", "-D")}


def read_all(table: FileStoreTable, snapshot_id: int | None = None) -> pa.Table:
    """Every live row of `table` (merged), at `snapshot_id` or its latest."""
    t = table if snapshot_id is None else table.copy({"scan.snapshot-id": str(snapshot_id)})
    rb = t.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())
