"""The `lakehouse` command: its parser, dispatch to a command, and exit codes scripts can trust.

Exit codes: 0 success; 1 the work failed (unknown table or snapshot, an engine error, a feature
this engine version lacks); 2 the command line is wrong (argparse's convention); 130 interrupted.
Every failure is one line on stderr that says what to do; `--debug` adds the traceback.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from lakehouse_engine.cli import alter, branches, browse, changes, procedures
from lakehouse_engine.cli.args import UsageError
from lakehouse_engine.cli.context import Context, FeatureMissingError, PartitionNotFoundError
from lakehouse_engine.cli.output import Output
from lakehouse_engine.errors import (
    CommitConflictError,
    CorruptFileError,
    DatabaseNotExistError,
    InvalidIdentifierError,
    LakehouseError,
    SnapshotNotExistError,
    TableNotExistError,
)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
FEATURE_MISSING = "is not available in this engine version yet"


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line that points at `--help`."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}; see '{self.prog} --help'\n")


def _common_options(for_subcommand: bool) -> argparse.ArgumentParser:
    """--json, --progress and --debug, accepted before and after the command name.

    On a command the defaults are suppressed, so a flag given before the command name is not
    reset by the command's own parser.
    """
    flag_default = argparse.SUPPRESS if for_subcommand else False
    progress_default = argparse.SUPPRESS if for_subcommand else None
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--json", action="store_true", default=flag_default,
                   help="print one JSON document on stdout (for scripts) instead of text")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=progress_default,
                   help="draw a progress bar on stderr (default: only when stderr is a terminal)")
    p.add_argument("--debug", action="store_true", default=flag_default,
                   help="print the traceback of a failure")
    p.add_argument("--option", action="append", type=_catalog_option, metavar="KEY=VALUE",
                   default=argparse.SUPPRESS if for_subcommand else [],
                   help="a catalog option, e.g. s3.endpoint=http://127.0.0.1:9000 (repeatable; "
                        "credentials also come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)")
    return p


def _catalog_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"--option {text!r} must look like KEY=VALUE")
    return key.strip(), value


class _VersionAction(argparse.Action):
    """`--version`; looks the version up only when asked (importlib.metadata is slow to import)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str = "print the version and exit"):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> NoReturn:
        from importlib import metadata

        try:
            version = metadata.version("lakehouse-engine")
        except metadata.PackageNotFoundError:
            version = "unknown"
        sys.stdout.write(f"{parser.prog} {version}\n")
        parser.exit(EXIT_OK)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: global options and one subcommand per browse command or procedure."""
    parser = _Parser(
        prog="lakehouse", parents=[_common_options(for_subcommand=False)],
        description="Inspect and maintain Paimon tables of a warehouse. Maintenance commands are "
                    "Paimon's Spark procedures, with the same names and arguments.",
        epilog="Exit codes: 0 ok, 1 failed (unknown table or snapshot, engine error), 2 usage error.")
    parser.add_argument("--version", action=_VersionAction)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    parents = [_common_options(for_subcommand=True)]
    browse.register(subparsers, parents)
    procedures.register(subparsers, parents)
    branches.register(subparsers, parents)
    alter.register(subparsers, parents)
    changes.register(subparsers, parents)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `lakehouse` with `argv` (default: the process arguments) and return its exit code."""
    parser = build_parser()
    arguments = sys.argv[1:] if argv is None else list(argv)
    if not arguments:  # a bare `lakehouse`: the newcomer's first try deserves the help, not an error
        parser.print_help(sys.stdout)
        return EXIT_OK
    try:
        args = parser.parse_args(arguments)
    except SystemExit as e:  # --help, --version and usage errors
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    if getattr(args, "branch", None) and args.branch != "main":
        if "$" in args.table:
            return _report(UsageError(f"give the branch once: {args.table} already names one, "
                                      f"and --branch {args.branch} another"), args)
        args.table = f"{args.table}$branch_{args.branch}"
    show_progress = args.progress if args.progress is not None else sys.stderr.isatty()
    ctx = Context(Output(args.json, sys.stdout, sys.stderr), show_progress,
                  dict(getattr(args, "option", None) or []))
    try:
        args.run(args, ctx)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader of stdout went away (`lakehouse read ... | head`): not worth a traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILED
    except KeyboardInterrupt:
        sys.stderr.write("\nlakehouse: interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as e:
        return _report(e, args)
    return EXIT_OK


def _report(exc: Exception, args: argparse.Namespace) -> int:
    """Print `exc` as one line on stderr (after its traceback with --debug); return the exit code."""
    if args.debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    prog = f"lakehouse {args.command}"
    code = EXIT_FAILED
    missing = _missing_feature(exc)
    if isinstance(exc, (UsageError, InvalidIdentifierError)):  # e.g. a tag name no file can have
        message, code = f"{exc}; see '{prog} --help'", EXIT_USAGE
    elif isinstance(exc, LakehouseError):
        hint = _hint(exc, args)
        message = f"{exc}; {hint}" if hint else str(exc)
    elif missing is not None:
        message = f"'{args.command}' {FEATURE_MISSING} ({missing}); update lakehouse_engine"
    elif isinstance(exc, OSError):
        message = f"{exc}; check the warehouse path and its permissions"
    else:
        message = f"unexpected {type(exc).__name__}: {exc}; run again with --debug for the traceback"
    sys.stderr.write(f"{prog}: error: {' '.join(message.split())}\n")
    return code


def _missing_feature(exc: Exception) -> str | None:
    """What the engine lacks, when `exc` says a maintenance method is not implemented or not there."""
    if isinstance(exc, FeatureMissingError):
        return str(exc)
    if isinstance(exc, LakehouseError):  # UnsupportedError is a deliberate engine answer
        return None
    if isinstance(exc, ImportError) and (exc.name or "").startswith("lakehouse_engine"):
        if isinstance(exc, ModuleNotFoundError):
            return f"module {exc.name} is missing"
        return str(exc).split(" (")[0]
    if isinstance(exc, NotImplementedError):
        return str(exc) or "not implemented"
    return None


def _hint(exc: LakehouseError, args: argparse.Namespace) -> str | None:
    """What to run or do next after an engine error."""
    warehouse = shlex.quote(getattr(args, "warehouse", "WAREHOUSE"))
    table = getattr(args, "table", None)
    if isinstance(exc, (TableNotExistError, DatabaseNotExistError)):
        return f"list the tables with 'lakehouse tables {warehouse}'"
    if isinstance(exc, SnapshotNotExistError) and table:
        if getattr(args, "tag", None):
            return f"list the tags with 'lakehouse tags {warehouse} {table}'"
        return f"list the snapshots with 'lakehouse snapshots {warehouse} {table}'"
    if isinstance(exc, PartitionNotFoundError) and table:
        return f"list the partitions with 'lakehouse buckets {warehouse} {table}'"
    if isinstance(exc, CommitConflictError):
        return "another writer committed at the same time; run the command again"
    if isinstance(exc, CorruptFileError):
        return "restore the file, or roll back to a snapshot that does not use it"
    return None
