"""Retry campaign: a commit fails at each of its file operations, in each way an operation can fail,
on an aggregation (`sum`) and an append table; then the caller retries the same messages (the same
committer, a new committer of the same commit user, one of a new commit user).

Counted: rows lost and rows wrong (a batch applied twice shows as wrong sums, or rows read twice)
after the retry, and unclear errors: a first error that said nothing was committed (or was not a
PostCommitError with the batch's snapshot id) when the batch had landed, or a PostCommitError when
it had not. Files: the run fails if a referenced file is missing or orphan removal is not exact.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

from bench.reliability import Outcome
from bench.reliability.retry_cases import (
    RETRIES,
    TABLE_KINDS,
    CaseResult,
    Template,
    count_operations,
    error_is_clear,
    make_template,
    modes_of,
    run_case,
)
from lakehouse_engine import Catalog


def _lost_and_wrong(template: Template, result: CaseResult) -> tuple[int, int]:
    """Rows missing from what the batch should make the table read, and rows that should not be
    there (a key with another value counts as wrong, not also as lost)."""
    wrong = sum((result.got - template.after).values())
    missing = sum((template.after - result.got).values())
    return max(0, missing - wrong), wrong


def run(quick: bool) -> list[Outcome]:
    """Every (operation, mode, retry) on both table kinds; quick: one mode and one retry per operation."""
    outcomes = []
    for kind in TABLE_KINDS:
        with tempfile.TemporaryDirectory(prefix="campaign-retry-") as tmp:
            workdir = Path(tmp)
            catalog = Catalog(str(workdir / "warehouse"))
            catalog.create_database("db")
            template = make_template(catalog, kind)
            operations = count_operations(template, workdir)
            trials = lost = wrong = unclear = file_faults = 0
            errors: Counter[str] = Counter()
            for k, (op, _) in enumerate(operations, 1):
                modes = modes_of(op)
                plan = ([(modes[k % len(modes)], RETRIES[k % len(RETRIES)])] if quick
                        else [(m, r) for m in modes for r in RETRIES])
                for mode, retry in plan:
                    result = run_case(template, workdir, k, mode, retry)
                    trials += 1
                    case_lost, case_wrong = _lost_and_wrong(template, result)
                    lost += case_lost
                    wrong += case_wrong
                    unclear += result.claimed_nothing_committed or not error_is_clear(result)
                    file_faults += bool(result.missing_files or result.orphans_left or result.gone_files)
                    errors[type(result.error).__name__ if result.error is not None else "none"] += 1
            first_errors = ", ".join(f"{name} {n}" for name, n in errors.most_common())
            outcomes.append(Outcome(
                area="retry",
                tried=(f"commit to a {kind} table failed at each of its {len(operations)} file operations "
                       f"({'one way each' if quick else 'every way'}), then retried by the same committer, "
                       f"the same commit user or a new one"),
                trials=trials, lost_rows=lost, wrong_rows=wrong, unclear_errors=unclear,
                result=(f"first errors: {first_errors}; every retry read the batch exactly once"
                        if lost == wrong == unclear == file_faults == 0 else
                        f"first errors: {first_errors}; {file_faults} cases with missing or orphan files"),
            ))
    return outcomes
