"""The changelog the producers compute: full-compaction's per-key rule and input's order."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lakehouse_engine.mergetree.changelog import (
    full_compaction_changelog,
    input_changelog,
    lookup_changelog,
    newest_changelog,
)

KINDS = {0: "+I", 1: "-U", 2: "+U", 3: "-D"}


def _t(ids: list[int], vs: list[str | None], seqs: list[int], kinds: list[int]) -> pa.Table:
    return pa.table({"id": ids, "v": vs, "_SEQUENCE_NUMBER": pa.array(seqs, pa.int64()),
                     "_VALUE_KIND": pa.array(kinds, pa.int8())})


def _changes(t: pa.Table) -> list[tuple[str, int, str | None]]:
    return [(KINDS[r["_VALUE_KIND"]], r["id"], r["v"]) for r in t.to_pylist()]


# top level: 1=a, 2=b, 3=c, 6=f; above it: 1=a (same), 2=B, 4=d (new), 5 deleted (never existed), 3 deleted, 7 +I then -D
ROWS = _t([1, 2, 3, 6, 1, 2, 4, 5, 3, 7, 7], ["a", "b", "c", "f", "a", "B", "d", None, "c", "g", "g"],
          [1, 2, 3, 4, 10, 11, 12, 13, 14, 15, 16], [0, 0, 0, 0, 2, 2, 0, 3, 3, 0, 3])
AT_TOP = np.array([True] * 4 + [False] * 7)
MERGED = _t([1, 2, 3, 4, 5, 6, 7], ["a", "B", "c", "d", None, "f", "g"], [10, 11, 14, 12, 13, 4, 16],
            [2, 2, 3, 0, 3, 0, 3])


def test_full_compaction_changelog_follows_paimons_rule_per_touched_key() -> None:
    out = full_compaction_changelog(ROWS, AT_TOP, MERGED, ["id"], ["id", "v"], row_deduplicate=False)
    assert _changes(out) == [("-U", 1, "a"), ("+U", 1, "a"), ("-U", 2, "b"), ("+U", 2, "B"),
                             ("-D", 3, "c"), ("+I", 4, "d")]


def test_row_deduplicate_leaves_out_updates_that_change_nothing() -> None:
    out = full_compaction_changelog(ROWS, AT_TOP, MERGED, ["id"], ["id", "v"], row_deduplicate=True)
    assert _changes(out) == [("-U", 2, "b"), ("+U", 2, "B"), ("-D", 3, "c"), ("+I", 4, "d")]


def test_nothing_outside_the_top_level_means_no_changelog() -> None:
    top = ROWS.slice(0, 4)
    assert full_compaction_changelog(top, np.ones(4, bool), MERGED.slice(0, 3), ["id"], ["id", "v"], False).num_rows == 0


def test_input_changelog_sorts_by_key_keeping_each_keys_input_order() -> None:
    rows = _t([2, 1, 2, 1], ["x", "y", "z", "w"], [1, 2, 3, 4], [0, 0, 1, 3])
    assert _changes(input_changelog(rows, ["id"])) == [("+I", 1, "y"), ("-D", 1, "w"), ("+I", 2, "x"),
                                                       ("-U", 2, "z")]


def _dedupe_merge(t: pa.Table) -> pa.Table:
    from lakehouse_engine.mergetree.merge import merge_records

    return merge_records(t, ["id"])


def test_lookup_changelog_compares_each_new_key_with_its_live_old_row() -> None:
    from lakehouse_engine.mergetree.changelog import lookup_changelog

    old = _t([1, 2, 3, 3, 4], ["a", "b", "c", "c", "d"], [1, 2, 3, 4, 5], [0, 0, 0, 3, 0])  # 3 deleted since
    new = _t([1, 2, 3, 4, 5, 6], ["a", "B", "C", None, "e", None], [10, 11, 12, 13, 14, 15], [0, 0, 0, 3, 0, 3])
    out = lookup_changelog(new, old, ["id"], _dedupe_merge, ["id", "v"], row_deduplicate=True)
    # 1 unchanged (deduplicated), 2 updated, 3 was gone: new, 4 deleted, 5 new, 6: delete of an absent key
    assert _changes(out) == [("-U", 2, "b"), ("+U", 2, "B"), ("+I", 3, "C"), ("-D", 4, "d"), ("+I", 5, "e")]
    first = lookup_changelog(new, old, ["id"], _dedupe_merge, ["id", "v"], row_deduplicate=False, first_row=True)
    assert _changes(first) == [("+I", 3, "C"), ("+I", 5, "e")]


def _dedupe_merge(rows: pa.Table) -> pa.Table:
    """Deduplicate: per key the record with the highest sequence number, retractions kept."""
    order = pc.sort_indices(rows, [("id", "ascending"), ("_SEQUENCE_NUMBER", "descending")]).to_numpy()
    s = rows.take(pa.array(order))
    ids = s.column("id").to_numpy()
    first = np.ones(len(ids), bool)
    first[1:] = ids[1:] != ids[:-1]
    return s.filter(pa.array(first))


@pytest.mark.parametrize("dedupe", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_newest_changelog_is_the_lookup_changelog_without_a_merge(dedupe: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    # Old: one newest record per key (some retractions); new: one record per key, sorted.
    old_ids = np.sort(rng.choice(60, 30, replace=False))
    new_ids = np.sort(rng.choice(60, 30, replace=False))
    values = ["a", "b", None]
    old = _t(old_ids.tolist(), [values[i] for i in rng.integers(0, 3, 30)], list(range(30)),
             rng.choice([0, 2, 3, 1], 30, p=[0.5, 0.2, 0.2, 0.1]).tolist())
    new = _t(new_ids.tolist(), [values[i] for i in rng.integers(0, 3, 30)], list(range(100, 130)),
             rng.choice([0, 2, 3, 1], 30, p=[0.5, 0.2, 0.2, 0.1]).tolist())
    # What the lookup gives: the old record of each key of `new` that has one.
    where = {k: i for i, k in enumerate(old_ids.tolist())}
    key_index = np.array([i for i, k in enumerate(new_ids.tolist()) if k in where], np.int64)
    old_rows = old.take(pa.array([where[k] for k in new_ids[key_index].tolist()], pa.int64()))
    got = newest_changelog(new, key_index, old_rows, ["id", "v"], dedupe)
    want = lookup_changelog(new, old_rows, ["id"], _dedupe_merge, ["id", "v"], dedupe)
    assert got.to_pylist() == want.to_pylist()
    assert got.num_rows > 0
