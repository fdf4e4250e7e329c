"""Deterministic benchmark data shared by every benchmark.

This module is imported both by the main venv (pyarrow 26) and, by file path, by
``bench/pypaimon_baseline.py`` running in ``.venv-interop`` (pyarrow 19).  It therefore
uses only numpy and the long-stable pyarrow constructors (``Array.from_buffers``,
``pa.array`` on numpy integer/float arrays, ``Table.from_arrays``) so both venvs produce
byte-identical tables for the same arguments.

Layout:

* ``initial``: ``rows`` rows with ids ``0 .. rows-1`` in a random order.
* ``upsert``: ``upsert`` rows; ``upsert // 2`` are updates of distinct existing ids and the
  rest are new ids ``rows .. rows + (upsert - upsert // 2) - 1``, shuffled together.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

NAME_LEN = 20
#: 2026-11-01T00:00:00 UTC in microseconds.
BASE_TS_US = 1_793_491_200_000_000

BENCH_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("qty", pa.int64()),
        pa.field("price", pa.float64()),
        pa.field("ts", pa.timestamp("us")),
    ]
)
PRIMARY_KEY = "id"


def _fixed_width_strings(rng: np.random.Generator, n: int, width: int) -> pa.Array:
    """``n`` random lowercase ASCII strings of exactly ``width`` characters (vectorised)."""
    data = rng.integers(ord("a"), ord("z") + 1, size=n * width, dtype=np.uint8)
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data.tobytes())]
    )


def _rows_for_ids(rng: np.random.Generator, ids: np.ndarray, ts_offset_us: int) -> pa.Table:
    n = len(ids)
    qty = rng.integers(1, 1_000, size=n, dtype=np.int64)
    # Round to cents so every engine sees the same, exactly representable-ish values.
    price = np.round(rng.uniform(0.5, 5_000.0, size=n), 2)
    ts = BASE_TS_US + ts_offset_us + np.arange(n, dtype=np.int64) * 1_000
    arrays = [
        pa.array(ids.astype(np.int64, copy=False), type=pa.int64()),
        _fixed_width_strings(rng, n, NAME_LEN),
        pa.array(qty, type=pa.int64()),
        pa.array(price, type=pa.float64()),
        pa.array(ts, type=pa.int64()).cast(pa.timestamp("us")),
    ]
    return pa.Table.from_arrays(arrays, schema=BENCH_SCHEMA)


def make_bench_data(rows: int, upsert: int, seed: int = 1) -> tuple[pa.Table, pa.Table]:
    """Return ``(initial, upsert)`` tables with the layout described in the module docstring."""
    if rows < 0 or upsert < 0:
        raise ValueError("rows and upsert must be non-negative")
    n_updates = min(upsert // 2, rows)
    n_new = upsert - n_updates
    rng = np.random.default_rng(seed)

    initial_ids = rng.permutation(rows).astype(np.int64)
    initial = _rows_for_ids(rng, initial_ids, ts_offset_us=0)

    updated_ids = rng.choice(rows, size=n_updates, replace=False).astype(np.int64)
    new_ids = np.arange(rows, rows + n_new, dtype=np.int64)
    upsert_ids = rng.permutation(np.concatenate([updated_ids, new_ids]))
    # Upserts happen one day after the initial load so their timestamps are all newer.
    upsert_tbl = _rows_for_ids(rng, upsert_ids, ts_offset_us=86_400 * 1_000_000)
    return initial, upsert_tbl


def expected_merged(initial: pa.Table, upsert: pa.Table) -> pa.Table:
    """The last-writer-wins merge of ``initial`` then ``upsert``, sorted by id."""
    combined = pa.concat_tables([initial, upsert])
    n = combined.num_rows
    order = pa.array(np.arange(n, dtype=np.int64))
    combined = combined.append_column("__seq", order)
    combined = combined.sort_by([(PRIMARY_KEY, "ascending"), ("__seq", "ascending")])
    ids = combined.column(PRIMARY_KEY).to_numpy()
    keep = np.ones(len(ids), dtype=bool)
    if len(ids) > 1:
        keep[:-1] = ids[:-1] != ids[1:]
    return combined.filter(pa.array(keep)).drop_columns(["__seq"])
