"""pandera validation of landed rows: one reason per invalid row, none for a valid one."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa

from pipelines.lib.contract import (
    CORRUPT_RECORD,
    COUPON_PATTERN,
    LANDING_DT,
    MALFORMED,
    REASON,
    EventValidator,
    quarantine_reasons,
)
from pipelines.lib.sample_data import COUPON_CODE, EVENT_SCHEMA

DT = "2026-11-02"


def _row(**changes: object) -> dict[str, object]:
    row: dict[str, object] = {
        "order_id": 7, "dt": DT, "customer": "customer-1", "amount": decimal.Decimal("12.50"),
        "quantity": 2, "status": "paid", "updated_at": datetime.datetime(2026, 11, 2, 8, 0),
        "_rowkind": "+U", LANDING_DT: DT, CORRUPT_RECORD: None}
    row.update(changes)
    return row


def _batch(*rows: dict[str, object]) -> pa.Table:
    schema = EVENT_SCHEMA.append(pa.field(LANDING_DT, pa.string())).append(pa.field(CORRUPT_RECORD, pa.string()))
    loose = pa.schema([f.with_nullable(True) for f in schema])
    return pa.Table.from_pylist(list(rows), schema=loose)


def test_a_valid_row_has_no_reason() -> None:
    rows = _batch(_row(), _row(order_id=8, customer=None, amount=None))
    assert quarantine_reasons(rows).to_pylist() == [None, None]


def test_each_broken_rule_is_named_in_the_reason() -> None:
    reasons = quarantine_reasons(_batch(
        _row(order_id=None),
        _row(order_id=-1),
        _row(amount=decimal.Decimal("-0.01")),
        _row(quantity=0),
        _row(status="lost"),
        _row(updated_at=None),
        _row(_rowkind="+X"),
        _row(dt="2026-11-03"),
    )).to_pylist()
    assert reasons[0] == "order_id: not_nullable"
    assert reasons[1] == "order_id: greater_than(0)"
    assert reasons[2] == "amount: in_range(0, 9999999999.99)"
    assert reasons[3] == "quantity: in_range(1, 10000)"
    assert reasons[4].startswith("status: isin(")
    assert reasons[5] == "updated_at: not_nullable"
    assert reasons[6].startswith("_rowkind: isin(")
    assert reasons[7] == "dt differs from the dt of its landing folder"


def test_every_failure_of_a_row_is_listed_once() -> None:
    [reason] = quarantine_reasons(_batch(_row(order_id=None, quantity=0))).to_pylist()
    assert reason == "order_id: not_nullable; quantity: in_range(1, 10000)"


def test_a_record_that_did_not_parse_is_malformed_whatever_else_fails() -> None:
    unparsed = {k: None for k in EVENT_SCHEMA.names}
    reasons = quarantine_reasons(_batch(_row(), {**unparsed, LANDING_DT: DT, CORRUPT_RECORD: "{oops"}))
    assert reasons.to_pylist() == [None, MALFORMED]


def test_the_validator_appends_the_reason_column_to_every_batch() -> None:
    batches = _batch(_row(), _row(quantity=0)).to_batches()
    out = list(EventValidator()(iter(batches)))
    assert [b.schema.names[-1] for b in out] == [REASON]
    assert out[0].column(REASON).to_pylist() == [None, "quantity: in_range(1, 10000)"]


def test_an_empty_batch_gets_an_empty_reason_column() -> None:
    assert len(quarantine_reasons(_batch().slice(0, 0))) == 0


def test_the_evolution_column_is_optional_and_checked_when_present() -> None:
    assert quarantine_reasons(_batch(_row())).to_pylist() == [None]  # rows without coupon_code
    schema = _batch().schema.append(pa.field(COUPON_CODE, pa.string()))
    rows = pa.Table.from_pylist([_row(coupon_code="WELCOME10"), _row(coupon_code=None),
                                 _row(coupon_code="welcome 10")], schema=schema)
    assert quarantine_reasons(rows).to_pylist() == [None, None, f"coupon_code: str_matches('{COUPON_PATTERN}')"]
