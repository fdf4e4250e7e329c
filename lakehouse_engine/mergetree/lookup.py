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
3. A file's key columns are read, and each of its rows matched against the keys still sought
   (one ascending integer key: a binary search of each key sought; else hash lookups per key
   column, `pc.index_in`; no join, no loop over rows), its dead rows (`live_rows`: the file's
   deletion vector) unmatched. Only a file with a match has its value columns read, and the
   matched rows taken by position; the keys not matched are sought on. `read_file` may serve
   columns from the lookup cache (`mergetree.lookup_cache`), which then decodes nothing.

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

ReadFile = Callable[[DataFileMeta, list[str]], pa.Table]
LiveRows = Callable[[DataFileMeta, pa.Table], "np.ndarray | None"]


@dataclass
class LookupResult:
    """For each looked-up key: whether it existed; for those that did, the old row and its place."""

    exists: np.ndarray          # bool, one per key
    key_index: np.ndarray       # int64: the keys (indices into the input) that existed
    old_rows: pa.Table          # their old rows (value columns), in `key_index` order
    files: list[str]            # the data files old rows were found in
    file_index: np.ndarray      # int64: each old row's file (an index into `files`)
    positions: np.ndarray       # int64: each old row's position in its file

    @property
    def file_names(self) -> list[str]:
        """The data file of each old row."""
        return np.asarray(self.files, dtype=object)[self.file_index].tolist() if self.files else []

    def positions_by_file(self) -> dict[str, np.ndarray]:
        """File name -> sorted row positions of the old rows in it (what a deletion vector marks)."""
        return {name: _ascending(self.positions[self.file_index == i]) for i, name in enumerate(self.files)}


def _ascending(values: np.ndarray) -> np.ndarray:
    """`values` sorted; as they are when they already ascend (one file's matches do, in file
    order), which NumPy's sort would take about a hundred times longer to find out."""
    if len(values) < 2 or bool(np.all(values[1:] > values[:-1])):
        return values
    return np.sort(values)


def lookup(keys: pa.Table, levels: Sequence[Sequence[DataFileMeta]], read_file: ReadFile,
           key_names: Sequence[str], value_schema: pa.Schema,
           key_range: Callable[[DataFileMeta], tuple[Any, Any]],
           comparable: Callable[[tuple[Any, ...]], Any],
           live_rows: LiveRows | None = None, read_with_keys: Sequence[str] = ()) -> LookupResult:
    """Look `keys` (distinct rows of the `key_names` columns) up in `levels` (level 1 first, each
    a list of key-disjoint files); see the module docstring.

    Args:
        read_file: reads columns of a data file.
        key_range: a file's (min key, max key) in `comparable` form.
        comparable: a key's values -> a value that orders as keys order. Files are pruned by
            key range only for keys without FLOAT/DOUBLE fields (Arrow's sort and Java's order
            disagree on -0.0 and NaN); other files are read and matched all the same.
        live_rows: for a file and its columns, the mask of rows that are live (None: all).
        read_with_keys: columns of `value_schema` read with the key columns, in one read (small
            ones a lookup wants of every matched row, such as the kind: no read of their own).
    """
    key_names = list(key_names)
    value_columns = value_schema.names
    first_read = key_names + [c for c in read_with_keys if c not in key_names]
    others = [c for c in value_columns if c not in first_read]  # read only for files with a match
    prune = not any(pa.types.is_floating(keys.schema.field(k).type) for k in key_names)
    sought = keys.select(key_names)
    sought_index = np.arange(keys.num_rows, dtype=np.int64)  # the input index of each key sought
    found_index: list[np.ndarray] = []
    found_rows: list[pa.Table] = []
    found_files: list[str] = []
    found_file_index: list[np.ndarray] = []
    found_positions: list[np.ndarray] = []
    last = next((level[-1] for level in reversed(levels) if level), None)
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
                    continue  # the file's key statistics miss every key sought
            file_keys = read_file(f, first_read)
            positions, hit = match_rows(sought, file_keys, key_names)  # `hit`: indices into `sought`
            if live_rows is not None and len(positions):
                keep = live_rows(f, file_keys)
                if keep is not None:
                    live = keep[positions]
                    positions, hit = positions[live], hit[live]
            if len(positions) == 0:
                continue
            found_index.append(sought_index[hit])
            found_rows.append(_old_rows(f, file_keys, positions, read_file, value_schema, others))
            found_positions.append(positions)
            found_file_index.append(np.full(len(positions), len(found_files), np.int64))
            found_files.append(f.file_name)
            if f is last:
                break  # (no file is left to seek the other keys in)
            still = np.ones(sought.num_rows, dtype=bool)
            still[hit] = False
            sought, sought_index = sought.filter(pa.array(still)), sought_index[still]
            if sought.num_rows and prune:
                low, high = _range(sought, key_names, comparable)
    exists = np.zeros(keys.num_rows, dtype=bool)
    if not found_index:
        empty = np.empty(0, np.int64)
        return LookupResult(exists, empty, value_schema.empty_table(), [], empty, empty)
    def joined(parts: list[np.ndarray]) -> np.ndarray:
        return parts[0] if len(parts) == 1 else np.concatenate(parts)  # (one part: no copy)

    index = joined(found_index)
    exists[index] = True
    old = pa.concat_tables(found_rows) if len(found_rows) > 1 else found_rows[0]
    file_index, positions = joined(found_file_index), joined(found_positions)
    if len(index) > 1 and not bool(np.all(index[1:] > index[:-1])):
        # In key order, as the keys came in (one file's matches already are).
        order = np.argsort(index, kind="stable")
        old, index, file_index, positions = old.take(pa.array(order)), index[order], file_index[order], positions[order]
    return LookupResult(exists, index, old, found_files, file_index, positions)


