"""Which column type changes `alter_table` accepts: Paimon's casts (`DataTypeCasts`), the ones
that keep every value already written, and the ones our reader can execute on an older file."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.types import (
    BIGINT,
    BINARY,
    BOOLEAN,
    BYTES,
    CHAR,
    DATE,
    DECIMAL,
    DOUBLE,
    FLOAT,
    INT,
    SMALLINT,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMP_LTZ,
    TINYINT,
    VARBINARY,
    VARCHAR,
    DataType,
)

# Digits left of the decimal point that each integer type needs.
_INTEGER_DIGITS = {TINYINT: 3, SMALLINT: 5, INT: 10, BIGINT: 19}
_INTEGER_ORDER = [TINYINT, SMALLINT, INT, BIGINT]


def type_change_allowed(old: DataType, new: DataType) -> bool:
    """True when every value of `old` has an exact counterpart in `new` (nullability aside).

    Paimon's implicit (widening) casts that keep every value, plus casts to a character string
    from types whose text form Paimon and Arrow spell alike. Paimon's Java core also accepts
    narrowing and lossy casts (BIGINT to INT, STRING to INT); they would make older files fail
    to read or read as other values, so they are refused here.
    """
    o, n = old.root, new.root
    if o == n and o in (BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DATE, STRING, BYTES):
        return True
    if o in _INTEGER_ORDER and n in _INTEGER_ORDER:
        return _INTEGER_ORDER.index(o) <= _INTEGER_ORDER.index(n)
    if o in _INTEGER_ORDER and n in (FLOAT, DOUBLE):
        return True
    if o == FLOAT and n == DOUBLE:
        return True
    if o in _INTEGER_ORDER and n == DECIMAL:
        assert new.precision is not None and new.scale is not None
        return new.precision - new.scale >= _INTEGER_DIGITS[o]
    if o == DECIMAL and n == DECIMAL:
        assert old.precision is not None and old.scale is not None
        assert new.precision is not None and new.scale is not None
        return new.scale >= old.scale and new.precision - new.scale >= old.precision - old.scale
    if o == DECIMAL and n == DOUBLE:
        return True
    if o in (CHAR, VARCHAR) and n in (CHAR, VARCHAR):
        return (o == n or (o == CHAR and n == VARCHAR)) and (new.length or 0) >= (old.length or 0)
    if o in (BINARY, VARBINARY) and n in (BINARY, VARBINARY):
        return (o == n or (o == BINARY and n == VARBINARY)) and (new.length or 0) >= (old.length or 0)
    if o in (BINARY, VARBINARY) and n == BYTES:
        return True
    if o in (TIMESTAMP, TIMESTAMP_LTZ) and n == o:
        return (new.precision or 0) >= (old.precision or 0)
    if n == STRING:
        return o in (CHAR, VARCHAR, TINYINT, SMALLINT, INT, BIGINT, DECIMAL, BOOLEAN, DATE)
    return False


_CHARACTER = frozenset({CHAR, VARCHAR, STRING})
_BINARY_STRING = frozenset({BINARY, VARBINARY, BYTES})
_NUMERIC = frozenset({*_INTEGER_ORDER, FLOAT, DOUBLE, DECIMAL})
_TIMESTAMPS = frozenset({TIMESTAMP, TIMESTAMP_LTZ})


def explicit_cast_supported(old: DataType, new: DataType) -> bool:
    """Paimon's `DataTypeCasts.supportsCast(old, new, allowExplicit=true)` for atomic types: the
    SQL casts Paimon (Java) accepts in `alter table ... type`, whether or not they keep values."""
    o, n = old.root, new.root
    if o == n:
        return True
    if n in _CHARACTER:
        return True  # every predefined type casts to a character string
    if n == BOOLEAN:
        return o in _CHARACTER or o in _INTEGER_ORDER
    if n in _BINARY_STRING:
        return o in _BINARY_STRING or o in _CHARACTER
    if n in _NUMERIC:
        return o in _NUMERIC or o in _CHARACTER or o == BOOLEAN or o in _TIMESTAMPS
    if n in (DATE, TIME):
        return o in _TIMESTAMPS or o in _CHARACTER
    if n in _TIMESTAMPS:
        return o in _TIMESTAMPS or o in (DATE, TIME) or o in _CHARACTER or o in _NUMERIC
    return False


def read_can_cast(old: DataType, new: DataType) -> bool:
    """Whether our reader has a cast from `old` to `new` for a file written before the change
    (Arrow's cast kernel, as `mergetree/evolution.py` applies it): Paimon's `CastExecutors.resolve`
    check, which refuses TIMESTAMP to DECIMAL, or INT to a DECIMAL too narrow for any int."""
    probe = pa.nulls(1, old.to_arrow())  # a null row: the kernel and its type parameters, no value
    try:
        pc.cast(probe, new.to_arrow())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True
