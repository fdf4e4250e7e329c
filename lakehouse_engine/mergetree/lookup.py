"""The lookup at commit: new (level-0) keys of a bucket looked up in the bucket's older levels.

Paimon's `lookup` changelog producer and its deletion vectors both ask, for each key a commit
writes into a bucket: did the key exist before, and if so, what was the row (the changelog's
`-U`/`-D`) and where was it (the data file and row position a deletion vector marks)?

API: `lookup(keys, levels, read_file, key_names, value_schema, key_range, comparable, live_rows)`
returns a `LookupResult` aligned with `keys`: `exists` (bool per key), and for the keys that
existed, their indices into `keys`, the old rows (the columns of `value_schema`), and each old
row's file name and row position in that file (`positions_by_file()` groups them per file, as
a deletion vector wants them).

How, as Paimon's LookupLevels does it, vectorised:

1. Levels are searched from the lowest (newest) up; within a level the files are key-disjoint,
   so a key lives in at most one file of a level, and the first level holding it wins.
2. A file whose key range [min key, max key] misses the range of the keys still sought is
   not read.
3. A file is read whole (its key and value columns), its dead rows dropped (`live_rows`: the
   file's deletion vector, and retractions), and its keys joined with the keys still sought
   (a pyarrow hash join on the key columns, carrying row positions); the matched rows' values
   are taken by position; the keys not matched are sought on.

Memory: the keys sought, one file's columns and the matches so far; a file is at most
`target-file-size`, the keys are one commit's level 0 (bounded by `write-buffer-size`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.format.manifest_entries import DataFileMeta

_KEY_INDEX = "\x00lookup-key-index"
_POSITION = "\x00lookup-position"

ReadFile = Callable[[DataFileMeta, list[str]], pa.Table]
LiveRows = Callable[[DataFileMeta, pa.Table], "np.ndarray | None"]


@dataclass
class LookupResult:
    """For each looked-up key: whether it existed; for those that did, the old row and its place."""

    exists: np.ndarray          # bool, one per key
    key_index: np.ndarray       # int64: the keys (indices into the input) that existed
    old_rows: pa.Table          # their old rows (value columns), in `key_index` order
    file_names: list[str]       # the data file of each old row
    positions: np.ndarray       # int64: each old row's position in its file

    def positions_by_file(self) -> dict[str, np.ndarray]:
        """File name -> sorted row positions of the old rows in it (what a deletion vector marks)."""
        names = np.asarray(self.file_names, dtype=object)
        return {name: np.sort(self.positions[names == name]) for name in dict.fromkeys(self.file_names)}


def lookup(keys: pa.Table, levels: Sequence[Sequence[DataFileMeta]], read_file: ReadFile,
           key_names: Sequence[str], value_schema: pa.Schema,
           key_range: Callable[[DataFileMeta], tuple[Any, Any]],
           comparable: Callable[[tuple[Any, ...]], Any],
           live_rows: LiveRows | None = None) -> LookupResult:
    """Look `keys` (distinct rows of the `key_names` columns) up in `levels` (level 1 first, each
    a list of key-disjoint files); see the module docstring.

    Args:
        read_file: reads columns of a data file.
        key_range: a file's (min key, max key) in `comparable` form.
        comparable: a key's values -> a value that orders as keys order. Files are pruned by
            key range only for keys without FLOAT/DOUBLE fields (Arrow's sort and Java's order
            disagree on -0.0 and NaN); other files are read and joined all the same.
        live_rows: for a file and its columns, the mask of rows that are live (None: all).
    """
    key_names = list(key_names)
    value_columns = value_schema.names
    columns = list(dict.fromkeys(list(value_columns) + key_names))
    prune = not any(pa.types.is_floating(keys.schema.field(k).type) for k in key_names)
    sought = keys.select(key_names).append_column(_KEY_INDEX, pa.array(np.arange(keys.num_rows), pa.int64()))
    found_index: list[np.ndarray] = []
    found_rows: list[pa.Table] = []
    found_files: list[str] = []
    found_positions: list[np.ndarray] = []
    for level in levels:
        if sought.num_rows == 0:
            break
        if prune:
            low, high = _range(sought, key_names, comparable)
        for f in level:
            if sought.num_rows == 0:
                break
            if prune:
                f_low, f_high = key_range(f)
                if f_high < low or f_low > high:
                    continue
            rows = read_file(f, columns)
            file_keys = rows.select(key_names).append_column(
                _POSITION, pa.array(np.arange(rows.num_rows), pa.int64()))
            if live_rows is not None:
                keep = live_rows(f, rows)
                if keep is not None and not keep.all():
                    file_keys = file_keys.filter(pa.array(keep))
            matched = sought.join(file_keys, key_names, join_type="inner", use_threads=False)
            if matched.num_rows == 0:
                continue
            index = matched.column(_KEY_INDEX).to_numpy()
            positions = matched.column(_POSITION).to_numpy()
            found_index.append(index)
            found_rows.append(rows.select(value_columns).take(pa.array(positions)).cast(value_schema))
            found_positions.append(positions)
            found_files.extend([f.file_name] * matched.num_rows)
            still = ~np.isin(sought.column(_KEY_INDEX).to_numpy(), index)
            sought = sought.filter(pa.array(still))
            if sought.num_rows and prune:
                low, high = _range(sought, key_names, comparable)
    exists = np.zeros(keys.num_rows, dtype=bool)
    if not found_index:
        return LookupResult(exists, np.empty(0, np.int64), value_schema.empty_table(), [],
                            np.empty(0, np.int64))
    index = np.concatenate(found_index)
    exists[index] = True
    # In key order, as the keys came in.
    order = np.argsort(index, kind="stable")
    old = pa.concat_tables(found_rows).take(pa.array(order))
    names = [found_files[i] for i in order.tolist()]
    return LookupResult(exists, index[order], old, names, np.concatenate(found_positions)[order])


def _range(keys: pa.Table, key_names: list[str], comparable: Callable[[tuple[Any, ...]], Any]) -> tuple[Any, Any]:
    """The smallest and largest of `keys` in `comparable` form."""
    order = pc.sort_indices(keys, sort_keys=[(k, "ascending") for k in key_names])
    first, last = order[0].as_py(), order[len(order) - 1].as_py()
    row = keys.select(key_names)
    lo = tuple(row.column(k)[first].as_py() for k in key_names)
    hi = tuple(row.column(k)[last].as_py() for k in key_names)
    return comparable(lo), comparable(hi)
