"""Crash safety: whatever I/O fails, and wherever a writer dies, the table reads a committed state.

Fault campaigns: each operation runs once to count its mutating I/O operations; then, for every k
and every way the k-th can fail (before it takes effect, half written, after it took effect), a
copy of the table runs the operation on a FileIO that fails there and behaves as a dead process
from then on. Afterwards, through a plain FileIO:

  1. the latest snapshot reads exactly the state before or after the operation, every snapshot
     and tag present reads (no file any of them references is missing);
  2. a new writer commits on top, and the table reads that state plus its rows, also after an
     expiry down to two snapshots;
  3. `remove_orphan_files(older_than=now)` leaves exactly the files the snapshots and tags
     reference (schema, snapshot, hint and tag files aside).

Adding an operation to the campaign is one line in OPERATIONS. A real writer process is also
killed with SIGKILL mid-commit, and damaged files must raise CorruptFileError naming them.
Run `pytest tests/lakehouse_engine/test_crash_safety.py -q -s` to print the campaign figures.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import random
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lakehouse_engine import Catalog, CorruptFileError, LakehouseError, SnapshotNotExistError
from lakehouse_engine.store.manifest_io import clear_manifest_cache
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.maintenance.helpers import (
    expected_files,
    files_on_disk,
    fresh,
    keyed_table,
    missing_files,
    now_ms,
    state,
    upsert,
)
from tests.support.io_faults import FAULT_MODES, FaultInjectingFileIO, InjectedFault

NEW_KEY = 9_999
WRITE_ONLY = {"write-only": "true"}
# Commits expire snapshots and compact buckets as they go, so a commit's I/O includes both.
BUSY_TABLE = {"snapshot.num-retained.min": "2", "snapshot.num-retained.max": "3",
              "snapshot.time-retained": "1 ms", "num-sorted-run.compaction-trigger": "2"}


def history(commits: int, tags: dict[str, int] | None = None, expire_to: int | None = None,
            compact_after: int | None = None) -> Callable[[FileStoreTable], None]:
    """Builds a table: `commits` upserts (tags taken as they come), an optional compaction and expiry."""
    def build(table: FileStoreTable) -> None:
        for i in range(commits):
            upsert(table, [i, i + 1, 100 + i % 3], i)
            for name, sid in (tags or {}).items():
                if table.latest_snapshot().id == sid:
                    table.create_tag(name, sid)
            if compact_after is not None and i == compact_after:
                table.compact(full=True)
        if expire_to is not None:
            table.expire_snapshots(retain_max=expire_to)
    return build


@dataclass(frozen=True)
class Operation:
    """One operation under test: the table it starts from and what it does."""

    name: str
    options: dict[str, str]
    prepare: Callable[[FileStoreTable], None]
    run: Callable[[FileStoreTable], Any]
    #: What makes a new writer's rows visible when writing alone does not (postpone-bucket rows
    #: wait for a compaction); it also finishes the operation, so the state after it is expected.
    settle: Callable[[FileStoreTable], Any] | None = None


OPERATIONS = [
    Operation("write+commit", BUSY_TABLE, history(6), lambda t: upsert(t, [1, 2, 50, 51], 77)),
    Operation("expire", WRITE_ONLY, history(8, {"t3": 3}, compact_after=4),
              lambda t: t.expire_snapshots(retain_max=2)),
    Operation("rollback", WRITE_ONLY, history(7, {"t2": 2, "t6": 6}, compact_after=3),
              lambda t: t.rollback_to(4)),
    Operation("rollback to expired tag", WRITE_ONLY, history(7, {"t2": 2}, expire_to=3),
              lambda t: t.rollback_to("t2")),
    Operation("delete tag of expired snapshot", WRITE_ONLY, history(6, {"t2": 2}, expire_to=2),
              lambda t: t.delete_tag("t2")),
    Operation("full compaction", WRITE_ONLY, history(5), lambda t: t.compact(full=True)),
    Operation("rescale", WRITE_ONLY, history(4), lambda t: t.rescale(3)),
    Operation("dynamic bucket write+commit", {**WRITE_ONLY, "bucket": "-1"}, history(4),
              lambda t: upsert(t, [1, 2, 50, 51], 77)),
    Operation("postpone bucket compaction", {**WRITE_ONLY, "bucket": "-2"}, history(4),
              lambda t: t.compact(), settle=lambda t: t.compact()),
]


@dataclass
class Figures:
    """What a campaign did, for docs/reliability.md: operations, faults, rows compared, outcomes."""

    operations: int = 0
    faults: int = 0
    rows_checked: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)


def _copy(table: FileStoreTable, dest: Path) -> str:
    shutil.copytree(table.path, dest)
    return str(dest)


def _modes(kind: str, k: int, every_mode: bool) -> tuple[str, ...]:
    """How the k-th operation fails: every way (the soak run), or one, taking turns (the quick run)."""
    modes = ("before", "after") if kind == "delete" else FAULT_MODES
    return modes if every_mode else (modes[k % len(modes)],)


def _check_crashed_table(table: FileStoreTable, before: dict[int, int], after: dict[int, int],
                         figures: Figures, settle: Callable[[FileStoreTable], Any] | None) -> dict[int, int]:
    """Steps 1 to 3 of the module doc on a table a fault interrupted; returns the state it read."""
    clear_manifest_cache()
    got = state(table)
    assert got in (before, after), "the table reads neither the state before nor after"
    outcome = "same rows" if before == after else "after" if got == after else "before"
    figures.outcomes[outcome] = figures.outcomes.get(outcome, 0) + 1
    figures.rows_checked += len(got)
    for sid in table.snapshot_manager().list_snapshot_ids():
        figures.rows_checked += len(state(table, sid))
    for name in table.tags():
        figures.rows_checked += len(state(table, tag=name))
    assert missing_files(table) == set()
    upsert(table, [NEW_KEY], 7)
    if settle is not None:
        settle(table)
    carried_on = {**(got if settle is None else after), NEW_KEY: 7}
    assert state(table) == carried_on
    table.expire_snapshots(retain_max=2)  # whatever history the fault left, expiry copes
    assert state(table) == carried_on and missing_files(table) == set()
    figures.rows_checked += 2 * len(carried_on)
    table.remove_orphan_files(older_than=now_ms())
    assert files_on_disk(table) == expected_files(table)
    return got


def run_campaign(op: Operation, catalog: Catalog, workdir: Path, every_mode: bool) -> Figures:
    template = keyed_table(catalog, "crash", options=op.options)
    op.prepare(template)
    before = state(template)
    counting = FaultInjectingFileIO.local()
    reference = FileStoreTable(counting, template.name, _copy(template, workdir / "reference"),
                               template.schema)
    op.run(reference)
    after = state(fresh(reference))
    figures = Figures(operations=counting.count)
    for k, (kind, _) in enumerate(counting.operations, 1):
        for mode in _modes(kind, k, every_mode):
            case = workdir / f"case-{k}-{mode}"
            io = FaultInjectingFileIO.local(fail_at=k, mode=mode)  # type: ignore[arg-type]
            table = FileStoreTable(io, template.name, _copy(template, case), template.schema)
            with contextlib.suppress(OSError, LakehouseError):
                op.run(table)  # the process "dies" in here; what matters is what it left behind
            assert io.fault is not None and io.fault[0] == kind, f"operation {k} was not a {kind}"
            figures.faults += 1
            try:
                _check_crashed_table(fresh(table), before, after, figures, op.settle)
            except AssertionError as exc:
                raise AssertionError(f"{op.name}: fault {mode} operation {k} ({kind} "
                                     f"{io.fault[1]}): {exc}") from exc
    return figures


def _report(op: Operation, figures: Figures) -> None:
    print(f"\n[crash campaign] {op.name}: {figures.operations} mutating operations, "
          f"{figures.faults} faults injected, {figures.rows_checked} rows checked, "
          f"outcomes {figures.outcomes}, nothing lost")


@pytest.mark.parametrize("op", OPERATIONS, ids=[o.name for o in OPERATIONS])
def test_a_fault_at_any_io_leaves_a_committed_readable_table(op: Operation, catalog: Catalog,
                                                             tmp_path: Path) -> None:
    figures = run_campaign(op, catalog, tmp_path / "cases", every_mode=False)
    _report(op, figures)
    assert figures.faults == figures.operations > 0


@pytest.mark.slow
@pytest.mark.parametrize("op", OPERATIONS, ids=[o.name for o in OPERATIONS])
def test_every_kind_of_fault_at_any_io_leaves_a_committed_readable_table(op: Operation, catalog: Catalog,
                                                                         tmp_path: Path) -> None:
    figures = run_campaign(op, catalog, tmp_path / "cases", every_mode=True)
    _report(op, figures)
    assert figures.faults > figures.operations > 0


def test_rerunning_an_interrupted_rollback_finishes_it(catalog: Catalog, tmp_path: Path) -> None:
    op = OPERATIONS[2]
    template = keyed_table(catalog, "crash", options=op.options)
    op.prepare(template)
    expected = state(template, 4)
    counting = FaultInjectingFileIO.local()
    op.run(FileStoreTable(counting, template.name, _copy(template, tmp_path / "ref"), template.schema))
    for k in range(1, counting.count + 1, 2):
        io = FaultInjectingFileIO.local(fail_at=k)
        case = FileStoreTable(io, template.name, _copy(template, tmp_path / f"c{k}"), template.schema)
        with contextlib.suppress(OSError, LakehouseError):
            op.run(case)
        again = fresh(case)
        op.run(again)
        assert state(again) == expected
        assert again.snapshot_manager().list_snapshot_ids() == [1, 2, 3, 4]
        again.remove_orphan_files(older_than=now_ms())
        assert files_on_disk(again) == expected_files(again)


@pytest.mark.parametrize("stride", [pytest.param(3, id="every third"),
                                    pytest.param(1, id="every", marks=pytest.mark.slow)])
def test_a_transient_fault_is_raised_or_absorbed_never_corrupting(catalog: Catalog, tmp_path: Path,
                                                                  stride: int) -> None:
    """Without `crash`, only the k-th operation fails and the code carries on (retries, cleanup)."""
    op = OPERATIONS[0]
    template = keyed_table(catalog, "crash", options=op.options)
    op.prepare(template)
    before = state(template)
    counting = FaultInjectingFileIO.local()
    op.run(FileStoreTable(counting, template.name, _copy(template, tmp_path / "ref"), template.schema))
    after = state(fresh(FileStoreTable(counting, template.name, str(tmp_path / "ref"), template.schema)))
    figures = Figures()
    for k in range(1, counting.count + 1, stride):
        io = FaultInjectingFileIO.local(fail_at=k, crash=False)
        case = FileStoreTable(io, template.name, _copy(template, tmp_path / f"c{k}"), template.schema)
        with contextlib.suppress(OSError, LakehouseError):
            op.run(case)
        _check_crashed_table(fresh(case), before, after, figures, op.settle)


# ---- a real writer process killed with SIGKILL ------------------------------------------------
def _batch_keys(b: int) -> list[int]:
    return [b, 1000 + b % 5]


def model(n: int) -> dict[int, int]:
    """The state after batches 1..n: batch b inserts key b and overwrites key 1000 + b % 5."""
    out: dict[int, int] = {}
    for b in range(1, n + 1):
        out.update({k: b for k in _batch_keys(b)})
    return out


def _commit_forever(warehouse: str, progress: Any) -> None:
    table = Catalog(warehouse).get_table("db.k")
    b = progress.value + 1
    while True:
        upsert(table, _batch_keys(b), b)
        progress.value = b
        b += 1


def kill_rounds(catalog: Catalog, rounds: int, seed: int) -> Figures:
    """Kill a committing writer `rounds` times; after each, check and carry on."""
    table = keyed_table(catalog, "k", options=BUSY_TABLE)
    rng = random.Random(seed)
    ctx = mp.get_context("spawn")
    n = 0
    figures = Figures(operations=rounds)
    for _ in range(rounds):
        progress = ctx.Value("i", n)
        writer = ctx.Process(target=_commit_forever, args=(catalog.warehouse, progress), daemon=True)
        writer.start()
        deadline = time.monotonic() + 120
        while progress.value < n + 2 and time.monotonic() < deadline and writer.is_alive():
            time.sleep(0.005)
        assert writer.is_alive(), "the writer process died on its own"
        time.sleep(rng.uniform(0, 0.04))
        os.kill(writer.pid, signal.SIGKILL)  # type: ignore[arg-type]
        writer.join(timeout=30)
        done = progress.value
        reader = fresh(table)
        got = state(reader)
        n = max((k for k in got if k < 1000), default=0)
        assert n in (done, done + 1), f"read batch {n}, the writer had finished {done}"
        outcome = "in-flight commit landed" if n == done + 1 else "in-flight commit lost or none"
        figures.outcomes[outcome] = figures.outcomes.get(outcome, 0) + 1
        assert got == model(n)
        assert missing_files(reader) == set()
        for sid in reader.snapshot_manager().list_snapshot_ids():
            figures.rows_checked += len(state(reader, sid))
        n += 1
        upsert(reader, _batch_keys(n), n)  # a new writer carries on
        assert state(reader) == model(n)
        figures.faults += len(reader.remove_orphan_files(older_than=now_ms()))  # files left behind
        assert files_on_disk(reader) == expected_files(reader)
        figures.rows_checked += 2 * len(got) + 1
    return figures


def _report_kills(figures: Figures) -> None:
    print(f"\n[kill -9] {figures.operations} committing writer processes killed, {figures.faults} "
          f"orphan files left and removed, {figures.rows_checked} rows checked, outcomes "
          f"{figures.outcomes}, nothing lost")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_writer_killed_mid_commit_leaves_a_committed_state(catalog: Catalog) -> None:
    _report_kills(kill_rounds(catalog, rounds=2, seed=1))


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_many_writers_killed_mid_commit_leave_committed_states(catalog: Catalog) -> None:
    _report_kills(kill_rounds(catalog, rounds=25, seed=7))


# ---- damaged files ----------------------------------------------------------------------------
@pytest.fixture
def damaged(catalog: Catalog) -> FileStoreTable:
    table = keyed_table(catalog, options=WRITE_ONLY)
    for i in range(3):
        upsert(table, range(i * 40, i * 40 + 60), i)
    return table


def _metadata_file(table: FileStoreTable, kind: str) -> Path:
    snap = table.latest_snapshot()
    mio = table.store.manifest_io()
    if kind == "snapshot":
        return Path(table.path_factory.snapshot_path(snap.id))
    if kind == "manifest list":
        return Path(table.path_factory.manifest_path(snap.base_manifest_list))
    if kind == "manifest":
        return Path(table.path_factory.manifest_path(mio.read_manifest_list(snap.base_manifest_list)[0].file_name))
    entry = mio.live_entries(snap)[0]
    spec = table.store.partition_codec().from_binary(entry.partition).spec
    return Path(table.path_factory.bucket_dir(spec, entry.bucket), entry.file.file_name)


def _read_fresh(table: FileStoreTable) -> dict[int, int]:
    clear_manifest_cache()
    return state(table)


KINDS = ["snapshot", "manifest list", "manifest", "data file"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("damage", ["garbage", "empty", "half"])
def test_a_damaged_file_raises_corrupt_file_error_naming_it(damaged: FileStoreTable, kind: str,
                                                            damage: str) -> None:
    path = _metadata_file(damaged, kind)
    data = path.read_bytes()
    path.write_bytes({"garbage": b"\xff\x00garbage" * 7, "empty": b"", "half": data[: len(data) // 2]}[damage])
    with pytest.raises(CorruptFileError, match=path.name):
        _read_fresh(damaged)


@pytest.mark.parametrize("kind", KINDS)
def test_a_missing_file_raises_corrupt_file_error_naming_it(damaged: FileStoreTable, kind: str) -> None:
    path = _metadata_file(damaged, kind)
    path.unlink()
    error = SnapshotNotExistError if kind == "snapshot" else CorruptFileError
    if kind == "snapshot":  # the previous snapshot becomes the latest: time travel names the gone one
        with pytest.raises(error, match=path.name.replace("-", " ")):
            clear_manifest_cache()
            state(damaged, 3)
        return
    with pytest.raises(error, match=path.name):
        _read_fresh(damaged)


def _truncation_outcomes(table: FileStoreTable, kind: str) -> dict[str, list[int]]:
    """Read after cutting the file at many points: which cuts raise and which read (fewer) rows."""
    path = _metadata_file(table, kind)
    data = path.read_bytes()
    full = _read_fresh(table)
    outcomes: dict[str, list[int]] = {"named": [], "short": []}
    cuts = {1, 2, 3, 4, len(data) - 1, *range(5, len(data), max(1, len(data) // 97))}
    if kind in ("manifest", "manifest list"):
        # Right after the Avro header (which ends with the sync marker every block ends with).
        cuts.add(data.find(data[-16:]) + 16)
    for cut in sorted(cuts):
        path.write_bytes(data[:cut])
        try:
            got = _read_fresh(table)
        except CorruptFileError as exc:
            assert path.name in str(exc)
            outcomes["named"].append(cut)
            continue
        assert set(got.items()) <= set(full.items()), f"cut at {cut} read wrong rows"
        outcomes["short"].append(cut)
    path.write_bytes(data)
    return outcomes


@pytest.mark.parametrize("kind", KINDS)
def test_every_truncation_of_a_file_is_named(damaged: FileStoreTable, kind: str) -> None:
    # Avro cut right after its header decodes as an empty file: only the sizes that manifest
    # lists and snapshots record catch that, so the cut is tried on purpose.
    outcomes = _truncation_outcomes(damaged, kind)
    assert outcomes["short"] == [] and len(outcomes["named"]) > 50


@pytest.mark.parametrize("bogus", ["1", "2", "99", "garbage", "", "-5"])
def test_a_lying_earliest_hint_does_not_mislead_readers_or_expiry(catalog: Catalog, bogus: str) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    for i in range(6):
        upsert(table, [i], i)
    table.expire_snapshots(retain_max=4)  # 3..6 remain
    hint = Path(table.path_factory.snapshot_dir) / "EARLIEST"
    hint.write_text(bogus)
    assert table.snapshot_manager().earliest_snapshot_id() == 3
    with pytest.raises(SnapshotNotExistError, match="earliest retained is 3"):
        state(table, 2)
    assert state(table, 3) == {0: 0, 1: 1, 2: 2}
    hint.unlink()
    assert table.snapshot_manager().earliest_snapshot_id() == 3
    hint.write_text(bogus)
    assert table.expire_snapshots(retain_max=2) == 2
    assert table.snapshot_manager().list_snapshot_ids() == [5, 6]
    assert hint.read_text() == "5"
    assert files_on_disk(table) == expected_files(table)


def test_injected_faults_are_os_errors_and_name_the_operation(tmp_path: Path) -> None:
    io = FaultInjectingFileIO.local(fail_at=2, mode="partial")
    io.write_bytes(str(tmp_path / "a"), b"12345678")
    with pytest.raises(InjectedFault, match="injected fault at operation 2 .partial.: write") as err:
        io.write_bytes(str(tmp_path / "b"), b"12345678")
    assert isinstance(err.value, OSError)
    assert (tmp_path / "b").read_bytes() == b"1234"
    with pytest.raises(InjectedFault, match="already crashed"):
        io.delete_file(str(tmp_path / "a"))
    assert (tmp_path / "a").exists()
    assert [k for k, _ in io.operations] == ["write", "write"]
