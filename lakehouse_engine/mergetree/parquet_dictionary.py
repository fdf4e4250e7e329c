"""Which columns of a parquet data or changelog file are dictionary-encoded.

A dictionary pays where values repeat: for a column of a few distinct values it is both smaller
and cheaper to write than plain encoding. For a near-unique column (ids, timestamps, free text,
sequence numbers) it costs two to three times the plain encode and makes the file larger: Java's
parquet-mr gives up on such a dictionary after its first page, pyarrow keeps one up to its 1 MiB
dictionary page. So, unless the table says otherwise, each column is judged by one strided sample
of the file's rows (4 * sqrt(rows) of them, 512 to 4,096; a small file whole):

* `_SEQUENCE_NUMBER` is written plain (its values are near-unique in every file) and
  `_VALUE_KIND` with a dictionary (at most four values); a `_KEY_<k>` column as its field `k`
  (the same values).
* Other columns: the number of distinct values in the file is estimated from the sample
  (Chao's estimator: the values seen once and twice tell how many were not seen) and the column
  dictionary-encoded when that is at most an eighth of its rows and the dictionary fits the
  writer's dictionary page. Measured on a 250,000-row column: at a tenth of the rows distinct, a
  dictionary is already smaller and faster to write than plain; at a third, slower.
  BOOLEAN and nested columns are written plain.

Paimon's options win over the choice: `parquet.enable.dictionary` (Paimon 0.9: every column
with a dictionary, `true`, or none, `false`) and `parquet.enable.dictionary#<column>` (later
Paimon, through parquet's column config: one file column, by its name in the file, such as
`name` or `_KEY_id`; a nested leaf by its dotted path).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.errors import InvalidOptionError
from lakehouse_engine.schema import KEY_FIELD_PREFIX, SEQUENCE_NUMBER, VALUE_KIND

#: Paimon's (parquet's) option: dictionary encoding of every column, or (`#<column>`) of one.
ENABLE_DICTIONARY = "parquet.enable.dictionary"
COLUMN_PREFIX = ENABLE_DICTIONARY + "#"

_SAMPLE = 4096
_MIN_SAMPLE = 512
#: A column is dictionary-encoded when its estimated distinct values are at most rows / this.
_ROWS_PER_DISTINCT = 8
#: Small files: a column of at most this many distinct values always takes a dictionary.
_FEW = 4
#: pyarrow's `dictionary_pagesize_limit`: past it the writer falls back to plain encoding, the
#: values hashed until then wasted.
_DICTIONARY_PAGE_BYTES = 1 << 20


def _parse(key: str, text: str) -> bool:
    low = text.strip().lower()
    if low not in ("true", "false"):
        raise InvalidOptionError(f"option '{key}' has invalid value {text!r}: expected 'true' or 'false'")
    return low == "true"


def check_dictionary_options(raw: Mapping[str, str]) -> None:
    """InvalidOptionError naming a `parquet.enable.dictionary[#<column>]` option not true or false."""
    for key, text in raw.items():
        if key == ENABLE_DICTIONARY or key.startswith(COLUMN_PREFIX):
            _parse(key, text)


def dictionary_columns(table: pa.Table, raw: Mapping[str, str] | None = None) -> bool | list[str]:
    """pyarrow's `use_dictionary` for a parquet file of `table` (in file layout): True or False
    for every column, else the column paths to dictionary-encode (see the module docstring).

    `raw`: the table's options; `parquet.enable.dictionary` and its per-column keys win.
    """
    raw = raw or {}
    explicit = {key[len(COLUMN_PREFIX):]: _parse(key, text)
                for key, text in raw.items() if key.startswith(COLUMN_PREFIX)}
    given = raw.get(ENABLE_DICTIONARY)
    if given is not None and not explicit:
        return _parse(ENABLE_DICTIONARY, given)
    paths = _leaf_paths(table.schema)
    if given is not None:
        chosen = set(paths) if _parse(ENABLE_DICTIONARY, given) else set()
    else:
        chosen = set(_chosen(table))
    # A column the file does not have is passed over, as parquet's column config does.
    return [p for p in paths if explicit.get(p, p in chosen)]


def _leaf_paths(schema: pa.Schema) -> list[str]:
    paths: list[str] = []

    def walk(prefix: str, t: pa.DataType) -> None:
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                walk(f"{prefix}.{t.field(i).name}", t.field(i).type)
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(f"{prefix}.list.element", t.value_type)
        elif pa.types.is_map(t):
            walk(f"{prefix}.key_value.key", t.key_type)
            walk(f"{prefix}.key_value.value", t.item_type)
        else:
            paths.append(prefix)

    for f in schema:
        walk(f.name, f.type)
    return paths


def _chosen(table: pa.Table) -> list[str]:
    """The columns our own judgement dictionary-encodes (no option set)."""
    n = table.num_rows
    names = table.column_names
    # A `_KEY_<k>` column holds the values of its field `k`: judged once, as `k`.
    fields = {name: name.removeprefix(KEY_FIELD_PREFIX) if name.removeprefix(KEY_FIELD_PREFIX) in names
              else name for name in names if name not in (SEQUENCE_NUMBER, VALUE_KIND)}
    judged = list(dict.fromkeys(fields.values()))
    size = _sample_size(n)
    sample = table.select(judged)
    if size < n:
        # Taken batch by batch: `take` on a run of many chunks would first concatenate each judged
        # column, a copy of the whole run (the bounded-memory test's rescale saw it).
        wanted = np.linspace(0, n - 1, size).astype(np.int64)
        parts, start = [], 0
        for batch in sample.to_batches():
            end = start + batch.num_rows
            lo, hi = np.searchsorted(wanted, [start, end])
            if hi > lo:
                parts.append(batch.take(pa.array(wanted[lo:hi] - start)))
            start = end
        sample = pa.Table.from_batches(parts, schema=sample.schema)
    pays = {name: _pays(sample.column(name), n) for name in judged}
    return [name for name in names if name == VALUE_KIND or (name in fields and pays[fields[name]])]


def _sample_size(rows: int) -> int:
    """Rows sampled: enough that a column of rows / 8 distinct values shows some 60 repeats in the
    sample (what Chao's estimate needs), at most `_SAMPLE`."""
    return min(rows, max(_MIN_SAMPLE, min(_SAMPLE, int(4 * rows ** 0.5))))


def _pays(values: pa.ChunkedArray | pa.Array, rows: int) -> bool:
    """Whether a column of `rows` rows, of which `values` is a strided sample (or all), is worth a
    dictionary."""
    t = values.type
    if pa.types.is_boolean(t) or pa.types.is_nested(t) or pa.types.is_null(t):
        return False
    counts = pc.value_counts(values).field("counts").to_numpy(zero_copy_only=False)
    seen = len(counts)
    if len(values) == rows:
        distinct = float(seen)  # the whole column: exact
    else:
        once = int(np.count_nonzero(counts == 1))
        twice = int(np.count_nonzero(counts == 2))
        # Chao1 (bias-corrected): the values not sampled, from those sampled once and twice.
        distinct = seen + once * (once - 1) / (2.0 * (twice + 1))
    if distinct <= _FEW:
        return True
    if distinct > rows / _ROWS_PER_DISTINCT:
        return False
    return distinct * _value_width(values) <= _DICTIONARY_PAGE_BYTES


def _value_width(values: pa.ChunkedArray | pa.Array) -> float:
    """Bytes one value takes in a dictionary page (a variable-length value: its length + 4)."""
    t = values.type
    if pa.types.is_binary(t) or pa.types.is_string(t) or pa.types.is_large_binary(t) \
            or pa.types.is_large_string(t):
        present = max(len(values) - values.null_count, 1)
        lengths = pc.sum(pc.binary_length(values)).as_py() or 0
        return lengths / present + 4
    try:
        return max(t.bit_width // 8, 1)
    except ValueError:
        return 16.0
