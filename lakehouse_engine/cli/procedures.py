"""Commands that change a table, named and shaped after Paimon's Spark procedures (`CALL sys.<name>`):
compact, rescale, expire-snapshots, remove-orphan-files, rollback, rollback-to-timestamp,
create-tag, delete-tag, rename-tag and replace-tag; and the table management of Paimon's SQL
(`ALTER TABLE ... RENAME TO`, `... DROP PARTITION`): rename-table and drop-partition."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from lakehouse_engine.cli.args import (
    UsageError,
    check_partitions_match,
    name_list,
    partition_specs,
    positive_int,
    table_identifier,
    tag_name,
    timestamp_millis,
    typed_partitions,
)
from lakehouse_engine.cli.browse import Subparsers, add_table_arguments
from lakehouse_engine.cli.context import Context, engine_method
from lakehouse_engine.cli.output import Column, format_millis, plural, table_or_note
from lakehouse_engine.errors import SnapshotNotExistError

_PARTITIONS_HELP = ("partitions to work on, in Paimon's syntax: ';' between partitions, ',' between "
                    "the keys of one (e.g. 'dt=2026-11-01;dt=2026-11-02'); may be repeated")
_OLDER_THAN_HELP = "epoch milliseconds or a local time like '2026-11-01 12:00:00'"


def register(subparsers: Subparsers, parents: list[argparse.ArgumentParser]) -> None:
    """Add the maintenance commands to the `lakehouse` parser."""
    p = _procedure_parser(subparsers, parents, "compact",
                          "compact buckets: merge sorted runs (minor) or rewrite each bucket whole (full)")
    strategy = p.add_mutually_exclusive_group()
    strategy.add_argument("--full", action="store_true",
                          help="full compaction (same as --compact-strategy full)")
    strategy.add_argument("--compact-strategy", choices=("full", "minor"),
                          help="Paimon's argument: 'minor' (the default here) or 'full'")
    p.add_argument("--partitions", type=partition_specs, action="append", metavar="SPEC",
                   help=_PARTITIONS_HELP)
    p.set_defaults(run=run_compact)

    p = _procedure_parser(subparsers, parents, "rescale",
                          "rewrite partitions into a new number of buckets")
    p.add_argument("--bucket-num", type=positive_int, required=True, metavar="N",
                   help="the new bucket count")
    p.add_argument("--partitions", type=partition_specs, action="append", metavar="SPEC",
                   help=_PARTITIONS_HELP + "; default: the whole table")
    p.set_defaults(run=run_rescale)

    p = _procedure_parser(subparsers, parents, "expire-snapshots",
                          "expire old snapshots and delete the files only they reference")
    p.add_argument("--retain-max", type=positive_int, metavar="N", help="keep at most N snapshots")
    p.add_argument("--retain-min", type=positive_int, metavar="N", help="keep at least N snapshots")
    p.add_argument("--older-than", type=timestamp_millis, metavar="TIME",
                   help="expire snapshots committed before TIME: " + _OLDER_THAN_HELP)
    p.add_argument("--max-deletes", type=positive_int, metavar="N",
                   help="expire at most N snapshots in this run")
    p.set_defaults(run=run_expire_snapshots)

    p = _procedure_parser(subparsers, parents, "expire-changelogs",
                          "expire long-lived changelogs past the table's changelog.* retention")
    p.set_defaults(run=run_expire_changelogs)

    p = _procedure_parser(subparsers, parents, "remove-orphan-files",
                          "delete files that no snapshot or tag references")
    p.add_argument("--older-than", type=timestamp_millis, metavar="TIME",
                   help="only files last modified before TIME (default: one day ago): " + _OLDER_THAN_HELP)
    p.add_argument("--dry-run", action="store_true", help="list the orphan files, delete nothing")
    p.set_defaults(run=run_remove_orphan_files)

    p = _procedure_parser(subparsers, parents, "rollback",
                          "make an earlier snapshot or a tag the latest; later snapshots are removed")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--snapshot", type=positive_int, metavar="ID", help="snapshot id to roll back to")
    target.add_argument("--tag", type=tag_name, metavar="NAME", help="tag to roll back to")
    p.set_defaults(run=run_rollback)

    p = _procedure_parser(subparsers, parents, "rollback-to-timestamp",
                          "roll back to the newest snapshot committed at or before a time")
    p.add_argument("--timestamp", required=True, type=timestamp_millis, metavar="TIME",
                   help="the time: " + _OLDER_THAN_HELP)
    p.set_defaults(run=run_rollback_to_timestamp)

    p = _procedure_parser(subparsers, parents, "create-tag", "keep a snapshot under a name")
    _tag_arguments(p)
    p.set_defaults(run=run_create_tag)

    p = _procedure_parser(subparsers, parents, "replace-tag", "point an existing tag at another snapshot")
    _tag_arguments(p)
    p.set_defaults(run=run_replace_tag)

    p = _procedure_parser(subparsers, parents, "rename-tag", "rename a tag")
    p.add_argument("--tag", required=True, type=tag_name, metavar="NAME", help="the tag's name")
    p.add_argument("--target-tag", required=True, type=tag_name, metavar="NEW", help="its new name")
    p.set_defaults(run=run_rename_tag)

    p = _sql_parser(subparsers, parents, "rename-table", "rename a table (ALTER TABLE ... RENAME TO)")
    p.add_argument("target", metavar="NEW_TABLE", type=table_identifier, help="the new name, database.table")
    p.set_defaults(run=run_rename_table)

    p = _sql_parser(subparsers, parents, "drop-partition",
                    "delete every row of partitions in one snapshot (ALTER TABLE ... DROP PARTITION)")
    p.add_argument("--partitions", type=partition_specs, action="append", metavar="SPEC", required=True,
                   help=_PARTITIONS_HELP)
    p.set_defaults(run=run_drop_partition)

    p = _procedure_parser(subparsers, parents, "delete-tag", "delete tags")
    p.add_argument("--tag", required=True, type=name_list, metavar="NAME[,NAME...]",
                   help="the tag(s) to delete, comma-separated as Paimon takes them")
    p.set_defaults(run=run_delete_tag)


def _tag_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of the procedures that point a tag at a snapshot (create-tag, replace-tag)."""
    p.add_argument("--tag", required=True, type=tag_name, metavar="NAME", help="the tag's name")
    p.add_argument("--snapshot", type=positive_int, metavar="ID", help="snapshot id (default: latest)")
    p.add_argument("--time-retained", metavar="DURATION",
                   help="how long the tag is kept, recorded in the tag (e.g. '1 d', '12 h')")


