"""Branch commands, named after Paimon's procedures: branches (list), create-branch, delete-branch,
rename-branch and fast-forward. Every table command also takes `--branch NAME`."""

from __future__ import annotations

import argparse

from lakehouse_engine.cli.browse import Subparsers, add_table_arguments
from lakehouse_engine.cli.context import Context
from lakehouse_engine.cli.output import Column, table_or_note


def register(subparsers: Subparsers, parents: list[argparse.ArgumentParser]) -> None:
    """Add the branch commands to the `lakehouse` parser."""
    p = _parser(subparsers, parents, "branches", "list a table's branches")
    p.set_defaults(run=run_branches)

    p = _parser(subparsers, parents, "create-branch",
                "create a branch: from a tag (it starts at the tagged snapshot) or empty",
                "create_branch")
    p.add_argument("name", metavar="BRANCH", help="the new branch's name")
    p.add_argument("--tag", metavar="TAG", help="start the branch at this tag (default: an empty branch)")
    p.set_defaults(run=run_create_branch)

    p = _parser(subparsers, parents, "delete-branch", "delete a branch (its snapshots, schemas and tags)",
                "delete_branch")
    p.add_argument("name", metavar="BRANCH", help="the branch to delete")
    p.set_defaults(run=run_delete_branch)

    p = _parser(subparsers, parents, "rename-branch", "rename a branch", "rename_branch")
    p.add_argument("name", metavar="BRANCH", help="the branch to rename")
    p.add_argument("target", metavar="NEW", help="its new name")
    p.set_defaults(run=run_rename_branch)

    p = _parser(subparsers, parents, "fast-forward", "make main what a branch is (publish the branch)",
                "fast_forward")
    p.add_argument("name", metavar="BRANCH", help="the branch main takes over")
    p.set_defaults(run=run_fast_forward)


def _parser(subparsers: Subparsers, parents: list[argparse.ArgumentParser], name: str, summary: str,
            procedure: str | None = None) -> argparse.ArgumentParser:
    paimon = f" (Paimon: CALL sys.{procedure})" if procedure else ""
    p: argparse.ArgumentParser = subparsers.add_parser(
        name, parents=parents, help=summary, description=f"{summary[0].upper()}{summary[1:]}{paimon}.")
    add_table_arguments(p)
    return p


def run_branches(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    records = []
    for name in table.list_branches():
        branch = table.branch_table(name)
        latest = branch.latest_snapshot()
        records.append({"branch": name, "latest_snapshot_id": latest.id if latest else None,
                        "schema_id": branch.schema.id, "tags": len(branch.list_tags())})
    columns = [Column("branch", "branch"), Column("latest_snapshot_id", "latest snapshot", right=True),
               Column("schema_id", "schema", right=True), Column("tags", "tags", right=True)]
    ctx.out.emit({"table": table.name, "branches": records},
                 lambda: table_or_note(records, columns, f"table {table.name} has no branches"))


def run_create_branch(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    table.create_branch(args.name, args.tag)
    origin = f"tag {args.tag}" if args.tag else "nothing (an empty branch)"
    ctx.out.emit({"table": table.name, "branch": args.name, "tag": args.tag},
                 lambda: [f"created branch {args.name} of {table.name} from {origin}"])


def run_delete_branch(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    table.drop_branch(args.name)
    ctx.out.emit({"table": table.name, "branch": args.name, "deleted": True},
                 lambda: [f"deleted branch {args.name} of {table.name}; files only it used go at the "
                          f"next remove-orphan-files"])


def run_rename_branch(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    table.rename_branch(args.name, args.target)
    ctx.out.emit({"table": table.name, "branch": args.name, "target": args.target},
                 lambda: [f"renamed branch {args.name} of {table.name} to {args.target}"])


def run_fast_forward(args: argparse.Namespace, ctx: Context) -> None:
    table = ctx.table(args.warehouse, args.table)
    table.fast_forward(args.name)
    latest = ctx.table(args.warehouse, args.table).latest_snapshot()
    sid = latest.id if latest else None
    ctx.out.emit({"table": table.name, "branch": args.name, "latest_snapshot_id": sid},
                 lambda: [f"fast-forwarded {table.name} to branch {args.name}: main's latest "
                          f"snapshot is {sid}"])
