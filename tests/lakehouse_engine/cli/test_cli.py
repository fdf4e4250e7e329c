"""The `lakehouse` command, run as a subprocess on real tables written by the engine.

Read-only commands share one warehouse built once per module; commands that change a table get
a fresh one each. Procedures whose engine side has not landed yet are skipped with the CLI's own
"not available in this engine version" message as the reason, so re-running shows when they land.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, Schema
from lakehouse_engine.cli.app import FEATURE_MISSING, main
from lakehouse_engine.cli.args import partition_specs, timestamp_millis
from lakehouse_engine.cli.output import format_bytes, to_jsonable
from lakehouse_engine.cli.progress import Progress
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import write

ORDERS = pa.schema([
    pa.field("order_id", pa.int64(), nullable=False),
    pa.field("dt", pa.string(), nullable=False),
    pa.field("amount", pa.decimal128(12, 2)),
    pa.field("note", pa.string()),
])
EVENTS = pa.schema([pa.field("ts", pa.int64()), pa.field("msg", pa.string())])
D1, D2 = "2026-11-01", "2026-11-02"
# Three commits: inserts, an update of order 1, one more order. Rows as of each snapshot:
COMMITS = [
    [(1, D1, "10.00", "a"), (2, D1, "20.00", None), (3, D2, "30.00", "c")],
    [(1, D1, "11.00", "a2")],
    [(4, D2, "40.00", "two\nlines")],
]
LATEST_ROWS = {1: ("11.00", "a2"), 2: ("20.00", None), 3: ("30.00", "c"), 4: ("40.00", "two\nlines")}


# ---- running the command ------------------------------------------------------------------------
@dataclass
class Run:
    """The outcome of one `lakehouse` process."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.code == 0, self.stderr
        return json.loads(self.stdout)

    def lines(self) -> list[str]:
        assert self.code == 0, self.stderr
        return self.stdout.splitlines()


def lakehouse(*args: str) -> Run:
    """`python -m lakehouse_engine.cli ARGS` with stdout and stderr captured (so neither is a TTY)."""
    proc = subprocess.run([sys.executable, "-m", "lakehouse_engine.cli", *args],
                          capture_output=True, text=True, timeout=120)
    return Run(proc.returncode, proc.stdout, proc.stderr)


def procedure(*args: str) -> Run:
    """Run a maintenance command; skip the test when the engine side is not there yet."""
    run = lakehouse(*args)
    if run.code == 1 and FEATURE_MISSING in run.stderr:
        pytest.skip(run.stderr.strip())
    return run


def assert_one_line_error(run: Run, code: int, *fragments: str) -> None:
    """A failure: the exit code, nothing on stdout, one stderr line holding every fragment."""
    assert run.code == code, (run.stdout, run.stderr)
    assert run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "Traceback" not in run.stderr
    for fragment in fragments:
        assert fragment in run.stderr, run.stderr


# ---- tables -------------------------------------------------------------------------------------
def orders_batch(rows: list[tuple[int, str, str, str | None]]) -> pa.Table:
    return pa.table({
        "order_id": [r[0] for r in rows], "dt": [r[1] for r in rows],
        "amount": pa.array([Decimal(r[2]) for r in rows], pa.decimal128(12, 2)),
        "note": [r[3] for r in rows],
    }, schema=ORDERS)


