from __future__ import annotations

import ast
import datetime
import decimal
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pipelines.lib import sample_data
from pipelines.lib.sample_data import (
    CONTRACT_SCHEMA,
    COUPON_CODE,
    DELETE,
    EVENT_SCHEMA,
    INSERT,
    ORDER_SCHEMA,
    ROWKIND,
    UPDATE,
    apply_to_model,
    generate_order_events,
)

SMALL_SEED = 11


def _small(seed: int = SMALL_SEED) -> list[pa.Table]:
    return generate_order_events(days=2, rows_per_day=3_000, seed=seed)


@pytest.fixture(scope="module")
def default_batches() -> list[pa.Table]:
    return generate_order_events()


@pytest.fixture(scope="module")
def small_batches() -> list[pa.Table]:
    return _small()


def _events(batches: list[pa.Table]) -> list[dict]:
    return pa.concat_tables(batches).to_pylist()


def _reference_model(batches: list[pa.Table]) -> dict[tuple[int, str], dict]:
    """Independent, row-at-a-time reference for apply_to_model."""
    state: dict[tuple[int, str], dict] = {}
    for row in _events(batches):
        key = (row["order_id"], row["dt"])
        if row[ROWKIND] == DELETE:
            state.pop(key, None)
        else:
            state[key] = {k: v for k, v in row.items() if k != ROWKIND}
    return state


def test_schemas() -> None:
    assert ROWKIND not in ORDER_SCHEMA.names
    assert EVENT_SCHEMA.names == [*ORDER_SCHEMA.names, ROWKIND]
    assert ORDER_SCHEMA.field("order_id").type == pa.int64()
    assert not ORDER_SCHEMA.field("order_id").nullable
    assert ORDER_SCHEMA.field("dt").type == pa.string()
    assert not ORDER_SCHEMA.field("dt").nullable
    assert ORDER_SCHEMA.field("amount").type == pa.decimal128(12, 2)
    assert ORDER_SCHEMA.field("quantity").type == pa.int32()
    assert ORDER_SCHEMA.field("updated_at").type == pa.timestamp("us")


def test_batches_have_event_schema_and_no_nulls(default_batches: list[pa.Table]) -> None:
    assert len(default_batches) == 3 * 4
    for batch in default_batches:
        assert batch.schema == EVENT_SCHEMA
        assert batch.num_rows > 0
        for column in batch.columns:
            assert column.null_count == 0


def test_deterministic_for_a_seed(small_batches: list[pa.Table]) -> None:
    again = _small()
    assert len(again) == len(small_batches)
    for a, b in zip(again, small_batches, strict=True):
        assert a.equals(b)


def test_other_seed_gives_other_data(small_batches: list[pa.Table]) -> None:
    other = _small(SMALL_SEED + 1)
    assert not pa.concat_tables(other).equals(pa.concat_tables(small_batches))


def test_row_counts_plausible(default_batches: list[pa.Table]) -> None:
    events = pa.concat_tables(default_batches)
    # Events after a delete of the same order are dropped, so slightly fewer than requested.
    assert 0.9 * 60_000 <= events.num_rows <= 60_000
    kinds = Counter(events.column(ROWKIND).to_pylist())
    assert set(kinds) == {INSERT, UPDATE, DELETE}
    assert 0.6 < kinds[INSERT] / events.num_rows < 0.8
    assert kinds[UPDATE] > 0.15 * events.num_rows
    assert 0 < kinds[DELETE] < 0.06 * events.num_rows
    for day_batches in (default_batches[i : i + 4] for i in range(0, 12, 4)):
        assert 0.9 * 20_000 <= sum(b.num_rows for b in day_batches) <= 20_000
    model = apply_to_model(default_batches)
    assert 0 < model.num_rows <= kinds[INSERT]
    # Each delete removes a distinct, live order (nothing follows a delete).
    assert model.num_rows == kinds[INSERT] - kinds[DELETE]


