"""Which data files' key ranges meet a range of keys, from their `_MIN_KEY`/`_MAX_KEY` alone.

The answer prunes work (files to read, conflicts to check), so it must never leave out a file that
may hold a key of the range: when in doubt the file meets. FLOAT/DOUBLE key fields are one such
doubt (Python's order and Paimon's differ on -0.0 and NaN, and a NaN makes `min`/`max` arbitrary),
as are keys that do not decode or compare with each other (nulls).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from lakehouse_engine.errors import LakehouseError
from lakehouse_engine.format.binary_row import deserialize_row
from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.types import DataType

#: The lowest and highest key of a range, each a sequence of key field values. A bound shorter than
#: the key (one value: the first field) compares that many leading fields only.
KeySpan = tuple[Sequence[Any], Sequence[Any]]


def files_meeting_keys(files: Sequence[DataFileMeta], key_types: Sequence[DataType],
                       span: KeySpan | None) -> list[DataFileMeta]:
    """The files of `files` whose key range (min key to max key) meets `span`.

    Every file meets when `span` is None (unknown), when a key field is FLOAT/DOUBLE, or when
    the keys do not decode or compare: a file is left out only when it surely holds no key of `span`.
    """
    if span is None or not files or _has_float(key_types):
        return list(files)
    low, high = tuple(span[0]), tuple(span[1])
    n = len(low)
    try:
        return [f for f in files
                if not (_key(f.max_key, key_types)[:n] < low or high < _key(f.min_key, key_types)[:n])]
    except (TypeError, ValueError, LakehouseError):
        return list(files)


def key_span(files: Sequence[DataFileMeta], key_types: Sequence[DataType]) -> KeySpan | None:
    """The keys of `files`: their lowest min key to their highest max key (None when there are no
    files, or their keys do not decode or compare)."""
    if not files:
        return None
    try:
        return (min(_key(f.min_key, key_types) for f in files), max(_key(f.max_key, key_types) for f in files))
    except (TypeError, ValueError, LakehouseError):
        return None


def _key(binary: bytes, key_types: Sequence[DataType]) -> tuple[Any, ...]:
    return tuple(deserialize_row(binary, key_types))


def _has_float(key_types: Sequence[DataType]) -> bool:
    return any(pa.types.is_floating(t.to_arrow()) for t in key_types)