def rows_at(found: LookupResult, files: Sequence[DataFileMeta], read_file: ReadFile,
            schema: pa.Schema) -> pa.Table:
    """The `schema` columns of the rows a lookup found (`found`'s files and positions, its
    `key_index` order), read by `read_file` from `files` (the files looked up, by name): a
    lookup run with only some columns gathers the others after, for the rows it found."""
    if not found.files:
        return schema.empty_table()
    by_name = {f.file_name: f for f in files}
    if len(found.files) == 1:
        return read_file(by_name[found.files[0]], schema.names).take(pa.array(found.positions))
    parts, order = [], []
    for i, name in enumerate(found.files):
        at = np.flatnonzero(found.file_index == i)
        parts.append(read_file(by_name[name], schema.names).take(pa.array(found.positions[at])))
        order.append(at)
    rows = pa.concat_tables(parts)
    return rows.take(pa.array(np.argsort(np.concatenate(order), kind="stable")))


def _old_rows(f: DataFileMeta, file_keys: pa.Table, positions: np.ndarray, read_file: ReadFile,
              value_schema: pa.Schema, others: list[str]) -> pa.Table:
    """The `value_schema` columns of the rows at `positions` of file `f`, whose key columns (and
    any read with them) are `file_keys` (the others are read only now that the file holds a key
    sought)."""
    at = pa.array(positions)
    taken = {k: file_keys.column(k).take(at) for k in file_keys.column_names if k in value_schema.names}
    if others:
        rest = read_file(f, others)
        taken.update((c, rest.column(c).take(at)) for c in others)
    return pa.Table.from_arrays([taken[c] for c in value_schema.names],
                                names=value_schema.names).cast(value_schema)


def match_keys(sought: pa.Table, rows: pa.Table, key_names: list[str]) -> np.ndarray:
    """For each row of `rows`, the index of its key among the (distinct) `sought` keys, or -1.

    Hash lookups per key column (`index_in`), no join: a single key column is looked up directly;
    several columns are coded column by column, each step's pair of codes re-coded densely among
    the sought keys (so codes stay below the number of keys sought).
    """
    if len(key_names) == 1:
        k = key_names[0]
        found = _sorted_match(sought.column(k), rows.column(k))
        if found is not None:
            return found
        return _codes_in(rows.column(k), sought.column(k).combine_chunks())
    sought_code: np.ndarray | None = None
    row_code = np.empty(0, np.int64)
    for k in key_names:
        values = pc.unique(sought.column(k))
        s = _codes_in(sought.column(k), values)
        r = _codes_in(rows.column(k), values)
        if sought_code is None:
            sought_code, row_code = s, r
            continue
        width = len(values)
        pair = sought_code * width + s
        dense, sought_code = np.unique(pair, return_inverse=True)
        row_pair = np.where((row_code >= 0) & (r >= 0), row_code * width + r, -1)
        at = np.minimum(np.searchsorted(dense, row_pair), len(dense) - 1)
        row_code = np.where((row_pair >= 0) & (dense[at] == row_pair), at, -1)
    assert sought_code is not None
    # The sought keys are distinct: their codes are a permutation of 0..n-1.
    index_of_code = np.empty(len(sought_code), np.int64)
    index_of_code[sought_code] = np.arange(len(sought_code), dtype=np.int64)
    return np.where(row_code >= 0, index_of_code[np.maximum(row_code, 0)], -1)


def match_rows(sought: pa.Table, rows: pa.Table, key_names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The rows of `rows` whose key is among the (distinct) `sought` keys: their positions,
    ascending, and the index of each one's key in `sought` (what `match_keys` gives, without an
    array as long as `rows` where one ascending integer key is binary-searched)."""
    if len(key_names) == 1:
        found = _sorted_positions(sought.column(key_names[0]), rows.column(key_names[0]))
        if found is not None:
            return found
    code = match_keys(sought, rows, key_names)
    positions = np.flatnonzero(code >= 0)
    return positions, code[positions]


def keys_held(sought: pa.Table, rows: pa.Table, key_names: list[str]) -> np.ndarray:
    """For each of the (distinct) `sought` keys, whether `rows` hold it (bool)."""
    held = np.zeros(sought.num_rows, dtype=bool)
    held[match_rows(sought, rows, key_names)[1]] = True
    return held


def integer_keys(column: pa.ChunkedArray) -> np.ndarray | None:
    """The values of one integer-like key column (dates and times by their stored integer) as
    int64, or None for other types or a column with nulls."""
    if not _integer_like(column.type) or column.null_count:
        return None
    return _integers(column)


def ascending_integer_keys(column: pa.ChunkedArray) -> np.ndarray | None:
    """A data file's integer-like key column as int64 when its values strictly ascend (as a
    data file's keys do); else None."""
    return _ascending_integers(column)