def _procedure_parser(subparsers: Subparsers, parents: list[argparse.ArgumentParser], name: str,
                      summary: str) -> argparse.ArgumentParser:
    paimon = name.replace("-", "_")
    p: argparse.ArgumentParser = subparsers.add_parser(
        name, parents=parents, help=summary,
        description=f"{summary[0].upper()}{summary[1:]} (Paimon: CALL sys.{paimon}).")
    add_table_arguments(p)
    return p


def _sql_parser(subparsers: Subparsers, parents: list[argparse.ArgumentParser], name: str,
                summary: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        name, parents=parents, help=summary, description=f"{summary[0].upper()}{summary[1:]}.")
    add_table_arguments(p)
    return p


def _flatten(specs: list[list[dict[str, str]]] | None) -> list[dict[str, str]] | None:
    return [s for group in specs for s in group] if specs else None


def _snapshot_ids(result: Any) -> list[int]:
    """The snapshot ids a procedure reports, whether it returns one id, a list or nothing."""
    if result is None:
        return []
    if isinstance(result, int):
        return [result]
    return [int(i) for i in result]


def _committed(ids: list[int]) -> str:
    if not ids:
        return "nothing to do, no snapshot committed"
    return f"committed snapshot{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))}"


# ---- compact and rescale ------------------------------------------------------------------------
def run_compact(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    full = args.full or args.compact_strategy == "full"
    partitions = typed_partitions(table, _flatten(args.partitions))
    check_partitions_match(table, partitions)
    with ctx.progress(f"compacting {table.name}"):
        ids = _snapshot_ids(table.compact(full=full, partitions=partitions))
    strategy = "full" if full else "minor"
    ctx.out.emit(
        {"table": table.name, "compact_strategy": strategy, "partitions": partitions,
         "snapshot_ids": ids},
        lambda: [f"{strategy} compaction of {table.name}: {_committed(ids)}"])


def run_rescale(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    partitions = typed_partitions(table, _flatten(args.partitions))
    check_partitions_match(table, partitions)
    rescale = engine_method(table, "rescale")
    with ctx.progress(f"rescaling {table.name} to {args.bucket_num} buckets"):
        ids = _snapshot_ids(rescale(args.bucket_num, partitions=partitions))
    ctx.out.emit(
        {"table": table.name, "bucket_num": args.bucket_num, "partitions": partitions,
         "snapshot_ids": ids},
        lambda: [f"rescaled {table.name} to {plural(args.bucket_num, 'bucket')}: {_committed(ids)}"])


# ---- snapshot lifecycle -------------------------------------------------------------------------
def run_expire_changelogs(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    with ctx.progress(f"expiring changelogs of {table.name}"):
        expired = table.expire_changelogs()
    remaining = table.store.snapshot_manager().list_long_lived_changelog_ids()

    def human() -> Iterator[str]:
        kept = (f"changelogs {remaining[0]}..{remaining[-1]} remain" if len(remaining) > 1 else
                f"changelog {remaining[0]} remains" if remaining else "no long-lived changelog remains")
        yield f"expired {plural(expired, 'long-lived changelog')} of {table.name}; {kept}"

    ctx.out.emit({"table": table.name, "expired": expired,
                  "earliest_changelog_id": remaining[0] if remaining else None,
                  "latest_changelog_id": remaining[-1] if remaining else None}, human)


def run_expire_snapshots(args: argparse.Namespace, ctx: Context) -> None:
    if args.retain_min is not None and args.retain_max is not None and args.retain_min > args.retain_max:
        raise UsageError(f"--retain-min ({args.retain_min}) must not be greater than "
                         f"--retain-max ({args.retain_max})")
    table = ctx.table(args.warehouse, args.table)
    with ctx.progress(f"expiring snapshots of {table.name}"):
        expired = table.expire_snapshots(retain_max=args.retain_max, retain_min=args.retain_min,
                                         older_than=args.older_than, max_deletes=args.max_deletes)
    remaining = table.snapshot_manager().list_snapshot_ids()

    def human() -> Iterator[str]:
        kept = (f"snapshots {remaining[0]}..{remaining[-1]} remain" if len(remaining) > 1 else
                f"snapshot {remaining[0]} remains" if remaining else "no snapshots remain")
        yield f"expired {plural(expired, 'snapshot')} of {table.name}; {kept}"

    ctx.out.emit({"table": table.name, "expired": expired,
                  "earliest_snapshot_id": remaining[0] if remaining else None,
                  "latest_snapshot_id": remaining[-1] if remaining else None}, human)


def run_remove_orphan_files(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    with ctx.progress(f"looking for orphan files of {table.name}"):
        files = list(table.remove_orphan_files(older_than=args.older_than, dry_run=args.dry_run))
    records = [{"path": f} for f in sorted(files)]

    def human() -> Iterator[str]:
        yield from table_or_note(records, [Column("path", "orphan file")],
                                 f"no orphan files in {table.name}")
        if records:
            verb = "would delete" if args.dry_run else "deleted"
            yield f"{verb} {plural(len(records), 'orphan file')}" + \
                  (" (dry run: nothing was deleted)" if args.dry_run else "")

    ctx.out.emit({"table": table.name, "dry_run": args.dry_run, "older_than_millis": args.older_than,
                  "files": files, "count": len(files)}, human)


def run_rollback(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    # rollback_to checks the target before changing anything, and also accepts an expired
    # snapshot that a tag still holds (it restores it from the tag).
    with ctx.progress(f"rolling back {table.name}"):
        table.rollback_to(args.snapshot if args.snapshot is not None else args.tag)
    latest = table.latest_snapshot()
    target = f"snapshot {args.snapshot}" if args.snapshot is not None else f"tag '{args.tag}'"

    def human() -> Iterator[str]:
        now = f"snapshot {latest.id} is the latest" if latest else "the table has no snapshots"
        yield f"rolled {table.name} back to {target}; {now}"

    ctx.out.emit({"table": table.name, "snapshot_id": args.snapshot, "tag": args.tag,
                  "latest_snapshot_id": latest.id if latest else None}, human)


def run_create_tag(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    if args.snapshot is not None:
        table.snapshot(args.snapshot)  # fail with the engine's message before changing anything
    table.create_tag(args.tag, args.snapshot, time_retained=args.time_retained)
    tagged = table.tags().get(args.tag)
    snapshot_id = tagged.id if tagged is not None else args.snapshot

    def human() -> Iterator[str]:
        when = f" ({format_millis(tagged.time_millis)})" if tagged is not None else ""
        yield f"tag '{args.tag}' of {table.name} keeps snapshot {snapshot_id}{when}"

    ctx.out.emit({"table": table.name, "tag": args.tag, "snapshot_id": snapshot_id}, human)


def run_delete_tag(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    missing = [name for name in args.tag if name not in table.tags()]
    if missing:  # check all first: delete all the tags named, or none
        raise SnapshotNotExistError(
            f"tag{'s' if len(missing) > 1 else ''} {', '.join(repr(m) for m in missing)} of table "
            f"{table.name} do{'' if len(missing) > 1 else 'es'} not exist; nothing was deleted")
    for name in args.tag:
        table.delete_tag(name)
    ctx.out.emit({"table": table.name, "deleted": args.tag},
                 lambda: [f"deleted {plural(len(args.tag), 'tag')} of {table.name}: "
                          f"{', '.join(args.tag)}"])


def run_replace_tag(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    before = table.tag_manager().get_or_throw(args.tag).id
    table.replace_tag(args.tag, args.snapshot, args.time_retained)
    after = table.tag_manager().get_or_throw(args.tag).id
    ctx.out.emit({"table": table.name, "tag": args.tag, "previous_snapshot_id": before, "snapshot_id": after},
                 lambda: [f"tag '{args.tag}' of {table.name} now keeps snapshot {after} (was {before})"])


def run_rename_tag(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    table.rename_tag(args.tag, args.target_tag)
    ctx.out.emit({"table": table.name, "tag": args.tag, "target_tag": args.target_tag},
                 lambda: [f"renamed tag '{args.tag}' of {table.name} to '{args.target_tag}'"])


def run_rollback_to_timestamp(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    with ctx.progress(f"rolling back {table.name}"):
        snapshot_id = table.rollback_to_timestamp(args.timestamp)
    ctx.out.emit({"table": table.name, "timestamp_millis": args.timestamp, "snapshot_id": snapshot_id},
                 lambda: [f"rolled {table.name} back to snapshot {snapshot_id} "
                          f"(committed at or before {format_millis(args.timestamp)})"])


def run_rename_table(args: argparse.Namespace, ctx: Context) -> None:
    catalog = ctx.catalog(args.warehouse)
    catalog.rename_table(args.table, args.target)
    ctx.out.emit({"table": args.table, "target": args.target},
                 lambda: [f"renamed table {args.table} to {args.target}"])


def run_drop_partition(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    partitions = typed_partitions(table, _flatten(args.partitions)) or []
    check_partitions_match(table, partitions)  # a mistyped partition fails, dropping nothing
    snapshot_id = table.drop_partitions(partitions)
    ctx.out.emit({"table": table.name, "partitions": partitions, "snapshot_ids": [snapshot_id]},
                 lambda: [f"dropped {plural(len(partitions), 'partition')} of {table.name}: "
                          f"{_committed([snapshot_id])}"])
