"""Bad input, one case at a time: each must be rejected with an error naming the culprit, and leave
every byte of the warehouse as it was.

A case is a call that should fail (a table or database name, table options, a batch of rows, a
pandas DataFrame, a maintenance call with a path trick, a CLI command line) and the fragments its
error must contain (the option, column, character or flag at fault). Before and after each case the
warehouse's files are hashed; a case counts as unclear when it raised no error, an error outside the
LakehouseError hierarchy (or a CLI exit code other than 2 or 1), or a message missing a fragment.
Changed warehouses are counted with the unclear errors (the table's total must be 0). The quick
mode runs every case once on a fixed-bucket table; the full mode runs every case on fixed, dynamic
and postpone bucket tables, plus a table name holding each invisible code point of the BMP.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import tempfile
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.reliability import Outcome
from lakehouse_engine import Catalog, LakehouseError, Schema
from lakehouse_engine.cli.app import main as cli_main
from lakehouse_engine.table import FileStoreTable

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("dt", pa.string(), nullable=False),
    pa.field("v", pa.string()),
    pa.field("rk", pa.string()),
])
GOOD_ROWS = {"id": [1, 2], "dt": ["d1", "d2"], "v": ["a", "b"], "rk": ["+I", "+I"]}
LAYOUTS = {"fixed": "2", "dynamic": "-1", "postpone": "-2"}


@dataclass
class Case:
    """One bad input: what it is, how to submit it, and what its error must name."""

    kind: str  # "name", "option", "data", "pandas", "path", "cli"
    what: str
    submit: Callable[[Catalog, FileStoreTable], Any]
    names: tuple[str, ...]  # fragments the error message must contain


def _tree_hash(root: Path) -> str:
    """One hash over every file's relative path and bytes under `root`."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def _write(table: FileStoreTable, data: pa.Table | Any, pandas: bool = False) -> None:
    wb = table.new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    try:
        if pandas:
            write.write_pandas(data)
        else:
            write.write_arrow(data)
        commit.commit(write.prepare_commit())
    finally:
        write.close()
        commit.close()


def _rows(**overrides: Any) -> pa.Table:
    base: dict[str, Any] = {"id": [3], "dt": ["d1"], "v": ["x"], "rk": ["+I"]}
    base.update(overrides)
    return pa.table(base)


def _create(name: str, **options: str) -> Callable[[Catalog, FileStoreTable], Any]:
    def submit(catalog: Catalog, _: FileStoreTable) -> Any:
        schema = Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                                            options=options)
        return catalog.create_table(name, schema)
    return submit


def _name_cases() -> list[Case]:
    bad = {
        "right-to-left override": ("ord\u202eers", "U+202E"), "zero width space": ("a\u200bb", "U+200B"),
        "left-to-right isolate": ("x\u2066y", "U+2066"), "NUL": ("a\x00b", "U+0000"),
        "escape sequence": ("t\x1b[31m", "U+001B"), "slash": ("a/b", "a/b"), "dot-dot": ("..", "'..'"),
        "empty": ("", "empty"), "dollar": ("t$snapshots", "t$snapshots"), "too long": ("t" * 300, "255"),
    }
    cases = [Case("name", f"table name: {what}", _create(f"db.{name}"), (fragment,))
             for what, (name, fragment) in bad.items()]
    cases.append(Case("name", "database name: bidi override",
                      lambda c, _: c.create_database("s\u202dhop"), ("database name", "U+202D")))
    cases.append(Case("name", "identifier without a database", _create("orders"), ("database.table",)))
    return cases


def _every_invisible_character_cases() -> list[Case]:
    """A table name holding each control, format, separator or surrogate code point of the BMP."""
    cases = []
    for code in range(0x10000):
        if unicodedata.category(chr(code)) in ("Cc", "Cf", "Cs", "Zl", "Zp") and chr(code) not in "/\\.$":
            fragment = f"U+{code:04X}"
            cases.append(Case("name", f"table name holding {fragment}", _create(f"db.a{chr(code)}b"), (fragment,)))
    return cases


def _option_cases() -> list[Case]:
    bad = [
        ("file.compression.zstd-level", "0"), ("file.compression.zstd-level", "23"), ("bucket", "0"),
        ("bucket", "-3"), ("bucket", "2147483648"), ("bucket", "four"), ("num-levels", "1"),
        ("dynamic-bucket.max-buckets", "0"), ("commit.max-retries", "-1"), ("target-file-size", "0 mb"),
        ("write-buffer-size", "lots"), ("merge-engine", "newest"), ("data-file.prefix", "../x-"),
        ("partition.default-name", "a/b"), ("snapshot.time-retained", "forever"),
        ("rowkind.field", "nope"), ("sequence.field", "nope"), ("file.format", "csv"),
        ("num-sorted-run.compaction-trigger", "0"), ("snapshot.num-retained.min", "0"),
    ]
    return [Case("option", f"option {key}={value!r}", _create("db.fresh", **{key: value}), (f"'{key}'",))
            for key, value in bad]


