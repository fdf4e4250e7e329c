"""Commands that look at a warehouse or a table without changing it: tables, show, snapshots, tags,
files, buckets and read."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from lakehouse_engine.cli.args import (
    check_columns,
    column_list,
    non_negative_int,
    positive_int,
    table_identifier,
    tag_name,
)
from lakehouse_engine.cli.context import Context, engine_method
from lakehouse_engine.cli.output import (
    Column,
    format_bytes,
    format_millis,
    format_value,
    iso_millis,
    plural,
    render_fields,
    render_table,
    table_or_note,
)
from lakehouse_engine.errors import LakehouseError
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.table import FileStoreTable

Subparsers = Any  # argparse's _SubParsersAction is private


def register(subparsers: Subparsers, parents: list[argparse.ArgumentParser]) -> None:
    """Add the browsing commands to the `lakehouse` parser."""
    p = subparsers.add_parser("tables", parents=parents, help="list the tables of a warehouse",
                              description="List every table of a warehouse with its keys and buckets.")
    p.add_argument("warehouse", metavar="WAREHOUSE", help="warehouse root (a path or a pyarrow.fs URI)")
    p.add_argument("--database", metavar="DB", help="only the tables of this database")
    p.set_defaults(run=run_tables)

    p = _table_parser(subparsers, parents, "show", "show a table's schema, keys, options and latest snapshot")
    p.set_defaults(run=run_show)

    p = _table_parser(subparsers, parents, "snapshots", "list a table's snapshots, oldest first")
    p.set_defaults(run=run_snapshots)

    p = _table_parser(subparsers, parents, "tags", "list a table's tags")
    p.set_defaults(run=run_tags)

    p = _table_parser(subparsers, parents, "partitions",
                      "list the partitions of the latest snapshot: rows, files, size, last update")
    p.set_defaults(run=run_partitions)

    p = _table_parser(subparsers, parents, "files", "list the live data files of a snapshot")
    p.add_argument("--snapshot", type=positive_int, metavar="ID", help="snapshot id (default: latest)")
    p.set_defaults(run=run_files)

    p = _table_parser(subparsers, parents, "buckets",
                      "per (partition, bucket): records, files, sorted runs, levels, bytes")
    p.add_argument("--snapshot", type=positive_int, metavar="ID", help="snapshot id (default: latest)")
    p.set_defaults(run=run_buckets)

    p = _table_parser(subparsers, parents, "read", "read rows (merged, as of a snapshot or tag)")
    version = p.add_mutually_exclusive_group()
    version.add_argument("--snapshot", type=positive_int, metavar="ID", help="time travel to a snapshot")
    version.add_argument("--tag", type=tag_name, metavar="NAME", help="read the snapshot a tag keeps")
    p.add_argument("--limit", type=non_negative_int, metavar="N", help="at most N rows (default: all)")
    p.add_argument("--columns", type=column_list, metavar="A,B", help="only these columns, in this order")
    p.set_defaults(run=run_read)


def _table_parser(subparsers: Subparsers, parents: list[argparse.ArgumentParser], name: str,
                  summary: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        name, parents=parents, help=summary, description=summary[0].upper() + summary[1:] + ".")
    add_table_arguments(p)
    return p


def add_table_arguments(p: argparse.ArgumentParser) -> None:
    """The WAREHOUSE and TABLE positionals every table command starts with."""
    p.add_argument("warehouse", metavar="WAREHOUSE", help="warehouse root (a path or a pyarrow.fs URI)")
    p.add_argument("table", metavar="TABLE", type=table_identifier,
                   help="table as database.table (database.table$branch_<name> for a branch)")
    p.add_argument("--branch", metavar="NAME", help="work on this branch of the table (default: main)")


# ---- tables -------------------------------------------------------------------------------------
def run_tables(args: argparse.Namespace, ctx: Context) -> None:
    catalog = ctx.catalog(args.warehouse)
    databases = [args.database] if args.database else catalog.list_databases()
    records = []
    for db in databases:
        for name in catalog.list_tables(db):
            record: dict[str, Any] = {"database": db, "table": name}
            try:
                schema = catalog.get_table(f"{db}.{name}").schema
            except LakehouseError as e:
                ctx.out.warn(f"cannot read table {db}.{name}: {e}")
                record.update(primary_keys=None, partition_keys=None, bucket=None)
            else:
                record.update(primary_keys=list(schema.primary_keys),
                              partition_keys=list(schema.partition_keys),
                              bucket=schema.options.get("bucket", "-1"))
            records.append(record)
    columns = [Column("database", "database"), Column("table", "table"),
               Column("primary_keys", "primary key"), Column("partition_keys", "partitioned by"),
               Column("bucket", "bucket", right=True)]
    ctx.out.emit({"warehouse": args.warehouse, "tables": records},
                 lambda: table_or_note(records, columns, f"no tables in {args.warehouse}"))


# ---- partitions -----------------------------------------------------------------------------------
def run_partitions(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    records = [{"partition": p.name or "(unpartitioned)", "spec": p.spec, "record_count": p.record_count,
                "file_count": p.file_count, "file_size_in_bytes": p.file_size_in_bytes,
                "total_buckets": p.total_buckets, "last_file_creation_time": p.last_file_creation_time,
                "last_update": iso_millis(p.last_file_creation_time)}
               for p in table.list_partitions()]
    columns = [Column("partition", "partition"), Column("record_count", "rows", right=True),
               Column("file_count", "files", right=True), Column("file_size_in_bytes", "bytes", right=True),
               Column("total_buckets", "buckets", right=True), Column("last_update", "last update")]
    ctx.out.emit({"table": table.name, "partitions": records},
                 lambda: table_or_note(records, columns, f"table {table.name} has no data files"))


# ---- show ---------------------------------------------------------------------------------------
def snapshot_record(snapshot: Snapshot) -> dict[str, Any]:
    """The fields of a snapshot that scripts and people want, by their Paimon names."""
    return {
        "id": snapshot.id, "schema_id": snapshot.schema_id, "commit_kind": snapshot.commit_kind,
        "time_millis": snapshot.time_millis, "time": iso_millis(snapshot.time_millis),
        "total_record_count": snapshot.total_record_count,
        "delta_record_count": snapshot.delta_record_count,
        "commit_user": snapshot.commit_user, "commit_identifier": snapshot.commit_identifier,
        "watermark": snapshot.watermark,
    }


def run_show(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    schema = table.schema
    latest = table.latest_snapshot()
    fields = [{"id": f.id, "name": f.name, "type": f.type.to_string(), "description": f.description}
              for f in schema.fields]
    document = {
        "table": table.name, "path": table.path, "schema_id": schema.id,
        "fields": fields, "primary_keys": list(schema.primary_keys),
        "partition_keys": list(schema.partition_keys), "bucket_keys": schema.bucket_keys,
        "options": dict(sorted(schema.options.items())), "comment": schema.comment,
        "latest_snapshot": snapshot_record(latest) if latest else None,
    }

    def human() -> Iterator[str]:
        yield from render_fields([
            ("table", table.name), ("path", table.path), ("schema id", str(schema.id)),
            ("primary key", ", ".join(schema.primary_keys) or "(none: an append table)"),
            ("partitioned by", ", ".join(schema.partition_keys) or "(not partitioned)"),
            ("bucket", schema.options.get("bucket", "-1")),
            ("bucket key", ", ".join(schema.bucket_keys) or "(none)"),
        ] + ([("comment", schema.comment)] if schema.comment else []))
        yield ""
        yield from render_table(fields, [Column("id", "id", right=True), Column("name", "field"),
                                         Column("type", "type"), Column("description", "description")])
        yield ""
        yield "options"
        yield from render_fields(sorted(schema.options.items()), indent="  ") or ["  (none)"]
        yield ""
        if latest is None:
            yield "latest snapshot: none (nothing committed yet)"
        else:
            yield "latest snapshot"
            yield from render_fields([
                ("id", str(latest.id)), ("kind", latest.commit_kind),
                ("time", format_millis(latest.time_millis)),
                ("records", str(latest.total_record_count)),
                ("schema id", str(latest.schema_id)),
            ], indent="  ")

    ctx.out.emit(document, human)


# ---- snapshots and tags -------------------------------------------------------------------------
def _tags_by_snapshot(table: FileStoreTable) -> dict[int, list[str]]:
    """Tag names per snapshot id; empty while the engine has no tags (they are extra information)."""
    try:
        tags = table.tags()
    except (ImportError, NotImplementedError):
        return {}
    out: dict[int, list[str]] = {}
    for name, snapshot in sorted(tags.items()):
        out.setdefault(snapshot.id, []).append(name)
    return out


def run_snapshots(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    tags = _tags_by_snapshot(table)
    records = [dict(snapshot_record(s), tags=tags.get(s.id, [])) for s in table.snapshots()]
    columns = [Column("id", "id", right=True), Column("commit_kind", "kind"),
               Column("time_millis", "time", format_millis),
               Column("total_record_count", "records", right=True),
               Column("delta_record_count", "delta", right=True),
               Column("schema_id", "schema", right=True), Column("tags", "tags")]
    ctx.out.emit({"table": table.name, "snapshots": records},
                 lambda: table_or_note(records, columns, f"table {table.name} has no snapshots yet"))


def run_tags(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    records = [{"tag": name, "snapshot_id": s.id, "commit_kind": s.commit_kind,
                "time_millis": s.time_millis, "time": iso_millis(s.time_millis),
                "total_record_count": s.total_record_count}
               for name, s in sorted(table.tags().items())]
    columns = [Column("tag", "tag"), Column("snapshot_id", "snapshot", right=True),
               Column("commit_kind", "kind"), Column("time_millis", "time", format_millis),
               Column("total_record_count", "records", right=True)]
    ctx.out.emit({"table": table.name, "tags": records},
                 lambda: table_or_note(records, columns, f"table {table.name} has no tags"))


# ---- files and buckets --------------------------------------------------------------------------
def run_files(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    snapshot = table.snapshot(args.snapshot) if args.snapshot else table.latest_snapshot()
    codec = table.store.partition_codec()
    records: list[dict[str, Any]] = []
    with ctx.progress(f"reading manifests of {table.name}"):
        entries = table.store.manifest_io().live_entries(snapshot)
    for e in entries:
        part = codec.from_binary(e.partition)
        f = e.file
        bucket_dir = table.path_factory.bucket_dir(part.spec, e.bucket)
        records.append({
            "partition": part.path_string(), "partition_values": part.as_dict(),
            "bucket": e.bucket, "total_buckets": e.total_buckets, "file_name": f.file_name,
            "path": f.external_path or f"{bucket_dir}/{f.file_name}",
            "level": f.level, "row_count": f.row_count, "delete_row_count": f.delete_row_count,
            "file_size": f.file_size, "min_sequence_number": f.min_sequence_number,
            "max_sequence_number": f.max_sequence_number, "schema_id": f.schema_id,
            "creation_time_millis": f.creation_time_millis,
        })
    records.sort(key=lambda r: (r["partition"], r["bucket"], r["level"], r["min_sequence_number"]))
    columns = [Column("partition", "partition"), Column("bucket", "bucket", right=True),
               Column("level", "level", right=True), Column("file_name", "file"),
               Column("row_count", "rows", right=True), Column("file_size", "size", format_bytes, True),
               Column("min_sequence_number", "min seq", right=True),
               Column("max_sequence_number", "max seq", right=True),
               Column("creation_time_millis", "created", format_millis)]
    if not table.schema.partition_keys:
        columns = columns[1:]
    snapshot_id = snapshot.id if snapshot else None

    def human() -> Iterator[str]:
        if snapshot is None:
            yield f"table {table.name} has no snapshots yet"
            return
        yield from table_or_note(records, columns, f"snapshot {snapshot.id} has no live files")
        rows = sum(r["row_count"] for r in records)
        size = sum(r["file_size"] for r in records)
        yield f"{plural(len(records), 'file')}, {plural(rows, 'row')}, {format_bytes(size)} " \
              f"in snapshot {snapshot.id}"

    ctx.out.emit({"table": table.name, "snapshot_id": snapshot_id, "files": records}, human)


def run_buckets(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    # The snapshot is resolved here, once, so the report names the snapshot its numbers come from
    # even when a writer commits while the manifests are read.
    snapshot = table.snapshot(args.snapshot) if args.snapshot else table.latest_snapshot()
    with ctx.progress(f"reading manifests of {table.name}"):
        stats: pa.Table = engine_method(table, "bucket_stats")(snapshot.id if snapshot else None)
    records = stats.to_pylist()
    right = {n for n, t in zip(stats.column_names, stats.schema.types, strict=True)
             if pa.types.is_integer(t) or pa.types.is_floating(t)}
    columns = [Column(n, "size", format_bytes, True) if n == "size_bytes" else
               Column(n, n.replace("_", " "), format_value, n in right) for n in stats.column_names]

    def human() -> Iterator[str]:
        if snapshot is None:
            yield f"table {table.name} has no snapshots yet"
            return
        yield from table_or_note(records, columns, f"snapshot {snapshot.id} has no live buckets")
        rows = sum(r.get("record_count", 0) for r in records)
        yield f"{plural(len(records), 'bucket')}, {plural(rows, 'row')} in files in snapshot {snapshot.id}"

    ctx.out.emit({"table": table.name, "snapshot_id": snapshot.id if snapshot else None, "buckets": records},
                 human)


# ---- read ---------------------------------------------------------------------------------------
def run_read(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    rb = table.new_read_builder()
    if args.snapshot is not None:
        rb = rb.with_snapshot(args.snapshot)
    if args.tag is not None:
        rb = rb.with_tag(args.tag)
    if args.columns:
        # The columns of the snapshot read: a time-travel read has its snapshot's own schema.
        rb = rb.with_projection(check_columns(rb.read_table(), args.columns))
    if args.limit is not None:
        rb = rb.with_limit(args.limit)
    plan = rb.new_scan().plan()
    splits = plan.splits()
    read = rb.new_read()
    parts: list[pa.Table] = []
    with ctx.progress(f"reading {table.name}", total=len(splits), unit="splits") as bar:
        if args.limit is None and len(splits) > 1:
            # Splits read in parallel, as TableRead.to_arrow does, but one at a time for the bar.
            with ThreadPoolExecutor(max_workers=min(len(splits), os.cpu_count() or 1)) as pool:
                for part in pool.map(lambda s: read.to_arrow([s]), splits):
                    parts.append(part)
                    bar.advance()
        else:
            remaining = args.limit
            for split in splits:
                if remaining is not None and remaining <= 0:
                    break
                part = read.to_arrow([split])
                parts.append(part if remaining is None else part.slice(0, remaining))
                remaining = None if remaining is None else remaining - parts[-1].num_rows
                bar.advance()
    result = pa.concat_tables(parts) if parts else read.to_arrow([])
    snapshot_id = plan.snapshot.id if plan.snapshot else None
    rows = result.to_pylist()
    right = {f.name for f in result.schema
             if pa.types.is_integer(f.type) or pa.types.is_floating(f.type) or pa.types.is_decimal(f.type)}
    columns = [Column(n, n, _null_cell, n in right) for n in result.column_names]

    def human() -> Iterator[str]:
        if snapshot_id is None:
            yield f"table {table.name} has no snapshots yet"
            return
        yield from render_table(rows, columns)
        yield f"({plural(len(rows), 'row')} from snapshot {snapshot_id})"

    ctx.out.emit({"table": table.name, "snapshot_id": snapshot_id, "columns": result.column_names,
                  "rows": rows}, human)


def _null_cell(value: Any) -> str:
    """A cell of `read`: ARRAY as `[a, b]`, MAP as `{k: v}`, ROW as `{field: v}`, null as NULL."""
    if isinstance(value, list):
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):  # Arrow's map entries
            return "{" + ", ".join(f"{_null_cell(k)}: {_null_cell(v)}" for k, v in value) + "}"
        return "[" + ", ".join(_null_cell(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_null_cell(v)}" for k, v in value.items()) + "}"
    return format_value(value, null="NULL")
