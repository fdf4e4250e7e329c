"""The shape of an order event: the table's columns, the row kind, the evolution columns, the key.

pyarrow only: the sample generator, the pandera contract (`pipelines.lib.contract`), staging and
the table the LSM write creates all take their columns from here.
"""

from __future__ import annotations

import pyarrow as pa

ORDER_SCHEMA = pa.schema(
    [
        pa.field("order_id", pa.int64(), nullable=False),
        pa.field("dt", pa.string(), nullable=False),
        pa.field("customer", pa.string()),
        pa.field("amount", pa.decimal128(12, 2)),
        pa.field("quantity", pa.int32()),
        pa.field("status", pa.string()),
        pa.field("updated_at", pa.timestamp("us")),
    ]
)
ROWKIND = "_rowkind"
EVENT_SCHEMA = ORDER_SCHEMA.append(pa.field(ROWKIND, pa.string(), nullable=False))
# Optional columns the events gained after the table was created: nullable, absent in older
# events. The table gains each when staged rows first carry it (docs/pipelines.md).
COUPON_CODE = "coupon_code"
EVOLUTION_FIELDS = (pa.field(COUPON_CODE, pa.string()),)
#: Every column an event may carry: the original ones and the evolution columns.
CONTRACT_SCHEMA = pa.schema([*EVENT_SCHEMA, *EVOLUTION_FIELDS])
PRIMARY_KEY = ("order_id", "dt")
PARTITION_KEY = "dt"

#: The names of the evolution columns, in the order a staged batch carries them.
EVOLUTION_COLUMNS = tuple(f.name for f in EVOLUTION_FIELDS)