def make_warehouse(root: Path) -> tuple[str, FileStoreTable]:
    """A warehouse with db.orders (primary key, partitioned, 2 buckets, 3 commits) and db.events."""
    catalog = Catalog(str(root))
    catalog.create_database("db")
    catalog.create_table("db.orders", Schema.from_pyarrow_schema(
        ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"], options={"bucket": "2"}))
    catalog.create_table("db.events", Schema.from_pyarrow_schema(EVENTS, options={"bucket": "-1"}))
    orders = catalog.get_table("db.orders")
    for rows in COMMITS:
        write(orders, orders_batch(rows))
    write(catalog.get_table("db.events"), pa.table({"ts": [1, 2], "msg": ["x", "y"]}, schema=EVENTS))
    return str(root), orders


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A warehouse that no test changes."""
    warehouse, _ = make_warehouse(tmp_path_factory.mktemp("shared"))
    return warehouse


@pytest.fixture
def fresh(tmp_path: Path) -> tuple[str, FileStoreTable]:
    """A warehouse of this test's own, to change."""
    return make_warehouse(tmp_path / "warehouse")


def live_levels(table: FileStoreTable) -> list[int]:
    return sorted(e.file.level for e in table.store.manifest_io().live_entries(table.latest_snapshot()))


# ---- browsing -----------------------------------------------------------------------------------
def test_tables_lists_every_table_with_its_keys_and_bucket(shared: str) -> None:
    lines = lakehouse("tables", shared).lines()
    assert lines[0].split() == ["database", "table", "primary", "key", "partitioned", "by", "bucket"]
    assert lines[2].split() == ["db", "events", "-1"]
    assert lines[3].split() == ["db", "orders", "order_id,", "dt", "dt", "2"]

    doc = lakehouse("--json", "tables", shared).json()  # global options also go before the command
    assert doc["tables"] == [
        {"database": "db", "table": "events", "primary_keys": [], "partition_keys": [], "bucket": "-1"},
        {"database": "db", "table": "orders", "primary_keys": ["order_id", "dt"],
         "partition_keys": ["dt"], "bucket": "2"},
    ]


def test_show_gives_schema_keys_options_and_latest_snapshot(shared: str) -> None:
    text = lakehouse("show", shared, "db.orders").stdout
    assert "primary key     order_id, dt" in text
    assert "DECIMAL(12, 2)" in text and "BIGINT NOT NULL" in text
    assert "  bucket  2" in text

    doc = lakehouse("show", shared, "db.orders", "--json").json()
    assert [(f["name"], f["type"]) for f in doc["fields"]] == [
        ("order_id", "BIGINT NOT NULL"), ("dt", "STRING NOT NULL"),
        ("amount", "DECIMAL(12, 2)"), ("note", "STRING")]
    assert doc["primary_keys"] == ["order_id", "dt"] and doc["partition_keys"] == ["dt"]
    assert doc["bucket_keys"] == ["order_id"] and doc["options"] == {"bucket": "2"}
    assert doc["latest_snapshot"]["id"] == 3
    assert doc["latest_snapshot"]["total_record_count"] == 5


def test_show_lists_user_keys_and_stored_only_options_as_not_used(tmp_path: Path) -> None:
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    catalog.create_table("db.t", Schema.from_pyarrow_schema(
        pa.schema([pa.field("id", pa.int64(), nullable=False)]), primary_keys=["id"],
        options={"bucket": "1", "owner": "data-team", "lookup.cache-rows": "100"}))
    text = lakehouse("show", str(tmp_path), "db.t").stdout
    assert "owner              data-team  (not used by this engine)" in text
    assert "lookup.cache-rows  100  (not used by this engine)" in text
    assert "bucket             1\n" in text
    doc = lakehouse("show", str(tmp_path), "db.t", "--json").json()
    assert doc["options_not_used"] == ["lookup.cache-rows", "owner"]


def test_snapshots_lists_every_commit_oldest_first_in_aligned_columns(shared: str) -> None:
    lines = lakehouse("snapshots", shared, "db.orders").lines()
    header, rows = lines[0], lines[2:]
    assert [r.split()[0] for r in rows] == ["1", "2", "3"]
    assert all(r.index("APPEND") == header.index("kind") for r in rows)
    assert set(lines[1].replace(" ", "")) == {"-"}

    doc = lakehouse("snapshots", shared, "db.orders", "--json").json()
    assert [(s["id"], s["commit_kind"], s["total_record_count"], s["delta_record_count"])
            for s in doc["snapshots"]] == [(1, "APPEND", 3, 3), (2, "APPEND", 4, 1), (3, "APPEND", 5, 1)]
    assert all(isinstance(s["time_millis"], int) and s["time"] for s in doc["snapshots"])


def test_files_lists_the_live_files_of_the_latest_or_a_given_snapshot(shared: str) -> None:
    latest = lakehouse("files", shared, "db.orders", "--json").json()
    first = lakehouse("files", shared, "db.orders", "--snapshot", "1", "--json").json()
    assert latest["snapshot_id"] == 3 and first["snapshot_id"] == 1
    assert sum(f["row_count"] for f in latest["files"]) == 5
    assert sum(f["row_count"] for f in first["files"]) == 3
    assert {f["partition"] for f in latest["files"]} == {f"dt={D1}", f"dt={D2}"}
    for f in latest["files"]:
        assert Path(f["path"]).is_file() and Path(f["path"]).stat().st_size == f["file_size"]
        assert f["level"] == 0 and f["total_buckets"] == 2 and f["bucket"] in (0, 1)

    text = lakehouse("files", shared, "db.orders").stdout
    assert text.splitlines()[-1].startswith(f"{len(latest['files'])} files, 5 rows, ")


def test_buckets_reports_bucket_stats_per_partition_and_bucket(shared: str) -> None:
    run = procedure("buckets", shared, "db.orders", "--json")
    buckets = run.json()["buckets"]
    assert sum(b["record_count"] for b in buckets) == 5
    assert sum(b["file_count"] for b in buckets) == len(live_levels(Catalog(shared).get_table("db.orders")))
    assert all(b["total_buckets"] == 2 and b["max_level"] == 0 for b in buckets)
    assert "sorted runs" in lakehouse("buckets", shared, "db.orders").lines()[0]


def test_read_returns_the_merged_rows_with_exact_values(shared: str) -> None:
    doc = lakehouse("read", shared, "db.orders", "--json").json()
    assert doc["snapshot_id"] == 3 and doc["columns"] == ["order_id", "dt", "amount", "note"]
    assert {r["order_id"]: (r["amount"], r["note"]) for r in doc["rows"]} == LATEST_ROWS


def test_read_time_travels_projects_and_limits(shared: str) -> None:
    doc = lakehouse("read", shared, "db.orders", "--snapshot", "1", "--columns", "note,order_id",
                    "--json").json()
    assert doc["columns"] == ["note", "order_id"]
    assert sorted(doc["rows"], key=lambda r: r["order_id"]) == [
        {"note": "a", "order_id": 1}, {"note": None, "order_id": 2}, {"note": "c", "order_id": 3}]
    limited = lakehouse("read", shared, "db.orders", "--limit", "2", "--json").json()
    assert len(limited["rows"]) == 2


def test_read_prints_an_aligned_table_with_nulls_and_escaped_newlines(shared: str) -> None:
    lines = lakehouse("read", shared, "db.orders").lines()
    assert lines[0].split() == ["order_id", "dt", "amount", "note"]
    assert lines[-1] == "(4 rows from snapshot 3)"
    body = lines[2:-1]
    assert len(body) == 4
    assert any(r.endswith("NULL") for r in body)
    assert any(r.endswith("two\\nlines") for r in body)
    amount_end = lines[0].index("amount") + len("amount")
    assert all(r[:amount_end].endswith(("11.00", "20.00", "30.00", "40.00")) for r in body)


def test_append_table_reads_and_lists_files(shared: str) -> None:
    doc = lakehouse("read", shared, "db.events", "--json", "--progress").json()
    assert sorted(r["ts"] for r in doc["rows"]) == [1, 2]
    files = lakehouse("files", shared, "db.events", "--json").json()["files"]
    assert [f["partition"] for f in files] == [""] and files[0]["row_count"] == 2


# ---- failures -----------------------------------------------------------------------------------
def test_unknown_table_fails_with_code_1_and_says_how_to_list_tables(shared: str) -> None:
    run = lakehouse("show", shared, "db.nope", "--json")
    assert_one_line_error(run, 1, "table 'db.nope' does not exist", f"lakehouse tables {shared}")


def test_unknown_snapshot_fails_with_code_1_and_says_how_to_list_snapshots(shared: str) -> None:
    run = lakehouse("read", shared, "db.orders", "--snapshot", "99")
    assert_one_line_error(run, 1, "snapshot 99", "does not exist",
                          f"lakehouse snapshots {shared} db.orders")


def test_missing_warehouse_fails_with_code_1(tmp_path: Path) -> None:
    run = lakehouse("tables", str(tmp_path / "nowhere"))
    assert_one_line_error(run, 1, "does not exist or is not a directory")


def test_a_bad_option_value_exits_2_with_one_line(shared: str) -> None:
    run = lakehouse("read", shared, "db.orders", "--limit", "many", "--json")
    assert_one_line_error(run, 2, "argument --limit: 'many' is not a whole number",
                          "see 'lakehouse read --help'")


# The same checks in process (main() is what the console script calls): argument handling only.
@pytest.mark.parametrize(("args", "fragment"), [
    (["files", "{wh}", "db.orders", "--snapshot", "0"], "'0' must be 1 or greater"),
    (["show", "{wh}", "orders"], "must look like 'database.table'"),
    (["read", "{wh}", "db.orders", "--columns", "order_id,nope"], "--columns names nope"),
    (["read", "{wh}", "db.orders", "--snapshot", "1", "--tag", "t"], "not allowed with argument"),
    (["compact", "{wh}", "db.orders", "--partitions", f"dt={D1},dt={D2}"], "separate partitions with ';'"),
    (["compact", "{wh}", "db.orders", "--partitions", "region=eu"], "not a partition key"),
    (["compact", "{wh}", "db.events", "--partitions", "ts=1"], "is not partitioned"),
    (["expire-snapshots", "{wh}", "db.orders", "--older-than", "last tuesday"], "neither epoch"),
    (["expire-snapshots", "{wh}", "db.orders", "--retain-min", "5", "--retain-max", "2"],
     "--retain-min (5) must not be greater than --retain-max (2)"),
    (["rollback", "{wh}", "db.orders"], "one of the arguments --snapshot --tag is required"),
    (["create-tag", "{wh}", "db.orders", "--tag", "42"], "tag name '42' is numeric only"),
    (["frobnicate"], "invalid choice"),
])
def test_usage_errors_exit_2_with_one_line(shared: str, args: list[str], fragment: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = main([a.format(wh=shared) for a in args])
    out, err = capsys.readouterr()
    assert_one_line_error(Run(code, out, err), 2, fragment, "--help")


def test_debug_shows_the_traceback(shared: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--debug", "files", shared, "db.orders", "--snapshot", "99"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "SnapshotNotExistError" in err
    assert err.strip().splitlines()[-1].startswith("lakehouse files: error: snapshot 99")


def test_console_script_and_help() -> None:
    script = Path(sys.executable).parent / "lakehouse"
    if not script.exists():
        pytest.skip(f"{script} is not installed; run: .venv/bin/pip install -e . --no-deps")
    proc = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    for command in ("tables", "show", "snapshots", "files", "buckets", "read", "compact", "rescale",
                    "expire-snapshots", "remove-orphan-files", "rollback", "create-tag", "delete-tag"):
        assert command in proc.stdout


# ---- procedures ---------------------------------------------------------------------------------
def test_compact_full_rewrites_each_bucket_into_one_file_and_keeps_rows(
        fresh: tuple[str, FileStoreTable]) -> None:
    warehouse, table = fresh
    doc = procedure("compact", warehouse, "db.orders", "--full", "--json").json()
    assert doc["compact_strategy"] == "full" and doc["snapshot_ids"]
    assert table.latest_snapshot().commit_kind == "COMPACT"
    assert all(level > 0 for level in live_levels(table))
    rows = lakehouse("read", warehouse, "db.orders", "--json").json()["rows"]
    assert {r["order_id"]: (r["amount"], r["note"]) for r in rows} == LATEST_ROWS


def test_compact_of_one_partition_leaves_the_others(fresh: tuple[str, FileStoreTable]) -> None:
    warehouse, table = fresh
    run = procedure("compact", warehouse, "db.orders", "--compact-strategy", "full",
                    "--partitions", f"dt={D1}")
    assert run.lines()[0].startswith("full compaction of db.orders: committed snapshot 4")
    entries = table.store.manifest_io().live_entries(table.latest_snapshot())
    codec = table.store.partition_codec()
    levels = {codec.from_binary(e.partition).path_string(): e.file.level for e in entries}
    assert levels[f"dt={D1}"] > 0 and levels[f"dt={D2}"] == 0


def test_expire_snapshots_keeps_the_newest(fresh: tuple[str, FileStoreTable]) -> None:
    warehouse, table = fresh
    doc = procedure("expire-snapshots", warehouse, "db.orders", "--retain-max", "1",
                    "--retain-min", "1", "--older-than", "2999-01-01 00:00:00", "--json").json()
    assert doc == {"table": "db.orders", "expired": 2, "earliest_snapshot_id": 3,
                   "latest_snapshot_id": 3}
    assert table.snapshot_manager().list_snapshot_ids() == [3]
    rows = lakehouse("read", warehouse, "db.orders", "--json").json()["rows"]
    assert len(rows) == 4


def test_remove_orphan_files_lists_on_dry_run_then_deletes(fresh: tuple[str, FileStoreTable]) -> None:
    warehouse, table = fresh
    orphan = Path(table.path) / f"dt={D1}" / "bucket-0" / "data-orphan-0.parquet"
    orphan.write_bytes(b"not referenced")
    future = "2999-01-01 00:00:00"
    dry = procedure("remove-orphan-files", warehouse, "db.orders", "--older-than", future,
                    "--dry-run", "--json").json()
    assert dry["dry_run"] is True and any(f.endswith("data-orphan-0.parquet") for f in dry["files"])
    assert orphan.exists()
    done = lakehouse("remove-orphan-files", warehouse, "db.orders", "--older-than", future).lines()
    assert done[-1].startswith("deleted ")
    assert not orphan.exists()
    assert len(lakehouse("read", warehouse, "db.orders", "--json").json()["rows"]) == 4


def test_rollback_to_a_snapshot_makes_it_the_latest(fresh: tuple[str, FileStoreTable]) -> None:
    warehouse, table = fresh
    doc = procedure("rollback", warehouse, "db.orders", "--snapshot", "1", "--json").json()
    assert doc["latest_snapshot_id"] == 1
    rows = lakehouse("read", warehouse, "db.orders", "--json").json()["rows"]
    assert sorted(r["order_id"] for r in rows) == [1, 2, 3]
    run = lakehouse("rollback", warehouse, "db.orders", "--snapshot", "3")
    assert_one_line_error(run, 1, "snapshot 3", "does not exist")


def test_tags_create_read_rollback_and_delete(fresh: tuple[str, FileStoreTable]) -> None:
    warehouse, table = fresh
    created = procedure("create-tag", warehouse, "db.orders", "--tag", "first", "--snapshot", "1",
                        "--json").json()
    assert created == {"table": "db.orders", "tag": "first", "snapshot_id": 1}
    assert lakehouse("create-tag", warehouse, "db.orders", "--tag", "last").code == 0
    tags = lakehouse("tags", warehouse, "db.orders", "--json").json()["tags"]
    assert [(t["tag"], t["snapshot_id"]) for t in tags] == [("first", 1), ("last", 3)]
    snapshots = lakehouse("snapshots", warehouse, "db.orders", "--json").json()["snapshots"]
    assert [s["tags"] for s in snapshots] == [["first"], [], ["last"]]

    rows = lakehouse("read", warehouse, "db.orders", "--tag", "first", "--json").json()["rows"]
    assert sorted(r["order_id"] for r in rows) == [1, 2, 3]

    # As in Paimon, rolling back to a tag also removes the tags of the snapshots after it.
    assert lakehouse("rollback", warehouse, "db.orders", "--tag", "first").code == 0
    assert table.latest_snapshot().id == 1
    assert list(table.tags()) == ["first"]

    assert lakehouse("create-tag", warehouse, "db.orders", "--tag", "again").code == 0
    deleted = lakehouse("delete-tag", warehouse, "db.orders", "--tag", "first,again", "--json").json()
    assert deleted["deleted"] == ["first", "again"]
    assert lakehouse("tags", warehouse, "db.orders").lines() == ["table db.orders has no tags"]


# Engine errors about tags, in process: what to do next, and nothing half done.
def test_unknown_tags_fail_with_code_1_and_delete_nothing(fresh: tuple[str, FileStoreTable],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    warehouse, table = fresh
    if main(["create-tag", warehouse, "db.orders", "--tag", "kept"]) != 0:
        pytest.skip(capsys.readouterr().err.strip())
    capsys.readouterr()
    assert main(["read", warehouse, "db.orders", "--tag", "nope"]) == 1
    out, err = capsys.readouterr()
    assert_one_line_error(Run(1, out, err), 1, "'nope'", f"lakehouse tags {warehouse} db.orders")
    assert main(["delete-tag", warehouse, "db.orders", "--tag", "kept,nope"]) == 1
    out, err = capsys.readouterr()
    assert_one_line_error(Run(1, out, err), 1, "'nope'", "nothing was deleted")
    assert list(table.tags()) == ["kept"]


def test_rescale_changes_the_bucket_count(fresh: tuple[str, FileStoreTable]) -> None:
    warehouse, table = fresh
    procedure("rescale", warehouse, "db.orders", "--bucket-num", "3", "--json").json()
    entries = table.store.manifest_io().live_entries(table.latest_snapshot())
    assert {e.total_buckets for e in entries} == {3}
    rows = lakehouse("read", warehouse, "db.orders", "--json").json()["rows"]
    assert {r["order_id"]: (r["amount"], r["note"]) for r in rows} == LATEST_ROWS


# ---- helpers, in process ------------------------------------------------------------------------
def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("lakehouse ")


def test_older_than_takes_epoch_millis_or_a_local_time() -> None:
    assert timestamp_millis("1795219200000") == 1795219200000
    assert timestamp_millis("2026-11-01T00:00:00Z") == 1793491200000
    assert timestamp_millis("2026-11-01 02:00:00+02:00") == 1793491200000
    local = timestamp_millis("2026-11-01 00:00:00")
    assert local == round(time.mktime((2026, 11, 1, 0, 0, 0, 0, 0, -1)) * 1000)


def test_partition_specs_follow_paimon_syntax() -> None:
    assert partition_specs(f"dt={D1};dt={D2}") == [{"dt": D1}, {"dt": D2}]
    assert partition_specs("dt=x,hh=08") == [{"dt": "x", "hh": "08"}]


def test_json_values_stay_exact_and_valid() -> None:
    assert to_jsonable({"a": Decimal("1.10"), "b": b"\x00\xff", "c": float("nan"), "d": [float("-inf")]}) \
        == {"a": "1.10", "b": "AP8=", "c": "NaN", "d": ["-Infinity"]}
    assert format_bytes(512) == "512 B" and format_bytes(1536) == "1.5 KiB"


def test_progress_draws_a_bar_then_erases_it_and_is_silent_when_disabled() -> None:
    stream = io.StringIO()
    bar = Progress(stream, "reading", total=4, unit="splits")
    bar.advance(2)
    line = bar.render(80)
    assert line.startswith("reading ") and "2/4 splits" in line and "\n" not in line
    assert bar.done == 2
    with Progress(stream, "compacting") as spinner:
        time.sleep(0.6)
    drawn = stream.getvalue()
    assert "compacting" in drawn
    assert drawn.endswith("\x1b[2K")            # the line erased when the work ends
    assert spinner.render(20).startswith("compacting ")
    fast = io.StringIO()
    with Progress(fast, "reading"):
        pass                                        # work that ends at once draws nothing
    assert fast.getvalue() == ""
    quiet = io.StringIO()
    with Progress(quiet, "reading", enabled=False):
        time.sleep(0.3)
    assert quiet.getvalue() == ""