def _data_cases() -> list[Case]:
    def batch(data: Callable[[], pa.Table]) -> Callable[[Catalog, FileStoreTable], Any]:
        return lambda _, table: _write(table, data())

    return [
        Case("data", "null primary key", batch(lambda: _rows(id=pa.array([None], pa.int64()))), ("'id'",)),
        Case("data", "null partition key", batch(lambda: _rows(dt=pa.array([None], pa.string()))), ("'dt'",)),
        Case("data", "string in a BIGINT key", batch(lambda: _rows(id=["three"])), ("'id'",)),
        Case("data", "fraction in a BIGINT key", batch(lambda: _rows(id=[1.5])), ("'id'",)),
        Case("data", "overflowing decimal key",
             batch(lambda: _rows(id=pa.array([10**20], pa.decimal128(30, 0)))), ("'id'",)),
        Case("data", "unknown row kind", batch(lambda: _rows(rk=["upsert"])), ("upsert",)),
        Case("data", "null row kind", batch(lambda: _rows(rk=pa.array([None], pa.string()))), ("rk",)),
        Case("data", "missing column", batch(lambda: _rows().drop_columns(["v"])), ("'v'",)),
        Case("data", "extra column", batch(lambda: _rows(oops=[1])), ("'oops'",)),
        Case("data", "partition value too long for a directory", batch(lambda: _rows(dt=["x" * 300])),
             ("too long",)),
        Case("data", "binary in a STRING column", batch(lambda: _rows(v=[b"\xff"])), ("'v'",)),
    ]


def _pandas_cases() -> list[Case]:
    def frame(values: list[Any]) -> Callable[[Catalog, FileStoreTable], Any]:
        import pandas as pd

        df = pd.DataFrame({"id": [3, 4, 5], "dt": ["d1"] * 3, "v": values, "rk": ["+I"] * 3})
        return lambda _, table: _write(table, df, pandas=True)

    try:
        import pandas  # noqa: F401
    except ImportError:
        return []
    return [
        Case("pandas", "object column of int, str and float", frame([1, "a", 2.5]), ("'v'", "int", "str")),
        Case("pandas", "object column of str and int", frame(["x", 3, None]), ("'v'", "str", "int")),
        Case("pandas", "object column of str and bytes", frame(["x", b"y", None]), ("'v'", "str", "bytes")),
    ]


def _path_cases() -> list[Case]:
    return [
        Case("path", "get_table with '..'", lambda c, _: c.get_table("db.../etc"), ("..",)),
        Case("path", "tag named with a slash", lambda _, t: t.create_tag("a/b"), ("a/b",)),
        Case("path", "tag named with a right-to-left override", lambda _, t: t.create_tag("v1\u202e"), ("U+202E",)),
        Case("path", "tag named with a NUL", lambda _, t: t.create_tag("a\x00"), ("tag name",)),
        Case("path", "delete a tag outside the tag directory", lambda _, t: t.delete_tag("../schema/schema-0"),
             ("../schema/schema-0",)),
        Case("path", "rollback to a tag that does not exist", lambda _, t: t.rollback_to("nope"), ("nope",)),
        Case("path", "rollback to snapshot 0", lambda _, t: t.rollback_to(0), ("0",)),
        Case("path", "projection of an unknown column",
             lambda _, t: t.new_read_builder().with_projection(["nope"]), ("nope",)),
        Case("path", "dynamic option out of range", lambda _, t: t.copy({"file.compression.zstd-level": "99"}),
             ("file.compression.zstd-level",)),
    ]


def _cli(*args: str) -> Callable[[Catalog, FileStoreTable], Any]:
    def submit(catalog: Catalog, table: FileStoreTable) -> Any:
        err = io.StringIO()
        line = [a.format(wh=catalog.warehouse, t=table.name) for a in args]
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = cli_main(line)
        return code, err.getvalue()
    return submit