def _sorted_positions(sought: pa.ChunkedArray, column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray] | None:
    """`match_rows` for one integer-like key column whose values ascend in the file (a data file
    is sorted by key): each sought key binary-searched among the file's keys; None for other
    types, nulls, or a file whose keys do not ascend."""
    file_keys = _ascending_integers(column)
    if file_keys is None or not _integer_like(sought.type) or sought.null_count:
        return None
    keys = _integers(sought)
    if len(file_keys) == 0 or len(keys) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    if len(keys) > 1 and bool(np.all(keys[1:] > keys[:-1])):
        # Sorted keys (a run's): only those within the file's key range are searched, and the
        # positions found ascend as the keys do.
        first = int(np.searchsorted(keys, file_keys[0]))
        last = int(np.searchsorted(keys, file_keys[-1], side="right"))
        at = np.searchsorted(file_keys, keys[first:last])
        hit = np.flatnonzero(file_keys[at] == keys[first:last])
        return at[hit].astype(np.int64, copy=False), hit + first
    at = np.searchsorted(file_keys, keys)
    hit = np.flatnonzero(at < len(file_keys))
    hit = hit[file_keys[at[hit]] == keys[hit]]
    positions = at[hit]
    if len(positions) > 1 and not bool(np.all(positions[1:] > positions[:-1])):
        order = np.argsort(positions, kind="stable")  # (sought keys that did not come in key order)
        positions, hit = positions[order], hit[order]
    return positions, hit


def _integer_like(t: pa.DataType) -> bool:
    return (pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_timestamp(t)
            or pa.types.is_time(t))


def _ascending_integers(column: pa.ChunkedArray) -> np.ndarray | None:
    """A key column's values as int64 when it is integer-like, without nulls and strictly
    ascending; else None."""
    if not _integer_like(column.type) or column.null_count:
        return None
    values = _integers(column)
    if len(values) > 1 and not bool(np.all(values[1:] > values[:-1])):
        return None
    return values


def _sorted_match(sought: pa.ChunkedArray, column: pa.ChunkedArray) -> np.ndarray | None:
    """`match_keys` for one integer-like key column whose values in the file ascend (a data file is
    sorted by key): each sought key binary-searched among the file's keys, O(sought x log rows).
    None for other types, or a file whose keys do not ascend."""
    found = _sorted_positions(sought, column)
    if found is None:
        return None
    code = np.full(len(column), -1, np.int64)
    code[found[0]] = found[1]
    return code


def _integers(column: pa.ChunkedArray) -> np.ndarray:
    """The values of an integer-like column as int64 (dates and times by their stored integer)."""
    if isinstance(column, pa.ChunkedArray):
        # One chunk (a cached file's column) is used as it is: `combine_chunks` would copy it.
        array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    else:
        array = column
    width = array.type.bit_width
    signed = not pa.types.is_unsigned_integer(array.type)
    as_int = pa.int64() if width == 64 else pa.int32() if width == 32 else array.type
    if not pa.types.is_integer(array.type):
        array = array.view(as_int)
    values = array.to_numpy(zero_copy_only=False)
    if not signed and values.dtype == np.uint64:
        return values  # (uint64 keys do not occur in Paimon; kept exact, not wrapped)
    return values.astype(np.int64, copy=False)


def _codes_in(column: pa.ChunkedArray | pa.Array, values: pa.Array) -> np.ndarray:
    """The index of each value of `column` in `values` (int64), -1 where absent."""
    codes = pc.index_in(column, value_set=values)
    if isinstance(codes, pa.ChunkedArray):
        codes = codes.combine_chunks()
    return codes.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64, copy=True)


def _range(keys: pa.Table, key_names: list[str], comparable: Callable[[tuple[Any, ...]], Any]) -> tuple[Any, Any]:
    """The smallest and largest of `keys` in `comparable` form."""
    if len(key_names) == 1:
        bounds = pc.min_max(keys.column(key_names[0]))
        return comparable((bounds["min"].as_py(),)), comparable((bounds["max"].as_py(),))
    order = pc.sort_indices(keys, sort_keys=[(k, "ascending") for k in key_names])
    first, last = order[0].as_py(), order[len(order) - 1].as_py()
    row = keys.select(key_names)
    lo = tuple(row.column(k)[first].as_py() for k in key_names)
    hi = tuple(row.column(k)[last].as_py() for k in key_names)
    return comparable(lo), comparable(hi)
