"""Write-audit-publish, for `shop.orders` (`lsm_write`, `lsm_publish`) and `shop.daily_revenue`
(`daily_revenue`, `daily_revenue_publish`): each run's rows go to a branch made for that run, the
blocking checks read the branch, and only a passing audit fast-forwards main (docs/pipelines.md).

A run's branch is `audit-<run id>`, started from the tag `audit-<run id>-base` on main's latest
snapshot (no tag when main had none). The tag is the branch point: publishing compares it with
main's latest snapshot, because a fast-forward replaces main's snapshots after the branch point
with the branch's, and a commit main gained since (another writer, a compaction, a rescale) would
be dropped. When main moved, publishing rebases: the batch's records are written again, through
the engine's write and commit path, into `audit-<run id>-onto-<main's latest>` made at main's
latest snapshot (`FileStoreTable.rebase_appends`), the audit's conditions are checked again on
it, and only then is main fast-forwarded to it (docs/pipelines.md, "Publishing when main moved").

A fast-forward also replaces main's tags from the branch's earliest snapshot on with the branch's
(Paimon's semantics), and that snapshot is the branch point: publishing first carries main's tags
of it onto the branch, so a tag a user made on main's latest snapshot survives the publish.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lakehouse_engine import (
    CommitConflictError,
    FileStoreTable,
    Snapshot,
    SnapshotNotExistError,
    UnsupportedError,
)
from lakehouse_engine.options import WRITE_ONLY

AUDIT_PREFIX = "audit-"
BASE_SUFFIX = "-base"
#: `audit-<run id>-onto-<snapshot id>`: a run's batch rebased onto main's snapshot.
REBASED = "-onto-"

#: Re-checks a rebased audit branch: (main, rebased branch, the audited branch it came from) ->
#: what failed (empty: passed).
Recheck = Callable[[FileStoreTable, FileStoreTable, FileStoreTable], list[str]]


class MainMovedError(Exception):
    """Main gained snapshots after the audit branch's point and the batch could not be rebased
    onto them: a fast-forward would drop them, so nothing was published."""


class RecheckFailedError(Exception):
    """The batch rebased onto main's latest failed the audit's conditions: nothing was published."""


def audit_branch_name(run_id: str) -> str:
    """The audit branch of one Dagster run."""
    return f"{AUDIT_PREFIX}{run_id}"


def run_id_of(branch: str) -> str | None:
    """The run an audit branch belongs to (None: not an audit branch)."""
    if not branch.startswith(AUDIT_PREFIX):
        return None
    return branch[len(AUDIT_PREFIX):].split(REBASED, 1)[0]  # a rebased branch belongs to its run too


def base_tag_name(branch: str) -> str:
    """The tag on main's snapshot where `branch` starts."""
    return f"{branch}{BASE_SUFFIX}"


def audit_branches(table: FileStoreTable) -> list[str]:
    """The audit branches the table holds (open audits and failed ones kept for inspection)."""
    return sorted(b for b in table.list_branches() if b.startswith(AUDIT_PREFIX))


def discard(table: FileStoreTable, branch: str) -> None:
    """Drop an audit branch and its base tag; its files only it used become orphans."""
    if branch in table.list_branches():
        table.drop_branch(branch)
    if base_tag_name(branch) in table.list_tags():
        table.delete_tag(base_tag_name(branch))


def discard_finished(table: FileStoreTable, still_running: Callable[[str], bool]) -> list[str]:
    """Discard the audit branches of runs no longer running (failed audits a later run clears);
    returns their names. A branch of a run still in progress is its open audit: kept."""
    gone = []
    for branch in audit_branches(table):
        run_id = run_id_of(branch)
        if run_id is not None and not still_running(run_id):
            discard(table, branch)
            gone.append(branch)
    return gone


def open_audit_branch(table: FileStoreTable, run_id: str) -> FileStoreTable:
    """The run's audit branch as a table, made at main's latest snapshot (an empty branch with
    main's schema when main has none); an existing one of the same run is reused."""
    name = audit_branch_name(run_id)
    if name not in table.list_branches():
        latest = table.latest_snapshot()
        if latest is None:
            table.create_branch(name)
        else:
            table.create_tag(base_tag_name(name), latest.id, ignore_if_exists=True)
            table.create_branch(name, base_tag_name(name))
    return table.branch_table(name)


