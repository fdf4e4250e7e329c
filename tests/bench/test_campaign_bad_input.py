"""The bad-input campaign's quick mode: every case rejected naming its culprit, no warehouse changed."""

from __future__ import annotations

from bench.reliability.campaign_bad_input import run


def test_quick_bad_input_campaign_finds_no_unclear_error_and_no_changed_warehouse() -> None:
    outcomes = run(quick=True)
    assert len(outcomes) == 6  # names, options, data, pandas, path tricks, CLI
    assert sum(o.trials for o in outcomes) >= 60
    problems = [o.result for o in outcomes if o.unclear_errors or o.lost_rows or o.wrong_rows]
    assert problems == []
