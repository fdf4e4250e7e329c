"""Commands for a table's changes and its consumers: `changes` (a range of snapshots, with row
kinds), `consumers` (list), and Paimon's procedures `reset-consumer` and `clear-consumers`."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from lakehouse_engine.cli.args import (
    UsageError,
    check_columns,
    column_list,
    non_negative_int,
    positive_int,
)
from lakehouse_engine.cli.browse import Subparsers, add_table_arguments
from lakehouse_engine.cli.context import Context
from lakehouse_engine.cli.output import Column, format_value, plural, table_or_note
from lakehouse_engine.errors import InvalidOptionError
from lakehouse_engine.options import CHANGELOG_PRODUCER
from lakehouse_engine.read.changes import CHANGELOG, DELTA, read_changes
from lakehouse_engine.read.incremental import IncrementalRange, IncrementalRead, IncrementalScan


def register(subparsers: Subparsers, parents: list[argparse.ArgumentParser]) -> None:
    """Add `changes`, `consumers`, `reset-consumer` and `clear-consumers` to the parser."""
    p = _parser(subparsers, parents, "changes",
                "the changes of a range of snapshots, each row with its kind (+I, -U, +U, -D)")
    p.add_argument("--from", dest="start", type=non_negative_int, required=True, metavar="ID",
                   help="start snapshot, exclusive (0: from the first)")
    p.add_argument("--to", dest="end", type=positive_int, metavar="ID", help="end snapshot, inclusive (default: latest)")
    p.add_argument("--mode", choices=("auto", DELTA, CHANGELOG, "diff"), default="auto",
                   help="delta: files of APPEND snapshots; changelog: changelog files; diff: the end "
                        "against the start per key; auto: changelog when the table has a producer")
    p.add_argument("--merged", action="store_true",
                   help="one row per changed key (Paimon's incremental-between), not every change")
    p.add_argument("--columns", type=column_list, metavar="A,B", help="only these columns")
    p.set_defaults(run=run_changes)

    p = _parser(subparsers, parents, "consumers", "list a table's consumers and the snapshot each reads next")
    p.set_defaults(run=run_consumers)

    p = _parser(subparsers, parents, "reset-consumer",
                "set where a consumer reads next; without --next-snapshot, delete it (Paimon's reset_consumer)")
    p.add_argument("--consumer-id", required=True, metavar="ID", help="the consumer")
    p.add_argument("--next-snapshot", type=positive_int, metavar="ID", help="the snapshot it reads next")
    p.set_defaults(run=run_reset_consumer)

    p = _parser(subparsers, parents, "clear-consumers",
                "delete the consumers whose id matches a pattern (Paimon's clear_consumers)")
    p.add_argument("--including-consumers", default=".*", metavar="REGEX", help="ids to delete (default: all)")
    p.add_argument("--excluding-consumers", metavar="REGEX", help="ids to keep")
    p.set_defaults(run=run_clear_consumers)


def _parser(subparsers: Subparsers, parents: list[argparse.ArgumentParser], name: str,
            summary: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        name, parents=parents, help=summary, description=summary[0].upper() + summary[1:] + ".")
    add_table_arguments(p)
    return p


def run_changes(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    latest = table.snapshot_manager().latest_snapshot_id() or 0
    end = args.end if args.end is not None else latest
    if end < args.start:
        raise UsageError(f"--to {end} is before --from {args.start}")
    columns = check_columns(table, args.columns) if args.columns else None
    if args.merged or args.mode == "diff":
        mode = args.mode
        if mode == "auto":
            mode = CHANGELOG if table.options.require(CHANGELOG_PRODUCER) != "none" else DELTA
        scan = IncrementalScan(table.store, None, IncrementalRange(args.start, end, mode))
        read = IncrementalRead(table.store, columns, keep_delete=args.mode == "diff", include_row_kind=True)
        result = read.to_arrow(scan.plan().splits())
    else:
        result = read_changes(table.store, args.start, end, None if args.mode == "auto" else args.mode, columns)
    rows = result.to_pylist()
    shown = [Column(n, n, lambda v: format_value(v, null="NULL")) for n in result.column_names]

    def human() -> Iterator[str]:
        yield from table_or_note(rows, shown, f"no changes in snapshots ({args.start}, {end}] of {table.name}")
        if rows:
            yield f"({plural(len(rows), 'change')} in snapshots ({args.start}, {end}])"

    ctx.out.emit({"table": table.name, "from": args.start, "to": end, "columns": result.column_names,
                  "rows": rows}, human)


def run_consumers(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    records: list[dict[str, Any]] = [{"consumer_id": cid, "next_snapshot": n}
                                     for cid, n in sorted(table.consumer_manager().consumers().items())]
    columns = [Column("consumer_id", "consumer"), Column("next_snapshot", "next snapshot", right=True)]
    ctx.out.emit({"table": table.name, "consumers": records},
                 lambda: table_or_note(records, columns, f"table {table.name} has no consumers"))


def run_reset_consumer(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    cm = table.consumer_manager()
    if args.next_snapshot is None:
        cm.delete_consumer(args.consumer_id)
        message = f"deleted consumer {args.consumer_id} of {table.name}"
    else:
        latest = table.snapshot_manager().latest_snapshot_id() or 0
        if args.next_snapshot > latest + 1:
            # A position past the next commit skips the commits before it when they come.
            raise InvalidOptionError(f"--next-snapshot {args.next_snapshot} is after the snapshot {table.name} "
                                     f"commits next ({latest + 1})")
        cm.reset_consumer(args.consumer_id, args.next_snapshot)
        message = f"consumer {args.consumer_id} of {table.name} reads snapshot {args.next_snapshot} next"
    ctx.out.emit({"table": table.name, "consumer_id": args.consumer_id, "next_snapshot": args.next_snapshot},
                 lambda: [message])


def run_clear_consumers(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    gone = table.consumer_manager().clear_consumers(args.including_consumers, args.excluding_consumers)
    ctx.out.emit({"table": table.name, "deleted": gone},
                 lambda: [f"deleted {plural(len(gone), 'consumer')} of {table.name}"
                          + (f": {', '.join(gone)}" if gone else "")])



