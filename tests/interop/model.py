"""A tiny reference model of a Paimon table, and order-insensitive comparison with Arrow tables.

A primary-key table (deduplicate merge engine) is a dict key -> row: '+I'/'+U' rows replace the
row of their key, '-U'/'-D' rows remove it, and the last row of a key in a batch wins.  An append
table is a list of rows.  `canonical_rows` turns an Arrow table into a sorted list of tuples, with
every column first cast to the type the table declares (so a TIMESTAMP(3) read back as
microseconds, or a large_string, compares equal), timestamps as integer nanoseconds and NaN as a
marker, so two tables holding the same rows give equal lists.

The rest is shared by the interop tests: typed sample values (`SAMPLES`), batches of changes
(`change_batches`), table specifications (`Spec`, `pk_spec`, ...), writing a spec with our
engine (`write_ours`) and the pypaimon-side read snippet (`PYPAIMON_READ`).
"""

from __future__ import annotations

import datetime
import decimal
import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

ADD_KINDS = frozenset({"+I", "+U"})
RETRACT_KINDS = frozenset({"-U", "-D"})
_NAN = ("<NaN>",)


class TableModel:
    """The rows a table should hold after a sequence of committed batches."""

    def __init__(self, schema: pa.Schema, primary_keys: Sequence[str] = (),
                 rowkind_field: str | None = None):
        self.schema = schema
        self.primary_keys = list(primary_keys)
        self.rowkind_field = rowkind_field
        self._rows: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._append: list[dict[str, Any]] = []

    def copy(self) -> TableModel:
        other = TableModel(self.schema, self.primary_keys, self.rowkind_field)
        other._rows = dict(self._rows)
        other._append = list(self._append)
        return other

    def apply(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Apply one batch, in order (later rows of a key win)."""
        for row in rows:
            row = dict(row)
            if not self.primary_keys:
                self._append.append(row)
                continue
            key = tuple(row[k] for k in self.primary_keys)
            kind = row.get(self.rowkind_field, "+I") if self.rowkind_field else "+I"
            if kind in ADD_KINDS:
                self._rows[key] = row
            elif kind in RETRACT_KINDS:
                self._rows.pop(key, None)
            else:
                raise ValueError(f"unknown row kind {kind!r}")

    def overwrite(self, match: Mapping[str, Any], rows: Iterable[Mapping[str, Any]]) -> None:
        """Replace every row whose fields equal `match` by `rows` (an overwrite of a partition)."""
        def hit(r: Mapping[str, Any]) -> bool:
            return all(r[k] == v for k, v in match.items())

        self._rows = {k: r for k, r in self._rows.items() if not hit(r)}
        self._append = [r for r in self._append if not hit(r)]
        self.apply(rows)

    def rows(self) -> list[dict[str, Any]]:
        return list(self._rows.values()) if self.primary_keys else list(self._append)

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_pylist(self.rows(), schema=self.schema)

    def canonical(self, pypaimon_read: bool = False) -> list[tuple[Any, ...]]:
        return canonical_rows(self.to_arrow(), self.schema, pypaimon_read)


def _canonical_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    return t


def canonical_rows(table: pa.Table, schema: pa.Schema,
                   pypaimon_read: bool = False) -> list[tuple[Any, ...]]:
    """The rows of `table` (columns of `schema`, in its order) as a sorted list of plain tuples.

    With `pypaimon_read`, TIMESTAMP(9) values are floored to microseconds: pypaimon 2.1.0 writes
    nanoseconds to data files but its reader drops the last three digits, so rows compared with
    a pypaimon read must be compared at that precision."""
    missing = [n for n in schema.names if n not in table.column_names]
    if missing:
        raise AssertionError(f"table lacks columns {missing}; it has {table.column_names}")
    columns = []
    for f in schema:
        col = table.column(f.name)
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        target = _canonical_type(f.type)
        if col.type != target:
            col = pc.cast(col, target, safe=True)
        if pa.types.is_timestamp(target):
            col = pc.cast(pc.cast(col, pa.timestamp("ns", tz=target.tz)), pa.int64())
        values = col.to_pylist()
        if pypaimon_read and pa.types.is_timestamp(target) and target.unit == "ns":
            values = [None if v is None else v // 1000 * 1000 for v in values]
        columns.append([_canonical_value(v) for v in values])
    rows = list(zip(*columns, strict=True)) if columns else []
    return sorted(rows, key=_sort_key)


def _canonical_value(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return _NAN
    return v


def _sort_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, type(v).__name__, repr(v)) for v in row)


def diff(expected: list[tuple[Any, ...]], actual: list[tuple[Any, ...]], limit: int = 8) -> str:
    """A short human-readable description of how two canonical row lists differ."""
    exp, act = Counter(expected), Counter(actual)
    only_exp = sorted((exp - act).elements(), key=_sort_key)
    only_act = sorted((act - exp).elements(), key=_sort_key)
    return (f"expected {len(expected)} rows, got {len(actual)}; missing {len(only_exp)}: "
            f"{only_exp[:limit]}; unexpected {len(only_act)}: {only_act[:limit]}")


def assert_same_rows(expected: list[tuple[Any, ...]], actual: list[tuple[Any, ...]],
                     what: str = "") -> None:
    assert actual == expected, f"{what}: {diff(expected, actual)}"


# ---- sample values -------------------------------------------------------------------------
# One generator per Paimon type: `sample(i)` gives a value for index i (distinct for distinct i
# where the type has room), covering negatives, pre-epoch instants and values longer than the
# 7 bytes a BinaryRow stores inline.

_EPOCH = datetime.datetime(1970, 1, 1)
_CENTURY_US = 100 * 365 * 86400 * 10**6
_SPREAD = 0x9E3779B97F4A7C15F39CC0605CEDC8341082276BF3A27251  # a large odd multiplier


def _integer(bits: int, i: int) -> int:
    """The smallest and largest values for i = 0, 1, then values spread over the whole range."""
    low, span = -(2 ** (bits - 1)), 2**bits
    if i < 2:
        return low if i == 0 else low + span - 1
    return (i * _SPREAD) % span + low


def _decimal(precision: int, scale: int, i: int) -> decimal.Decimal:
    span = 10**precision
    unscaled = (i * _SPREAD) % span - span // 2
    return decimal.Decimal(f"{unscaled}E-{scale}")


def _string_short(i: int) -> str:
    return f"s{i}"


def _string_long(i: int) -> str:
    return ("ключ-" if i % 3 == 0 else "a-longer-key-") + f"{i:05d}"


def _bytes(i: int) -> bytes:
    return bytes([(i * 37 + j) % 256 for j in range(i % 11)]) + i.to_bytes(4, "big")


SAMPLES: dict[str, tuple[pa.DataType, Callable[[int], Any]]] = {
    "boolean": (pa.bool_(), lambda i: i % 2 == 0),
    "tinyint": (pa.int8(), lambda i: _integer(8, i)),
    "smallint": (pa.int16(), lambda i: _integer(16, i)),
    "int": (pa.int32(), lambda i: _integer(32, i)),
    "bigint": (pa.int64(), lambda i: _integer(64, i)),
    "float": (pa.float32(), lambda i: (i - 40) * 0.25),
    "double": (pa.float64(), lambda i: (i - 40) * 1.5e10 + 0.125),
    "decimal_10_2": (pa.decimal128(10, 2),
                     lambda i: _decimal(10, 2, i)),
    # DECIMAL(<=9) is written as INT32 and (<=18) as INT64, as Paimon's own writer does
    "decimal_5_2": (pa.decimal128(5, 2), lambda i: _decimal(5, 2, i)),
    "decimal_18_4": (pa.decimal128(18, 4), lambda i: _decimal(18, 4, i)),
    "decimal_38_6": (pa.decimal128(38, 6),
                     lambda i: _decimal(38, 6, i)),
    "string": (pa.string(), _string_short),
    "string_long": (pa.string(), _string_long),
    "bytes": (pa.binary(), _bytes),
    "date": (pa.date32(),
             lambda i: datetime.date(1915, 3, 31) + datetime.timedelta(days=(i * 97) % 60000)),
    "time": (pa.time32("ms"),
             lambda i: datetime.time(i * 5 % 24, i * 7 % 60, i * 11 % 60, i * 13 % 1000 * 1000)),
    "timestamp_3": (pa.timestamp("ms"),
                    lambda i: _EPOCH + datetime.timedelta(
                        milliseconds=(i * 98765432109) % _CENTURY_US // 1000 - 10**12)),
    "timestamp_6": (pa.timestamp("us"),
                    lambda i: _EPOCH + datetime.timedelta(
                        microseconds=(i * 98765432109871) % _CENTURY_US - 10**15)),
    "timestamp_0": (pa.timestamp("s"),
                    lambda i: _EPOCH + datetime.timedelta(seconds=(i * 9876543211) % 6_000_000_000
                                                          - 3_000_000_000)),
    "timestamp_9": (pa.timestamp("ns"),  # integer nanoseconds: datetime stops at microseconds
                    lambda i: (i * 98765432109871234) % (2**62) - 2**61),
    "binary_5": (pa.binary(5), lambda i: (i * 2654435761 % 2**40).to_bytes(5, "big")),
    "timestamp_ltz_6": (pa.timestamp("us", tz="UTC"),
                        lambda i: datetime.datetime(2001, 2, 3, tzinfo=datetime.timezone.utc)
                        + datetime.timedelta(microseconds=(i * 1234567891) % _CENTURY_US)),
}


# ---- batches of changes ----------------------------------------------------------------------

def change_batches(n_keys: int, commits: int, seed: int,
                   make_row: Callable[[int, int], dict[str, Any]],
                   rowkind_field: str = "rk", retract: bool = True) -> list[list[dict[str, Any]]]:
    """Batches of rows for a primary-key table whose row for key index i and version v is
    `make_row(i, v)`: first inserts of keys 0..n_keys-1, then per commit a shuffled mix of
    updates, deletes, '-U' retractions, deletes of absent keys, re-inserts, new keys and keys
    written two or three times in the same batch (the last one wins).  With `retract=False`
    every '-D'/'-U' becomes a '+U' and absent keys are not deleted (upserts only)."""
    rng = random.Random(seed)

    def row(i: int, v: int, kind: str) -> dict[str, Any]:
        if not retract and kind in RETRACT_KINDS:
            kind = "+U"
        return {**make_row(i, v), rowkind_field: kind}

    batches = [[row(i, 0, "+I") for i in range(n_keys)]]
    rng.shuffle(batches[0])
    next_key = n_keys
    for c in range(1, commits):
        groups: list[list[dict[str, Any]]] = []
        v = c * 10 + 1
        for i in range(next_key):
            op = rng.random()
            if op < 0.25:
                groups.append([row(i, v, "+U")])
            elif op < 0.35:
                groups.append([row(i, v, "-D")])
            elif op < 0.40:
                groups.append([row(i, v, "-U")])
            elif op < 0.50:
                groups.append([row(i, v, "+U"), row(i, v + 1, "+I"), row(i, v + 2, "+U")])
            elif op < 0.55:
                groups.append([row(i, v, "+I"), row(i, v + 1, "-D")])
            elif op < 0.60:
                groups.append([row(i, v, "-D"), row(i, v + 1, "+I")])
        added = max(2, n_keys // 10)
        groups += [[row(i, c * 10, "+I")] for i in range(next_key, next_key + added)]
        next_key += added
        if retract:
            groups.append([row(next_key + 1000, c * 10, "-D")])  # most likely an absent key
        rng.shuffle(groups)
        batches.append([r for group in groups for r in group])
    return batches


def value_row(i: int, v: int, types: Sequence[str], prefix: str = "c_") -> dict[str, Any]:
    """Value columns `<prefix><type>` of the sample types for key i, version v; some are null."""
    row: dict[str, Any] = {}
    for j, name in enumerate(types):
        _, sample = SAMPLES[name]
        row[prefix + name] = None if (i + v + j) % 6 == 0 else sample(i * 3 + v)
    return row


def value_fields(types: Sequence[str], prefix: str = "c_") -> list[pa.Field]:
    return [pa.field(prefix + name, SAMPLES[name][0]) for name in types]


def write_batch_file(path: str, rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> str:
    """Write rows for pypaimon to load with `load_batch`: parquet, plus the exact Arrow schema
    (parquet has no seconds unit, so a timestamp[s] column comes back as timestamp[ms])."""
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(list(rows), schema=schema), path)
    with open(path + ".schema", "wb") as f:
        f.write(schema.serialize().to_pybytes())
    return path


# The pypaimon side of a read: `ARGS["reads"]` lists {table, out, snapshot?, filter?, probe?};
# each result goes to the parquet file `out`, and the snippet emits {out: None | "EMPTY" | error}.
PYPAIMON_READ = """
import traceback
import pyarrow.parquet as pq

def load_batch(path):
    with open(path + ".schema", "rb") as f:
        schema = pa.ipc.read_schema(pa.py_buffer(f.read()))
    return pq.read_table(path).cast(schema)

def paimon_read(catalog, spec):
    t = catalog.get_table(spec["table"])
    if spec.get("snapshot") is not None:
        t = t.copy({"scan.snapshot-id": str(spec["snapshot"])})
    rb = t.new_read_builder()
    if spec.get("filter"):
        literals = pq.read_table(spec["probe"]).to_pylist()[0]
        pb = rb.new_predicate_builder()
        preds = [getattr(pb, method)(field, literals[field]) for method, field in spec["filter"]]
        rb = rb.with_filter(preds[0] if len(preds) == 1 else pb.and_predicates(preds))
    out = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    if out is None:
        return "EMPTY"
    pq.write_table(out, spec["out"])
    return None

def paimon_reads(catalog, specs):
    results = {}
    for spec in specs:
        try:
            results[spec["out"]] = paimon_read(catalog, spec)
        except Exception:
            results[spec["out"]] = "ERROR " + traceback.format_exc()[-3000:]
    return results
"""

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "equal": lambda a, b: a == b,
    "not_equal": lambda a, b: a != b,
    "less_than": lambda a, b: a < b,
    "less_or_equal": lambda a, b: a <= b,
    "greater_than": lambda a, b: a > b,
    "greater_or_equal": lambda a, b: a >= b,
}


def filter_rows(rows: Iterable[Mapping[str, Any]], filters: Sequence[tuple[str, str]],
                literals: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rows matching each (method, field) comparison with `literals[field]` (null: never)."""
    return [dict(r) for r in rows
            if all(r[f] is not None and _COMPARE[m](r[f], literals[f]) for m, f in filters)]


def read_result(status: str | None, path: str, schema: pa.Schema) -> list[tuple[Any, ...]]:
    """The canonical rows pypaimon wrote to `path`, failing with pypaimon's error if it had one
    (or with ours: a status starting with "OURS" says our engine failed before pypaimon ran)."""
    import pyarrow.parquet as pq

    if status is not None and status.startswith("OURS"):
        raise AssertionError(f"our engine failed to write the table:\n{status}")
    if status is not None and status != "EMPTY":
        raise AssertionError(f"pypaimon failed to read:\n{status}")
    if status == "EMPTY":
        return []
    return canonical_rows(pq.read_table(path), schema, pypaimon_read=True)


# ---- table specifications, shared by the interop tests -----------------------------------------

def _whole_millis_before_1970(value: Any) -> Any:
    """A timestamp sample with its part below a millisecond dropped before 1970 (an int is nanoseconds)."""
    if isinstance(value, int):
        return value if value >= 0 else value // 10**6 * 10**6
    return value if value >= _EPOCH else value.replace(microsecond=value.microsecond // 1000 * 1000)


# ORC files hold no TIMESTAMP before 1970 with a part below a millisecond: Paimon's Java ORC reader
# cannot read Arrow's encoding of one, so the engine refuses to write it (types-and-formats.md).
for _name in ("timestamp_6", "timestamp_9"):
    _type, _sample = SAMPLES[_name]
    SAMPLES[f"{_name}_orc"] = (_type, lambda i, f=_sample: _whole_millis_before_1970(f(i)))

ALL_VALUE_TYPES = [t for t in SAMPLES if not t.endswith("_orc")]
ORC_VALUE_TYPES = [f"{t}_orc" if f"{t}_orc" in SAMPLES else t for t in ALL_VALUE_TYPES]
KEY_TYPES = ["tinyint", "smallint", "int", "bigint", "string", "string_long", "bytes", "binary_5",
             "date", "timestamp_0", "timestamp_3", "timestamp_6", "timestamp_9", "timestamp_ltz_6",
             "decimal_10_2", "decimal_38_6", "float", "double", "boolean"]
BUCKETS = [1, 4, 7]
TWO_DATES = [datetime.date(1969, 12, 31), datetime.date(2024, 2, 29)]  # before epoch, leap day


@dataclass
class Read:
    """One pypaimon read of a table: optionally filtered (with literals) or at an older snapshot."""

    label: str
    filters: list[tuple[str, str]] = field(default_factory=list)
    literals: dict[str, Any] | Callable[[list[dict[str, Any]]], dict[str, Any]] = field(
        default_factory=dict)  # or a function of the rows the read should see
    after_commit: int | None = None  # time travel to the snapshot of commit N (1 = the first)


@dataclass
class Spec:
    """A table, the commits we write into it (each a list of write_arrow batches) and its reads."""

    name: str
    schema: pa.Schema
    primary_keys: list[str]
    partition_keys: list[str]
    options: dict[str, str]
    commits: list[list[list[dict[str, Any]]]]
    reads: list[Read] = field(default_factory=lambda: [Read("latest")])
    overwrite: tuple[dict[str, Any], list[dict[str, Any]]] | None = None


def one_batch_per_commit(batches: list[list[dict[str, Any]]]) -> list[list[list[dict[str, Any]]]]:
    return [[b] for b in batches]


def halves(batches: list[list[dict[str, Any]]]) -> list[list[list[dict[str, Any]]]]:
    """Each commit written as two write_arrow calls (a key may be in both halves)."""
    return [[b[: len(b) // 2], b[len(b) // 2:]] for b in batches]


def pk_spec(name: str, key_fields: list[pa.Field], partition_keys: list[str],
            key_of: Callable[[int], dict[str, Any]], n_keys: int, commits: int, bucket: int,
            value_types: list[str], seed: int, extra_options: dict[str, str] | None = None,
            split: bool = False, reads: list[Read] | None = None, retract: bool = True) -> Spec:
    """A primary-key table (plus a `rk` row-kind column) filled by `change_batches`."""
    schema = pa.schema(key_fields + value_fields(value_types) + [pa.field("rk", pa.string())])

    def make_row(i: int, v: int) -> dict[str, Any]:
        return {**key_of(i), **value_row(i, v, value_types)}

    batches = change_batches(n_keys, commits, seed, make_row, retract=retract)
    options = {"bucket": str(bucket), "rowkind.field": "rk", **(extra_options or {})}
    return Spec(name, schema, [f.name for f in key_fields], partition_keys, options,
                halves(batches) if split else one_batch_per_commit(batches),
                reads or [Read("latest")])


def median_key(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Literals for a key filter: the median of the keys `rows` hold."""
    keys = sorted(r["k"] for r in rows)
    return {"k": keys[len(keys) // 2]}


def key_type_spec(index: int, type_name: str, retract: bool = True, n_keys: int = 60,
                  commits: int = 3, buckets: Sequence[int] = BUCKETS) -> Spec:
    """A table keyed by one field `k` of the sample type `type_name`, its bucket count taken
    in turn from `buckets`; read whole, and filtered on `k` (but not for TIMESTAMP(9), whose
    literals pypaimon truncates to microseconds)."""
    arrow_type, sample = SAMPLES[type_name]
    reads = [Read("latest")]
    if type_name != "timestamp_9":
        reads += [Read("k_equal", [("equal", "k")], median_key),
                  Read("k_at_least", [("greater_or_equal", "k")], median_key)]
    return pk_spec(
        f"key_{type_name}", [pa.field("k", arrow_type)], [], lambda i: {"k": sample(i)},
        n_keys=n_keys, commits=commits, bucket=buckets[index % len(buckets)],
        value_types=["bigint", "string"], seed=100 + index, retract=retract, reads=reads)


PARTITION_TYPES = ["boolean", "tinyint", "bigint", "decimal_10_2", "date", "time", "timestamp_0",
                   "timestamp_3", "timestamp_6", "timestamp_ltz_6"]


def partition_type_spec(type_name: str, retract: bool = True) -> Spec:
    """A table partitioned by one field `p` of the sample type `type_name` (three values, among
    them negative numbers and pre-epoch instants), keyed by (p, id); read whole and filtered to
    one partition."""
    arrow_type, sample = SAMPLES[type_name]
    values = [sample(i) for i in (0, 2, 5)]

    def one_partition(rows: list[dict[str, Any]]) -> dict[str, Any]:
        return {"p": values[1]}

    return pk_spec(
        f"part_{type_name}", [pa.field("p", arrow_type), pa.field("id", pa.int64())], ["p"],
        lambda i: {"p": values[i % 3], "id": i}, n_keys=45, commits=2, bucket=2,
        value_types=["string"], seed=200, retract=retract,
        reads=[Read("latest"), Read("p_equal", [("equal", "p")], one_partition)])


@dataclass
class Committed:
    """The model after one commit and the snapshots that commit made: its own, and after it any a
    compaction at commit time added (they change no rows)."""

    first_id: int
    last_id: int
    model: TableModel


def state_at(history: Sequence[Committed], snapshot_id: int) -> TableModel:
    """The model snapshot `snapshot_id` shows: that of the last commit made at or before it."""
    seen = [c for c in history if c.first_id <= snapshot_id]
    assert seen, f"snapshot {snapshot_id} precedes every commit"
    return seen[-1].model


def latest_snapshot_id(table: Any) -> int:
    snapshot = table.latest_snapshot()
    return 0 if snapshot is None else snapshot.id


def commit_ours(table: Any, schema: pa.Schema, commit: Sequence[Sequence[Mapping[str, Any]]],
                model: TableModel, overwrite: Mapping[str, Any] | None = None) -> Committed:
    """One commit by our engine of `commit` (a list of write_arrow batches), applied to `model`
    too (a copy of which is kept); with `overwrite`, an overwrite of that partition."""
    before = latest_snapshot_id(table)
    wb = table.new_batch_write_builder()
    if overwrite is not None:
        wb = wb.overwrite(overwrite)
    w, c = wb.new_write(), wb.new_commit()
    for rows in commit:
        w.write_arrow(pa.Table.from_pylist(list(rows), schema=schema))
    c.commit(w.prepare_commit())
    w.close()
    c.close()
    if overwrite is not None:
        model.overwrite(overwrite, [r for rows in commit for r in rows])
    else:
        for rows in commit:
            model.apply(rows)
    return Committed(before + 1, latest_snapshot_id(table), model.copy())


def write_ours(catalog: Any, spec: Spec) -> list[Committed]:
    """Create and fill the table with this engine: its commits, then the overwrite if any."""
    from lakehouse_engine import Schema

    ident = f"db.{spec.name}"
    catalog.create_table(ident, Schema.from_pyarrow_schema(
        spec.schema, partition_keys=spec.partition_keys, primary_keys=spec.primary_keys,
        options=spec.options))
    table = catalog.get_table(ident)
    model = TableModel(spec.schema, spec.primary_keys, spec.options.get("rowkind.field"))
    history = [commit_ours(table, spec.schema, commit, model) for commit in spec.commits]
    if spec.overwrite is not None:
        match, rows = spec.overwrite
        full_rows = [{n: r.get(n) for n in spec.schema.names} for r in rows]
        history.append(commit_ours(table, spec.schema, [full_rows], model, overwrite=match))
    return history