def test_dates_and_partitions(default_batches: list[pa.Table]) -> None:
    expected = ["2026-11-01", "2026-11-02", "2026-11-03"]
    for i, batch in enumerate(default_batches):
        assert set(batch.column("dt").to_pylist()) == {expected[i // 4]}
        ts = batch.column("updated_at").cast(pa.int64()).to_numpy()
        assert np.all(np.diff(ts) > 0)
        day = datetime.date.fromisoformat(expected[i // 4])
        dates = {v.date() for v in batch.column("updated_at").to_pylist()}
        assert dates == {day}
    start = datetime.date(2027, 2, 27)
    batches = generate_order_events(days=3, rows_per_day=200, start=start, batches_per_day=2)
    assert [b.column("dt")[0].as_py() for b in batches] == [
        "2027-02-27",
        "2027-02-27",
        "2027-02-28",
        "2027-02-28",
        "2027-03-01",
        "2027-03-01",
    ]


def test_column_values(default_batches: list[pa.Table]) -> None:
    events = pa.concat_tables(default_batches)
    lengths = pc.utf8_length(events.column("customer")).to_numpy()
    assert lengths.min() >= 15 and lengths.max() <= 25
    assert pc.min(events.column("amount")).as_py() > 0
    assert pc.min(events.column("quantity")).as_py() >= 1
    inserts = events.filter(pc.equal(events.column(ROWKIND), INSERT))
    assert set(inserts.column("status").to_pylist()) == {"created"}
    # Each order keeps its customer across updates.
    per_order = Counter(
        (row["order_id"], row["customer"])
        for row in events.select(["order_id", "customer"]).to_pylist()
    )
    assert len({order for order, _ in per_order}) == len(per_order)


def test_updates_and_deletes_only_touch_keys_inserted_earlier(
    default_batches: list[pa.Table],
) -> None:
    seen: set[tuple[int, str]] = set()
    deleted: set[tuple[int, str]] = set()
    order_dt: dict[int, str] = {}
    for row in _events(default_batches):
        key = (row["order_id"], row["dt"])
        # An order id lives in exactly one partition.
        assert order_dt.setdefault(row["order_id"], row["dt"]) == row["dt"]
        assert key not in deleted, "no event may follow the delete of its order"
        if row[ROWKIND] == INSERT:
            assert key not in seen, "an order is inserted once"
            seen.add(key)
        else:
            assert key in seen, f"{row[ROWKIND]} of an order not inserted earlier: {key}"
            if row[ROWKIND] == DELETE:
                deleted.add(key)
    assert deleted


def test_update_keys_are_skewed(default_batches: list[pa.Table]) -> None:
    events = pa.concat_tables(default_batches)
    updates = events.filter(pc.equal(events.column(ROWKIND), UPDATE))
    counts = Counter(updates.column("order_id").to_pylist())
    top = counts.most_common(1)[0][1]
    mean = updates.num_rows / len(counts)
    assert top > 50 * mean
    # ... and yet most updated orders were updated only once or twice.
    assert sum(1 for c in counts.values() if c <= 2) > 0.5 * len(counts)


def test_model_matches_row_by_row_reference(small_batches: list[pa.Table]) -> None:
    model = apply_to_model(small_batches)
    assert model.schema == ORDER_SCHEMA
    reference = _reference_model(small_batches)
    rows = model.to_pylist()
    assert len(rows) == len(reference)
    assert {(r["order_id"], r["dt"]): r for r in rows} == reference
    keys = [(r["order_id"], r["dt"]) for r in rows]
    assert keys == sorted(keys), "model is sorted by (order_id, dt)"


def test_model_has_no_deleted_keys(default_batches: list[pa.Table]) -> None:
    events = pa.concat_tables(default_batches)
    deletes = events.filter(pc.equal(events.column(ROWKIND), DELETE))
    deleted_ids = set(deletes.column("order_id").to_pylist())
    model = apply_to_model(default_batches)
    model_ids = model.column("order_id").to_pylist()
    assert len(model_ids) == len(set(model_ids))
    assert deleted_ids
    assert deleted_ids.isdisjoint(model_ids)
    inserted_ids = set(
        events.filter(pc.equal(events.column(ROWKIND), INSERT)).column("order_id").to_pylist()
    )
    assert set(model_ids) == inserted_ids - deleted_ids


def test_model_keeps_the_last_update() -> None:
    base = {
        "customer": "customer-00000000001",
        "amount": decimal.Decimal("1.00"),
        "quantity": 1,
        "updated_at": datetime.datetime(2026, 11, 1),
    }
    first = pa.Table.from_pylist(
        [
            {**base, "order_id": 1, "dt": "2026-11-01", "status": "created", ROWKIND: INSERT},
            {**base, "order_id": 2, "dt": "2026-11-01", "status": "created", ROWKIND: INSERT},
            {**base, "order_id": 1, "dt": "2026-11-02", "status": "created", ROWKIND: INSERT},
        ],
        schema=EVENT_SCHEMA,
    )
    second = pa.Table.from_pylist(
        [
            {**base, "order_id": 1, "dt": "2026-11-01", "status": "paid", ROWKIND: UPDATE},
            {**base, "order_id": 2, "dt": "2026-11-01", "status": "paid", ROWKIND: DELETE},
            {**base, "order_id": 1, "dt": "2026-11-01", "status": "shipped", ROWKIND: UPDATE},
        ],
        schema=EVENT_SCHEMA,
    )
    model = apply_to_model([first, second])
    assert model.select(["order_id", "dt", "status"]).to_pylist() == [
        {"order_id": 1, "dt": "2026-11-01", "status": "shipped"},
        {"order_id": 1, "dt": "2026-11-02", "status": "created"},
    ]


def test_model_of_nothing_is_empty() -> None:
    assert apply_to_model([]).equals(ORDER_SCHEMA.empty_table())
    assert apply_to_model(generate_order_events(days=0)).num_rows == 0
    assert generate_order_events(days=2, rows_per_day=0, batches_per_day=3) != []


def _imported(module: Any) -> set[str]:
    """The modules a module imports (absolute imports, full dotted names)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(Path(module.__file__).read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_module_imports_only_numpy_pyarrow_and_the_event_schema() -> None:
    from pipelines.lib import events as event_schema

    allowed = {"__future__", "datetime", "collections", "numpy", "pyarrow", "typing"}
    assert {m.split(".")[0] for m in _imported(sample_data) - {"pipelines.lib.events"}} <= allowed
    assert {m.split(".")[0] for m in _imported(event_schema)} <= allowed


def test_coupons_appear_from_their_day_and_change_nothing_else() -> None:
    start = datetime.date(2026, 11, 1)
    plain = generate_order_events(days=3, rows_per_day=300, start=start, batches_per_day=2)
    evolved = generate_order_events(days=3, rows_per_day=300, start=start, batches_per_day=2,
                                    coupons_from=datetime.date(2026, 11, 3))
    assert [b.schema for b in evolved] == [EVENT_SCHEMA] * 4 + [CONTRACT_SCHEMA] * 2
    assert all(e.select(EVENT_SCHEMA.names).equals(p) for e, p in zip(evolved, plain, strict=True))
    coupons = pa.concat_tables(evolved[4:]).column(COUPON_CODE)
    assert 0.1 < 1 - coupons.null_count / len(coupons) < 0.3  # about a fifth carry a coupon
    model = apply_to_model(evolved)
    assert model.schema.names == [*ORDER_SCHEMA.names, COUPON_CODE]
    old = model.filter(pc.less(model.column("dt"), "2026-11-03")).column(COUPON_CODE)
    assert old.null_count == len(old) > 0
    assert apply_to_model(plain).schema == ORDER_SCHEMA