def _base_snapshot(table: FileStoreTable, branch: str) -> Snapshot | None:
    """Main's snapshot at the branch point (None: main had none), as the branch keeps it: its copy
    of the base tag (made with the branch, as Paimon copies the tag), else main's. Main's own goes
    when main is rolled back below it (a rollback deletes the later tags)."""
    name = base_tag_name(branch)
    if branch in table.list_branches():
        kept = table.branch_table(branch).tags().get(name)
        if kept is not None:
            return kept
    return table.tags().get(name)


def branch_base(table: FileStoreTable, branch: str) -> int:
    """Main's snapshot id at the branch point (0: main had no snapshot)."""
    base = _base_snapshot(table, branch)
    return base.id if base is not None else 0


def carry_tags(main: FileStoreTable, branch: FileStoreTable, base: int) -> list[str]:
    """Tag on `branch` every tag main holds on a snapshot from `base` on (the ones a fast-forward
    replaces with the branch's), keeping each one's retention (its retention then counts from the
publish); returns their names. The branch
    holds those snapshots: it starts at `base`, and main has none later when publishing."""
    carried = []
    stored = main.tag_manager()
    for name, tagged in main.tags().items():
        if tagged.id < base:
            continue
        as_stored = stored.get(name)  # tags() drops the retention; the stored tag has it
        retained = as_stored.extra.get("tagTimeRetained") if as_stored is not None else None  # seconds
        branch.create_tag(name, tagged.id, ignore_if_exists=True,
                          time_retained=None if retained is None else f"{round(float(retained) * 1000)} ms")
        carried.append(name)
    return carried


@dataclass(frozen=True)
class Published:
    """What a publish did: main's snapshot before and after, the branch's snapshots it took, and,
    when main had moved, the audited branch the batch was rebased from and main's commits kept."""

    branch: str
    main_before: int
    main_after: int
    snapshots_published: int
    rebased_from: str | None = None
    main_commits_kept: str = ""

    def metadata(self) -> dict[str, Any]:
        """The publish step's materialization metadata (the same keys for every table)."""
        return {"published": True, "published_branch": self.branch, "rebased": self.rebased_from is not None,
                "main_commits_kept": self.main_commits_kept or "none", "main_snapshot_before": self.main_before,
                "main_snapshot_id": self.main_after, "snapshots_published": self.snapshots_published}


def _same(a: Snapshot, b: Snapshot) -> bool:
    """Whether two snapshots of one id are the same commit (not one made after a rollback)."""
    return (a.time_millis, a.commit_user, a.commit_identifier) == (b.time_millis, b.commit_user, b.commit_identifier)


def gained_since(table: FileStoreTable, base: int) -> str:
    """Main's snapshots after `base`, as `id KIND` (what a fast-forward to a branch made at `base`
    would drop)."""
    return ", ".join(f"{s.id} {s.commit_kind}" for s in table.snapshots() if s.id > base)


def rebase(table: FileStoreTable, branch: str) -> str:
    """Write the batch of audit branch `branch` again onto main's latest snapshot, in the branch
    `<branch>-onto-<main's latest>` (made at a tag there); returns its name. MainMovedError when
    the engine refuses (a schema the batch added, an overwrite on the branch): main and `branch`
    are as they were, the new branch is dropped."""
    latest = table.latest_snapshot()
    onto = latest.id if latest is not None else 0
    name = f"{branch.split(REBASED, 1)[0]}{REBASED}{onto}"
    if name not in table.list_branches():
        table.create_tag(base_tag_name(name), onto, ignore_if_exists=True)
        table.create_branch(name, base_tag_name(name))
    try:
        rebased = table.branch_table(name)
        rebased.rebase_appends(branch, branch_base(table, branch))
        if rebased.options.require(WRITE_ONLY):
            # The re-written batch is a write-only APPEND, as lsm_write's was: its level 0 goes up
            # the same way (one new sorted run per bucket, no run merged), giving its lookup
            # changelog against main's rows before the re-check and the publish.
            rebased.compact(level0_only=True)
    except (CommitConflictError, UnsupportedError) as exc:
        discard(table, name)
        raise MainMovedError(
            f"main of {table.identifier} moved after audit branch {branch} was made at snapshot "
            f"{branch_base(table, branch)} ({gained_since(table, branch_base(table, branch))}) and its batch "
            f"cannot be rebased onto snapshot {onto}: {exc}. Nothing was published; the branch is kept "
            f"for inspection, the staged rows stay pending and the next run writes and audits them "
            f"again on top of main") from exc
    return name


