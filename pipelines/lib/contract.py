"""Validation of landed order events with pandera: what makes a row fit to write, and why not.

Rows are checked batch by batch where Spark reads them (`EventValidator` is a `mapInArrow`
function), and every row leaves with a reason: null when it is valid, else each failed check as
`column: check`, joined by `; `. Nothing is dropped here: the caller routes rows with a reason to
quarantine. Types are settled before pandera sees a row: the landing reader parses with the
event schema, and a record that does not parse keeps its raw text in `_corrupt_record`.

The contract evolves with the events: a column the source starts sending later is declared once,
as a nullable evolution column (`EVOLUTION_FIELDS` in `pipelines.lib.events`, and its checks
here with `required=False`). Events without it stay valid (it reads as null), events with it are
checked, and the LSM write adds it to the table (docs/pipelines.md, "When the events gain a column").
"""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pandera.pandas as pandera
import pyarrow as pa
import pyarrow.compute as pc
from pandera.errors import SchemaErrors

from lakehouse_engine import ROW_KINDS  # exactly what TableWrite accepts in `rowkind.field`
from pipelines.lib.events import CONTRACT_SCHEMA, COUPON_CODE

CORRUPT_RECORD = "_corrupt_record"   # the raw text of a record the reader could not parse
LANDING_DT = "_landing_dt"           # the dt of the landing folder a row came from
SOURCE_FILE = "_source_file"         # the landing file a row came from
REASON = "_reason"                   # why a row is quarantined; null for a valid row
MALFORMED = "malformed record: does not parse with the event schema"

STATUSES = ("created", "paid", "packed", "shipped", "delivered", "returned", "cancelled")
MAX_AMOUNT = 9_999_999_999.99        # DECIMAL(12, 2)
MAX_QUANTITY = 10_000
COUPON_PATTERN = r"^[A-Z0-9-]{3,32}$"  # upper-case codes such as WELCOME10 or VIP-5

ORDER_EVENT_SCHEMA = pandera.DataFrameSchema(
    {
        "order_id": pandera.Column(nullable=False, checks=pandera.Check.gt(0)),
        "dt": pandera.Column(nullable=False, checks=pandera.Check.str_matches(r"^\d{4}-\d{2}-\d{2}$")),
        "customer": pandera.Column(nullable=True),
        "amount": pandera.Column(nullable=True, checks=pandera.Check.in_range(0, MAX_AMOUNT)),
        "quantity": pandera.Column(nullable=True, checks=pandera.Check.in_range(1, MAX_QUANTITY)),
        "status": pandera.Column(nullable=True, checks=pandera.Check.isin(STATUSES)),
        # The table's sequence field: a null would leave the event's order undefined.
        "updated_at": pandera.Column(nullable=False),
        "_rowkind": pandera.Column(nullable=False, checks=pandera.Check.isin(ROW_KINDS)),
        # Evolution columns: optional (older events lack them) and nullable.
        COUPON_CODE: pandera.Column(nullable=True, required=False,
                                    checks=pandera.Check.str_matches(COUPON_PATTERN)),
    },
    checks=[pandera.Check(lambda df: df["dt"] == df[LANDING_DT], name="dt_matches_landing_folder",
                     error="dt differs from the dt of its landing folder")],
    coerce=False,
    strict=False,
    name="order_events",
)


def _frame(rows: pa.Table) -> pd.DataFrame:
    """The columns pandera checks, as pandas: amounts as floats (ranges only), timestamps as
    integers (only nulls matter, and any year converts)."""
    columns = {}
    for name in CONTRACT_SCHEMA.names:
        if name not in rows.column_names:  # an evolution column the rows do not carry
            continue
        col = rows.column(name)
        if pa.types.is_decimal(col.type):
            col = pc.cast(col, pa.float64())
        elif pa.types.is_timestamp(col.type):
            col = col.cast(pa.int64())
        columns[name] = col
    columns[LANDING_DT] = rows.column(LANDING_DT)
    return pa.table(columns).to_pandas()


def _failure_reason(failures: pd.DataFrame) -> pd.Series:
    """One reason per failing row index: `column: check` per failed column check (the frame-wide
    check once, by its own message), sorted and joined by `; `."""
    frame_wide = failures["schema_context"] == "DataFrameSchema"
    text = failures["column"].astype(str) + ": " + failures["check"].astype(str)
    text = text.where(~frame_wide, failures["check"].astype(str))
    return (pd.DataFrame({"index": failures["index"], "reason": text})
            .dropna(subset=["index"]).drop_duplicates()
            .groupby("index")["reason"].agg(lambda r: "; ".join(sorted(r))))


def quarantine_reasons(rows: pa.Table | pa.RecordBatch) -> pa.Array:
    """The reason each row is quarantined (null when valid), for rows with the event columns,
    `_landing_dt` and `_corrupt_record`."""
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_batches([rows])
    reasons = pd.Series([None] * table.num_rows, dtype=object)
    if table.num_rows == 0:
        return pa.array(reasons, type=pa.string())
    corrupt = table.column(CORRUPT_RECORD).is_valid().to_numpy(zero_copy_only=False)
    try:
        ORDER_EVENT_SCHEMA.validate(_frame(table), lazy=True)
    except SchemaErrors as errors:
        failed = _failure_reason(errors.failure_cases)
        reasons.iloc[failed.index.astype(int).to_numpy()] = failed.to_numpy()
    reasons[corrupt] = MALFORMED  # its other failures only restate that nothing parsed
    return pa.array(reasons, type=pa.string())


class EventValidator:
    """`mapInArrow` function: appends `_reason` to every batch of landed rows."""

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield batch.append_column(REASON, quarantine_reasons(batch))
