"""`lakehouse alter WAREHOUSE DB.TABLE <change> ...`: schema evolution from the command line.

One change per call, as Paimon's `ALTER TABLE` statements: add-column, drop-column,
rename-column, alter-column (type, nullability, comment, position), set-option, remove-option.
Each writes one new schema version through `catalog.alter_table`, or nothing when a rule refuses it.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from lakehouse_engine.cli.args import UsageError
from lakehouse_engine.cli.browse import Subparsers, add_table_arguments
from lakehouse_engine.cli.context import Context
from lakehouse_engine.errors import SchemaError
from lakehouse_engine.schema_change import Move, SchemaChange, to_data_type
from lakehouse_engine.types import DataType


def register(subparsers: Subparsers, parents: list[argparse.ArgumentParser]) -> None:
    """Add `alter` and its change subcommands to the `lakehouse` parser."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "alter", parents=parents, help="change a table's schema or options (Paimon: ALTER TABLE)",
        description="Change a table's schema or options: one change, one new schema version. "
                    "Older data files stay; readers map their columns by field id.")
    add_table_arguments(p)
    changes = p.add_subparsers(dest="change", metavar="CHANGE", required=True)

    c = changes.add_parser("add-column", help="add a nullable column (last unless positioned)")
    c.add_argument("name", metavar="NAME")
    c.add_argument("type", metavar="TYPE", help="a Paimon type, e.g. STRING, BIGINT, 'DECIMAL(12, 2)'")
    c.add_argument("--comment", help="the column's description")
    _position_arguments(c)

    c = changes.add_parser("drop-column", help="drop a column (not a key or partition column)")
    c.add_argument("name", metavar="NAME")

    c = changes.add_parser("rename-column", help="rename a column (its data stays)")
    c.add_argument("name", metavar="NAME")
    c.add_argument("new_name", metavar="NEW_NAME")

    c = changes.add_parser("alter-column", help="change a column's type, nullability, comment or position")
    c.add_argument("name", metavar="NAME")
    c.add_argument("--type", metavar="TYPE", help="a wider type, e.g. BIGINT for an INT column")
    c.add_argument("--keep-nullability", action="store_true",
                   help="keep the column's nullability when changing its type")
    c.add_argument("--nullable", action="store_true", help="make the column nullable")
    c.add_argument("--comment", help="a new description")
    _position_arguments(c)

    c = changes.add_parser("set-option", help="set a table option (KEY=VALUE)")
    c.add_argument("key_value", metavar="KEY=VALUE")

    c = changes.add_parser("remove-option", help="remove a table option")
    c.add_argument("key", metavar="KEY")
    p.set_defaults(run=run_alter)


def _position_arguments(p: argparse.ArgumentParser) -> None:
    where = p.add_mutually_exclusive_group()
    where.add_argument("--first", action="store_true", help="put the column first")
    where.add_argument("--after", metavar="COLUMN", help="put the column after COLUMN")
    where.add_argument("--before", metavar="COLUMN", help="put the column before COLUMN")


def _move(args: argparse.Namespace) -> Move | None:
    if args.first:
        return Move.first(args.name)
    if args.after:
        return Move.after(args.name, args.after)
    if args.before:
        return Move.before(args.name, args.before)
    return None


def _type(text: str) -> DataType:
    try:
        return to_data_type(text, "TYPE")
    except SchemaError as e:
        raise UsageError(f"TYPE {text!r}: {e}") from None


def changes_of(args: argparse.Namespace) -> list[SchemaChange]:
    """The schema changes one `lakehouse alter` call asks for."""
    kind = args.change
    if kind == "add-column":
        return [SchemaChange.add_column(args.name, _type(args.type), args.comment, _move(args))]
    if kind == "drop-column":
        return [SchemaChange.drop_column(args.name)]
    if kind == "rename-column":
        return [SchemaChange.rename_column(args.name, args.new_name)]
    if kind == "alter-column":
        changes: list[SchemaChange] = []
        if args.type is not None:
            changes.append(SchemaChange.update_column_type(args.name, _type(args.type),
                                                           args.keep_nullability))
        if args.nullable:
            changes.append(SchemaChange.update_column_nullability(args.name, True))
        if args.comment is not None:
            changes.append(SchemaChange.update_column_comment(args.name, args.comment))
        move = _move(args)
        if move is not None:
            changes.append(SchemaChange.update_column_position(move))
        if not changes:
            raise UsageError("alter-column needs at least one of --type, --nullable, --comment, "
                             "--first, --after, --before")
        return changes
    if kind == "set-option":
        key, sep, value = args.key_value.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"set-option {args.key_value!r} must look like KEY=VALUE")
        return [SchemaChange.set_option(key.strip(), value)]
    return [SchemaChange.remove_option(args.key)]


def run_alter(args: argparse.Namespace, ctx: Context) -> None:
    changes = changes_of(args)
    catalog = ctx.catalog(args.warehouse)
    catalog.alter_table(args.table, changes)
    schema = catalog.get_table(args.table).schema

    def human() -> Iterator[str]:
        yield f"{args.change} on {args.table}: schema {schema.id} written"
        for f in schema.fields:
            yield f"  {f.id:>3}  {f.name}  {f.type.to_string()}" + (f"  -- {f.description}" if f.description else "")

    ctx.out.emit({"table": args.table, "change": args.change, "schema_id": schema.id,
                  "fields": [{"id": f.id, "name": f.name, "type": f.type.to_string(), "comment": f.description}
                             for f in schema.fields],
                  "options": dict(schema.options)}, human)