def branch_holding_batch(table: FileStoreTable, run_id: str) -> str | None:
    """The branch that holds run `run_id`'s batch now: its audit branch, or when a publish rebased
    the batch and dropped the audited branch, the latest rebased one; None when neither is left."""
    name = audit_branch_name(run_id)
    branches = table.list_branches()
    if name in branches:
        return name
    rebased = [b for b in branches if b.startswith(f"{name}{REBASED}") and b.rsplit(REBASED, 1)[1].isdigit()]
    return max(rebased, key=lambda b: int(b.rsplit(REBASED, 1)[1]), default=None)


def fast_forwarded(table: FileStoreTable, branch: str) -> bool:
    """Whether main was fast-forwarded to audit branch `branch` already (a publish that died before
    dropping the branch): main holds the branch's head, past the branch point, as the same commit,
    whether or not main moved on since (a compaction, another run's publish: publishing again
    would rebase the batch and write it twice, its rows over newer ones). MainMovedError when main
    expired that snapshot (it cannot be told)."""
    if branch not in table.list_branches():
        return False
    head = table.branch_table(branch).latest_snapshot()
    if head is None or head.id <= branch_base(table, branch):
        return False
    try:
        on_main = table.snapshot(head.id)
    except SnapshotNotExistError:
        earliest = table.snapshot_manager().earliest_snapshot_id()
        if earliest is None or earliest < head.id:
            return False  # (main never reached it, or was rolled back below it: main does not hold it)
        raise MainMovedError(
            f"main of {table.identifier} expired its snapshots up to {earliest - 1} since audit branch {branch} "
            f"was made: whether a publish already fast-forwarded main to the branch's head (snapshot "
            f"{head.id}) cannot be told, and publishing it again would write the batch a second time over "
            f"newer rows. Nothing was published; the branch is kept for inspection. Drop it "
            f"(wap.discard) once main is known to hold the batch, or to have the next run write and "
            f"audit the staged rows again") from None
    return _same(head, on_main)


def publish(table: FileStoreTable, branch: str, recheck: Recheck | None = None) -> Published:
    """Fast-forward main to the audit branch, then drop the branch and its tag.

    When main's latest snapshot is no longer the branch point: with `recheck`, the batch is
    rebased onto main's latest (`rebase`), `recheck` judges the rebased branch, and main is
    fast-forwarded to it (the audited branch is dropped once the rebased one holds the batch);
    RecheckFailedError (main untouched, both branches kept) when it fails. Without `recheck`, or
    when the rebase is refused or main moved again meanwhile, MainMovedError (main untouched)."""
    point = _base_snapshot(table, branch)
    base = point.id if point is not None else 0
    latest = table.latest_snapshot()
    main_before = latest.id if latest is not None else 0
    rebased_from, kept = None, ""
    # Main rolled back below the branch point and written again up to its id holds another
    # snapshot under that id: a fast-forward would drop it.
    rewritten = point is not None and latest is not None and latest.id == base and not _same(latest, point)
    if main_before != base or rewritten:
        kept = gained_since(table, base - 1 if rewritten else base) or f"rolled back to snapshot {main_before}"
        if recheck is None:
            raise MainMovedError(
                f"main of {table.identifier} moved after audit branch {branch} was made at snapshot {base}: "
                f"it is at {main_before} now ({kept}); a fast-forward would drop those snapshots, so "
                f"nothing was published. The branch is kept for inspection; the staged rows stay pending "
                f"and the next run writes and audits them again on top of main")
        rebased = rebase(table, branch)
        failed = recheck(table, table.branch_table(rebased), table.branch_table(branch))
        if failed:
            raise RecheckFailedError(
                f"the batch of audit branch {branch}, rebased onto main's snapshot {main_before} as branch "
                f"{rebased}, failed the audit there: {'; '.join(failed)}. Nothing was published; both "
                f"branches are kept for inspection and the staged rows stay pending")
        discard(table, branch)  # the rebased branch holds the batch now
        rebased_from, branch, base = branch, rebased, main_before
        latest = table.latest_snapshot()
        main_before = latest.id if latest is not None else 0
        if main_before != base:
            raise MainMovedError(
                f"main of {table.identifier} moved again ({gained_since(table, base)}) while the batch "
                f"was rebased onto snapshot {base} as branch {branch}; nothing was published, the "
                f"staged rows stay pending and the next run writes and audits them again")
    head = table.branch_table(branch).latest_snapshot()
    head_id = head.id if head is not None else base
    if head_id > base:
        carry_tags(table, table.branch_table(branch), base)
        table.fast_forward(branch)
    discard(table, branch)
    return Published(branch, main_before, max(head_id, main_before), head_id - base, rebased_from, kept)
