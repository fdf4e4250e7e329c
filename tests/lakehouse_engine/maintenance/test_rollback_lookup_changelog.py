"""A `lookup` table rolled back to an APPEND snapshot whose COMPACT (holding its changelog) is gone:
the level-0 rows of that APPEND still reach the changelog, when a later compaction takes them up
(Paimon's lookup changelog comes from that compaction)."""

from __future__ import annotations

from lakehouse_engine import Catalog
from tests.lakehouse_engine.conftest import read
from tests.lakehouse_engine.read.changes_helpers import change_tuples, keyed_table, put, replay


def test_the_changes_of_an_append_whose_compaction_was_rolled_back_are_not_lost(catalog: Catalog) -> None:
    t = keyed_table(catalog, **{"changelog-producer": "lookup", "bucket": "1"})
    put(t, *[(i, f"a{i}", "+I") for i in range(4)])       # 1 APPEND, 2 COMPACT
    put(t, *[(i, f"b{i}", "+I") for i in range(2, 6)])    # 3 APPEND, 4 COMPACT (the changelog)
    t.rollback_to(3)  # b's rows stay, in level 0; their changelog went with snapshot 4
    put(t, (9, "z", "+I"))  # its compaction takes b's level-0 file up
    changes = change_tuples(t, 0)
    assert replay(changes) == {r["id"]: r["v"] for r in read(t).to_pylist()}
    assert ("+U", 2, "b2") in [c[1:] for c in changes]
