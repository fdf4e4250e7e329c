"""Argument values of the CLI: parsed and checked before any table is opened, or after, against it."""

from __future__ import annotations

import argparse
import datetime
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse_engine.catalog import Identifier
from lakehouse_engine.errors import InvalidIdentifierError

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore
    from lakehouse_engine.table import FileStoreTable

_EPOCH_MILLIS_RE = re.compile(r"^\d+$")


class UsageError(Exception):
    """An argument that parsed but does not fit the table (an unknown column or partition key)."""


# ---- argparse `type=` functions (raise ArgumentTypeError: argparse turns it into exit code 2) ----
def positive_int(text: str) -> int:
    """An integer of at least 1 (snapshot ids, bucket counts, retention counts)."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be 1 or greater")
    return value


def non_negative_int(text: str) -> int:
    """An integer of at least 0 (row limits)."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or greater")
    return value


def _integer(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def table_identifier(text: str) -> str:
    """A `database.table` name, validated the way the catalog validates it."""
    try:
        return Identifier.parse(text).full_name()
    except InvalidIdentifierError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def timestamp_millis(text: str) -> int:
    """Epoch milliseconds, or a time such as `2026-11-01 12:00:00` (local time, as Paimon reads it).

    Also accepted: a date alone (midnight), `T` between date and time, fractions of a second, and
    an explicit offset (`+02:00` or `Z`).
    """
    raw = text.strip()
    if _EPOCH_MILLIS_RE.match(raw):
        return int(raw)
    iso = raw[:-1] + "+00:00" if raw.endswith(("Z", "z")) else raw
    try:
        moment = datetime.datetime.fromisoformat(iso)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither epoch milliseconds nor a time like '2026-11-01 12:00:00'") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # a naive time is local time
    return round(moment.timestamp() * 1000)


def column_list(text: str) -> list[str]:
    """Comma-separated column names, at least one, none twice."""
    names = [n.strip() for n in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"{text!r} has an empty column name")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"{text!r} names {', '.join(twice)} more than once")
    return names


def tag_name(text: str) -> str:
    """One tag name: not empty, not only blanks (argparse then names the flag in its error)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not a tag name: a tag name cannot be empty or blank")
    return text


def name_list(text: str) -> list[str]:
    """Comma-separated names (tags), at least one."""
    names = [n.strip() for n in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"{text!r} has an empty name: a tag name cannot be empty or blank")
    return list(dict.fromkeys(names))


def partition_specs(text: str) -> list[dict[str, str]]:
    """Paimon's partition filter syntax: `;` separates partitions, `,` the keys of one partition.

    `dt=2026-11-01;dt=2026-11-02` is two partitions; `dt=2026-11-01,hh=08` is one partition of a
    table partitioned by `dt` and `hh`.
    """
    specs = []
    for part in text.split(";"):
        if not part.strip():
            continue
        spec: dict[str, str] = {}
        for pair in part.split(","):
            key, sep, value = pair.partition("=")
            key = key.strip()
            if not sep or not key:
                raise argparse.ArgumentTypeError(
                    f"{pair.strip()!r} in {text!r} is not key=value (e.g. 'dt=2026-11-01')")
            if key in spec:
                raise argparse.ArgumentTypeError(
                    f"{part!r} gives '{key}' twice; separate partitions with ';' as Paimon does, "
                    f"e.g. '{key}={spec[key]};{key}={value.strip()}'")
            spec[key] = value.strip()
        specs.append(spec)
    if not specs:
        raise argparse.ArgumentTypeError(f"{text!r} names no partition")
    return specs


# ---- checks against the table -----------------------------------------------------------------
def check_columns(table: FileStoreTable | FileStore, columns: Sequence[str]) -> list[str]:
    """`columns` when all are fields of the table (or `col.field` of a ROW column); UsageError
    naming the others and the fields."""
    from lakehouse_engine.read.nested_projection import projection_path

    names = table.schema.field_names
    unknown = [c for c in columns if projection_path(table.schema, c) is None]
    if unknown:
        raise UsageError(f"--columns names {', '.join(unknown)}, not field(s) of table {table.name}; "
                         f"its fields are {', '.join(names)}")
    return list(columns)


def typed_partitions(table: FileStoreTable, specs: Sequence[dict[str, str]] | None
                     ) -> list[dict[str, Any]] | None:
    """Partition specs with values of the partition fields' types (`dt=2026-11-01` for a DATE is a date).

    The default partition name (`partition.default-name`) stands for null.
    """
    if not specs:
        return None
    keys = list(table.schema.partition_keys)
    if not keys:
        raise UsageError(f"--partitions was given but table {table.name} is not partitioned")
    default_name = table.store.partition_codec().default_name
    typed = []
    for spec in specs:
        values: dict[str, Any] = {}
        for key, text in spec.items():
            if key not in keys:
                raise UsageError(f"--partitions names '{key}', which is not a partition key of table "
                                 f"{table.name}; its partition keys are {', '.join(keys)}")
            values[key] = None if text == default_name else _typed_value(table, key, text)
        typed.append(values)
    return typed


def check_partitions_match(table: FileStoreTable, specs: Sequence[dict[str, Any]] | None) -> None:
    """PartitionNotFoundError naming every spec that matches no partition of the latest snapshot.

    Checked before any work, so a mistyped day fails loudly instead of "nothing to do".
    """
    from lakehouse_engine.cli.context import PartitionNotFoundError

    if not specs:
        return
    snapshot = table.latest_snapshot()
    codec = table.store.partition_codec()
    binaries = {e.partition for e in table.store.manifest_io().live_entries(snapshot)} if snapshot else set()
    live = [codec.from_binary(b) for b in binaries]
    unmatched = [spec for spec in specs if not any(p.matches([spec]) for p in live)]
    if unmatched:
        names = "; ".join(",".join(f"{k}={v}" for k, v in spec.items()) for spec in unmatched)
        known = sorted(p.path_string() for p in live)
        shown = ", ".join(known[:5]) + (f" and {len(known) - 5} more" if len(known) > 5 else "")
        raise PartitionNotFoundError(
            f"--partitions {names} matches no partition of table {table.name}; "
            + (f"its partitions are {shown}" if known else "the table has no data files yet"))


def _typed_value(table: FileStoreTable, key: str, text: str) -> Any:
    dtype = table.schema.field(key).type
    try:
        return pa.array([text], pa.string()).cast(dtype.to_arrow()).to_pylist()[0]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise UsageError(f"--partitions value {text!r} of '{key}' is not a valid {dtype.to_string()}"
                         ) from None
