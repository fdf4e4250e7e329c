"""Property, stricter than replaying to the table: whatever the interleaving of writers of the
same keys, compactions and deletes, the `lookup` and `full-compaction` changelogs hold Paimon's
before-images. Read in snapshot order, every `-U` and `-D` carries the key's row as the changes
before it left it, a `+U` follows its key's `-U` in the same snapshot, a `+I` is for an absent key (a changelog computed
against a stale base would break one of these), and `row-deduplicate` leaves no pair unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.lakehouse_engine.read import test_changes_property as replayed
from tests.lakehouse_engine.test_same_keys_property import MODES, actions

STRICT = {
    "lookup": {**MODES["fixed"], "changelog-producer": "lookup"},
    "lookup-dedupe": {**MODES["fixed"], "changelog-producer": "lookup",
                      "changelog-producer.row-deduplicate": "true"},
    "lookup-dynamic": {**MODES["dynamic"], "changelog-producer": "lookup"},
    "lookup-dv": {**MODES["fixed"], "changelog-producer": "lookup", "deletion-vectors.enabled": "true"},
    "full-compaction": {**MODES["fixed"], "changelog-producer": "full-compaction"},
}


def _strict_replay(table: Any) -> dict[int, int]:
    dedupe = table.options.raw.get("changelog-producer.row-deduplicate") == "true"
    state: dict[int, int] = {}
    changes = table.changes(0)
    # Per key, its -U read and not yet followed by its +U. A key's -U and +U need not be
    # adjacent (a snapshot lists a bucket's before-images, then its after-images, as Paimon's
    # rolling changelog writer may split a pair across files), but they are in order and in
    # one snapshot, with no other change of the key between them.
    pending: dict[int, int] = {}
    snapshot = None
    for sid, kind, k, v in zip(*(changes.column(c).to_pylist() for c in ("_snapshot_id", "_row_kind", "id", "v")),
                               strict=True):
        if sid != snapshot:
            assert not pending, f"snapshot {snapshot}: the -U of keys {sorted(pending)} has no +U"
            snapshot = sid
        where = f"snapshot {sid}: {kind} of key {k} = {v}"
        if kind == "+U":
            assert k in pending, f"{where} follows no -U of its key"
            assert not (dedupe and pending[k] == v), f"{where}: an unchanged pair under row-deduplicate"
            del pending[k]
        else:
            assert k not in pending, f"{where}: the -U before it has no +U"
        if kind in ("-U", "-D"):
            assert k in state and state[k] == v, f"{where}, but the key's row was {state.get(k)}"
            del state[k]
        elif kind == "+I":
            assert k not in state, f"{where}, but the key holds {state[k]}"
        if kind in ("+I", "+U"):
            state[k] = v
        if kind == "-U":
            pending[k] = v
    assert not pending, f"snapshot {snapshot}: the -U of keys {sorted(pending)} has no +U"
    return state


@pytest.mark.parametrize("mode", list(STRICT))
def test_each_before_image_is_the_row_the_changes_before_it_left(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replayed, "_replay", _strict_replay)

    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(script=actions)
    def check(script: list[tuple[str, Any, Any]]) -> None:
        replayed._run(STRICT[mode], script)

    check()