def _cli_cases() -> list[Case]:
    return [
        Case("cli", "create-tag --tag ''", _cli("create-tag", "{wh}", "{t}", "--tag", ""), ("--tag",)),
        Case("cli", "create-tag --tag '  '", _cli("create-tag", "{wh}", "{t}", "--tag", "  "), ("--tag",)),
        Case("cli", "rollback --tag ''", _cli("rollback", "{wh}", "{t}", "--tag", ""), ("--tag",)),
        Case("cli", "delete-tag --tag 'a,,b'", _cli("delete-tag", "{wh}", "{t}", "--tag", "a,,b"), ("--tag",)),
        Case("cli", "read --tag ''", _cli("read", "{wh}", "{t}", "--tag", ""), ("--tag",)),
        Case("cli", "create-tag --tag 42", _cli("create-tag", "{wh}", "{t}", "--tag", "42"), ("42",)),
        Case("cli", "read --snapshot 0", _cli("read", "{wh}", "{t}", "--snapshot", "0"), ("--snapshot",)),
        Case("cli", "rollback --snapshot 999", _cli("rollback", "{wh}", "{t}", "--snapshot", "999"), ("999",)),
        Case("cli", "compact --partitions region=eu", _cli("compact", "{wh}", "{t}", "--partitions", "region=eu"),
             ("region",)),
        Case("cli", "expire-snapshots --retain-min 5 --retain-max 2",
             _cli("expire-snapshots", "{wh}", "{t}", "--retain-min", "5", "--retain-max", "2"), ("--retain-min",)),
        Case("cli", "show of a table name with a bidi override", _cli("show", "{wh}", "db.a\u202eb"), ("U+202E",)),
    ]


def _verdict(case: Case, catalog: Catalog, table: FileStoreTable) -> str | None:
    """None when the case was rejected clearly; else what was unclear about it."""
    try:
        result = case.submit(catalog, table)
    except LakehouseError as e:
        missing = [n for n in case.names if n not in str(e)]
        return f"{type(e).__name__} not naming {missing}: {e}" if missing else None
    except Exception as e:  # the point of the campaign: any other error is unclear
        return f"{type(e).__name__} outside LakehouseError: {e}"
    if case.kind == "cli":
        code, err = result
        missing = [n for n in case.names if n not in err]
        if code not in (1, 2) or missing or "Traceback" in err:
            return f"exit {code}, stderr not naming {missing}: {err.strip()}"
        return None
    return "accepted (no error)"


def run(quick: bool) -> list[Outcome]:
    """Run every bad-input case; count unclear errors and changed warehouses per kind of input."""
    layouts = ["fixed"] if quick else list(LAYOUTS)
    kinds = ["name", "option", "data", "pandas", "path", "cli"]
    tried = {k: 0 for k in kinds}
    unclear = {k: 0 for k in kinds}
    changed = {k: 0 for k in kinds}
    examples: dict[str, list[str]] = {k: [] for k in kinds}
    cases = _name_cases() + _option_cases() + _data_cases() + _pandas_cases() + _path_cases() + _cli_cases()
    if not quick:
        cases += _every_invisible_character_cases()
    with tempfile.TemporaryDirectory(prefix="bad-input-") as tmp:
        catalog = Catalog(str(Path(tmp) / "warehouse"))
        catalog.create_database("db")
        root = Path(catalog.root)
        for layout in layouts:
            catalog.create_table(f"db.{layout}", Schema.from_pyarrow_schema(
                SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                options={"bucket": LAYOUTS[layout], "rowkind.field": "rk"}))
            table = catalog.get_table(f"db.{layout}")
            _write(table, pa.table(GOOD_ROWS, schema=SCHEMA))
            for case in cases:
                before = _tree_hash(root)
                problem = _verdict(case, catalog, table)
                tried[case.kind] += 1
                if problem is not None:
                    unclear[case.kind] += 1
                    examples[case.kind].append(f"{case.what}: {problem[:120]}")
                if _tree_hash(root) != before:
                    changed[case.kind] += 1
                    examples[case.kind].append(f"{case.what}: changed the warehouse")
    described = {
        "name": "database and table names: bidi overrides, zero-width and control characters, paths, '$', "
                "300 chars" + ("" if quick else "; every invisible BMP code point"),
        "option": "out-of-range and malformed table options at create time",
        "data": "batches with null keys, wrong or lossy types, unknown row kinds, missing/extra columns",
        "pandas": "write_pandas with object columns mixing value types",
        "path": "tags and identifiers with path tricks, unknown tags, snapshots and columns",
        "cli": "CLI command lines: empty or blank --tag, bad ids, partitions, retention",
    }
    outcomes = []
    for k in kinds:
        if not tried[k]:
            continue
        result = f"{tried[k] - unclear[k]} rejected naming the culprit; warehouses changed: {changed[k]}"
        if examples[k]:
            result += "; " + " / ".join(examples[k][:3])
        outcomes.append(Outcome("bad input", f"{described[k]} ({', '.join(layouts)} bucket tables)", tried[k],
                                unclear_errors=unclear[k] + changed[k], result=result))
    return outcomes
