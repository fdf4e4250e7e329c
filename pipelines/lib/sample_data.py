"""Deterministic, vectorised sample order-event data and its expected merged state.

Only numpy and pyarrow are used here (no Dagster, no Spark), so the engine tests, the
benchmarks and the pipelines can all share it.

Each day ``dt`` gets ``rows_per_day`` candidate events, split into ``batches_per_day``
consecutive Arrow tables:

* ``+I`` inserts of new orders (order ids are unique across the whole run);
* ``+U`` updates of an order inserted *earlier the same day*; which order is chosen is
  skewed (half uniform, half Zipf-like over the day's insertion order), so a few orders
  are updated hundreds of times while most get zero or one update;
* ``-D`` deletes of an order inserted earlier the same day.  Events for an order that
  would follow its delete are dropped, so a deleted order stays deleted (this is why a
  day can hold slightly fewer than ``rows_per_day`` events).

``updated_at`` strictly increases with the event position within a day, so "the last
event wins" and "the greatest ``updated_at`` wins" agree per key.

Schema evolution: with ``coupons_from`` set, the days from that date on carry one more column,
``coupon_code`` (a nullable string, :data:`EVOLUTION_FIELDS`), and older days lack it, as a
source system that starts sending a new field does. The coupons come from their own random
stream, so every other column is the same with or without them.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.lib.events import (
    CONTRACT_SCHEMA,
    COUPON_CODE,
    EVENT_SCHEMA,
    EVOLUTION_FIELDS,
    ORDER_SCHEMA,
    PARTITION_KEY,
    PRIMARY_KEY,
    ROWKIND,
)

INSERT, UPDATE, DELETE = "+I", "+U", "-D"
_KIND_NAMES = np.array([INSERT, UPDATE, DELETE], dtype=object)
_KIND_PROBS = (0.70, 0.27, 0.03)
_UPDATE_STATUSES = np.array(["paid", "packed", "shipped", "delivered", "returned"], dtype=object)
_UPDATE_STATUS_PROBS = (0.35, 0.25, 0.2, 0.15, 0.05)
_COUPONS = np.array(["WELCOME10", "AUTUMN25", "FREESHIP", "VIP-5", "BLACKFRIDAY"], dtype=object)
_COUPON_SHARE = 0.2  # of the events of a day with coupons
_FIRST_ORDER_ID = 100_000_000
_ZIPF_A = 1.3


def _customer_pool(n: int) -> pa.Array:
    """``n`` distinct 20-character customer names ``customer-00000000042``."""
    digits = pc.utf8_lpad(pa.array(np.arange(n, dtype=np.int64)).cast(pa.string()), 11, "0")
    return pc.binary_join_element_wise("customer-", digits, "")


def _decimal_from_cents(cents: np.ndarray, precision: int = 12, scale: int = 2) -> pa.Array:
    """Exact DECIMAL(precision, scale) array from int64 unscaled values (little-endian 128-bit)."""
    cents = np.ascontiguousarray(cents, dtype=np.int64)
    words = np.empty((len(cents), 2), dtype="<i8")
    words[:, 0] = cents
    words[:, 1] = np.where(cents < 0, -1, 0)
    return pa.Array.from_buffers(
        pa.decimal128(precision, scale), len(cents), [None, pa.py_buffer(words.tobytes())]
    )


def _day_events(
    rng: np.random.Generator,
    n: int,
    dt: datetime.date,
    first_order_id: int,
    customers: pa.Array,
) -> tuple[pa.Table, int]:
    """One day's events as a single table, and the number of orders inserted that day."""
    kinds = rng.choice(3, size=n, p=_KIND_PROBS).astype(np.int8)
    kinds[0] = 0  # the first event of a day must be an insert
    pos = np.arange(n, dtype=np.int64)
    is_ins = kinds == 0
    inserts_before = np.cumsum(is_ins) - is_ins  # inserts strictly before each position
    n_ins = int(is_ins.sum())

    # Which insert (by insertion rank within the day) each event refers to.
    key_rank = inserts_before.copy()
    upd = np.flatnonzero(kinds == 1)
    dele = np.flatnonzero(kinds == 2)
    avail_upd = inserts_before[upd]  # >= 1 because position 0 is an insert
    uniform = np.floor(rng.random(len(upd)) * avail_upd).astype(np.int64)
    zipf = (rng.zipf(_ZIPF_A, size=len(upd)) - 1) % avail_upd
    key_rank[upd] = np.where(rng.random(len(upd)) < 0.5, uniform, zipf)
    key_rank[dele] = np.floor(rng.random(len(dele)) * inserts_before[dele]).astype(np.int64)

    # A key's first delete ends its life: drop every later event for that key.
    delete_pos = np.full(n_ins, n, dtype=np.int64)
    np.minimum.at(delete_pos, key_rank[dele], pos[dele])
    keep = pos <= delete_pos[key_rank]

    # Per-order attributes: shuffled ids (insertion order != id order) and a skewed customer.
    rank_to_id = first_order_id + rng.permutation(n_ins).astype(np.int64)
    rank_to_customer = np.floor(len(customers) * rng.random(n_ins) ** 2).astype(np.int64)

    # Per-event attributes.
    amount_cents = np.round(rng.lognormal(mean=8.0, sigma=1.0, size=n)).astype(np.int64) + 1
    amount_cents = np.minimum(amount_cents, 10**10 - 1)  # fits DECIMAL(12, 2)
    quantity = (np.minimum(rng.geometric(0.35, size=n), 50)).astype(np.int32)
    status = _UPDATE_STATUSES[rng.choice(len(_UPDATE_STATUSES), size=n, p=_UPDATE_STATUS_PROBS)]
    status[is_ins] = "created"
    status[kinds == 2] = "cancelled"
    day_start_us = int((dt - datetime.date(1970, 1, 1)).days) * 86_400 * 1_000_000
    step_us = max(1, 86_400 * 1_000_000 // max(n, 1))
    jitter = rng.integers(0, max(1, step_us // 2), size=n, dtype=np.int64)
    updated_at = day_start_us + pos * step_us + jitter

    idx = np.flatnonzero(keep)
    ranks = key_rank[idx]
    table = pa.Table.from_arrays(
        [
            pa.array(rank_to_id[ranks], type=pa.int64()),
            pa.array(np.full(len(idx), dt.isoformat(), dtype=object), type=pa.string()),
            customers.take(pa.array(rank_to_customer[ranks])),
            _decimal_from_cents(amount_cents[idx]),
            pa.array(quantity[idx], type=pa.int32()),
            pa.array(status[idx], type=pa.string()),
            pa.array(updated_at[idx], type=pa.int64()).cast(pa.timestamp("us")),
            pa.array(_KIND_NAMES[kinds[idx]], type=pa.string()),
        ],
        schema=EVENT_SCHEMA,
    )
    return table, n_ins


def _with_coupons(day_table: pa.Table, seed: int, day: int) -> pa.Table:
    """The day's events with a ``coupon_code`` column: a coupon on about a fifth of them."""
    rng = np.random.default_rng([seed, day, 0xC0])  # its own stream: other columns unchanged
    n = day_table.num_rows
    has = rng.random(n) < _COUPON_SHARE
    codes = _COUPONS[rng.integers(0, len(_COUPONS), size=n)]
    return day_table.append_column(EVOLUTION_FIELDS[0], pa.array(codes, pa.string(), mask=~has))


def generate_order_events(
    days: int = 3,
    rows_per_day: int = 20_000,
    seed: int = 7,
    start: datetime.date = datetime.date(2026, 11, 1),
    batches_per_day: int = 4,
    coupons_from: datetime.date | None = None,
) -> list[pa.Table]:
    """Order events (schema :data:`EVENT_SCHEMA`) as ``days * batches_per_day`` Arrow tables.

    Days on or after ``coupons_from`` (when set) also carry ``coupon_code`` (schema
    :data:`CONTRACT_SCHEMA`). Fully determined by the arguments; see the module docstring.
    """
    if days < 0 or rows_per_day < 0:
        raise ValueError("days and rows_per_day must be non-negative")
    if batches_per_day < 1:
        raise ValueError("batches_per_day must be >= 1")
    rng = np.random.default_rng(seed)
    customers = _customer_pool(max(100, rows_per_day // 10))
    batches: list[pa.Table] = []
    next_order_id = _FIRST_ORDER_ID
    for day in range(days):
        dt = start + datetime.timedelta(days=day)
        if rows_per_day == 0:
            day_table = EVENT_SCHEMA.empty_table()
        else:
            day_table, n_ins = _day_events(rng, rows_per_day, dt, next_order_id, customers)
            next_order_id += n_ins
        if coupons_from is not None and dt >= coupons_from:
            day_table = _with_coupons(day_table, seed, day)
        bounds = np.linspace(0, day_table.num_rows, batches_per_day + 1).astype(np.int64)
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            batches.append(day_table.slice(int(lo), int(hi - lo)))
    return batches


def apply_to_model(batches: Sequence[pa.Table]) -> pa.Table:
    """The expected merged table: per (order_id, dt) the last event wins, unless it is ``-D``.

    Events are ordered by batch, then by position within the batch.  The result has
    :data:`ORDER_SCHEMA` (no ``_rowkind``), plus the evolution columns any batch carries (null
    in the rows of batches without them), and is sorted by ``(order_id, dt)``.
    """
    evolved = [f for f in EVOLUTION_FIELDS if any(f.name in b.column_names for b in batches if b.num_rows)]
    event_schema = pa.schema([*EVENT_SCHEMA, *evolved])
    order_schema = pa.schema([*ORDER_SCHEMA, *evolved])
    tables = [_with_nulls(b, event_schema) for b in batches if b.num_rows]
    if not tables:
        return ORDER_SCHEMA.empty_table()
    events = pa.concat_tables(tables).combine_chunks()
    n = events.num_rows
    events = events.append_column("__seq", pa.array(np.arange(n, dtype=np.int64)))
    events = events.sort_by(
        [("order_id", "ascending"), ("dt", "ascending"), ("__seq", "ascending")]
    ).combine_chunks()

    last = np.ones(n, dtype=bool)
    if n > 1:
        ids = events.column("order_id").to_numpy()
        dts = events.column("dt")
        same_id = ids[:-1] == ids[1:]
        same_dt = pc.equal(dts.slice(0, n - 1), dts.slice(1)).to_numpy()
        last[:-1] = ~(same_id & same_dt)
    live = pc.and_(pa.array(last), pc.not_equal(events.column(ROWKIND), DELETE))
    return events.filter(live).select(order_schema.names).cast(order_schema)


def _with_nulls(batch: pa.Table, schema: pa.Schema) -> pa.Table:
    """`batch` with exactly `schema`'s columns: those it lacks as nulls."""
    columns = [batch.column(f.name) if f.name in batch.column_names else pa.nulls(batch.num_rows, f.type)
               for f in schema]
    return pa.Table.from_arrays(columns, names=schema.names).cast(schema)


__all__ = [
    "CONTRACT_SCHEMA",
    "COUPON_CODE",
    "DELETE",
    "EVOLUTION_FIELDS",
    "EVENT_SCHEMA",
    "INSERT",
    "ORDER_SCHEMA",
    "PARTITION_KEY",
    "PRIMARY_KEY",
    "ROWKIND",
    "UPDATE",
    "apply_to_model",
    "generate_order_events",
]
