"""A re-execution from failure of an `lsm_publish` that died after its fast-forward, when main
moved on before the re-execution (a rescale of `shop.orders`): it only finishes the publish.
Before, it took main's move for one past the branch point, rebased the batch and published it a
second time (tests/pipelines/test_wap_fast_forwarded.py shows the rows it then put over newer ones)."""

from __future__ import annotations

import pytest

from pipelines.lib import wap
from tests.pipelines import test_lsm_reexecution as lsm
from tests.pipelines.test_lsm_reexecution import Runs, _published, died_after_the_fast_forward

# (The fixtures of the re-execution tests: a Dagster instance, the staged day and its job.)
instance, runs = lsm.instance, lsm.runs

pytestmark = pytest.mark.spark


def test_a_publish_that_died_after_the_fast_forward_is_only_finished_after_main_moved(
        runs: Runs, monkeypatch: pytest.MonkeyPatch) -> None:
    failed = died_after_the_fast_forward(runs, monkeypatch)
    assert runs.lakehouse.get_table().rescale(3)  # main moves on (its rows as they were)
    ids = runs.main_ids()
    again = runs.from_failure(failed)
    assert again.success and _published(again)["note"] == "main held the batch already"
    assert runs.main_ids() == ids and runs.appends_of_lsm_write() == 1  # not published twice
    assert runs.main_equals_staged() and runs.pending() == 0
    assert wap.audit_branches(runs.lakehouse.get_table()) == []
