"""Publishing an audit branch keeps main's tags: a fast-forward replaces main's tags from the
branch point on with the branch's (Paimon's semantics), so `wap.publish` carries them across.
Engine writes only, no Spark."""

from __future__ import annotations

from pathlib import Path

from pipelines.lib import wap
from pipelines.lib.events import EVENT_SCHEMA
from pipelines.lib.resources import LakehouseResource
from tests.lakehouse_engine.conftest import write
from tests.pipelines.conftest import engine_write, events


def test_publish_keeps_the_tags_main_holds_on_the_branch_point(tmp_path: Path) -> None:
    lakehouse = LakehouseResource(warehouse=str(tmp_path), bucket=2)
    rows = events(rows_per_day=200)
    first = engine_write(lakehouse, rows.slice(0, 100))
    main = lakehouse.get_table()
    main.create_tag("release", first)
    main.create_tag("kept-a-day", first, time_retained="1 d")

    branch = wap.open_audit_branch(main, "run-1")
    main.create_tag("made-during-the-audit", first)  # a tag made while the audit runs counts too
    written = write(branch, rows.slice(100).select(EVENT_SCHEMA.names))[-1]
    done = wap.publish(main, wap.audit_branch_name("run-1"))

    main = lakehouse.get_table()
    assert done.main_after == written and main.latest_snapshot().id == written  # type: ignore[union-attr]
    tags = main.tags()
    assert {name: tags[name].id for name in ("release", "kept-a-day", "made-during-the-audit")} == {
        "release": first, "kept-a-day": first, "made-during-the-audit": first}
    stored = main.tag_manager()
    assert stored.get("kept-a-day").extra["tagTimeRetained"] == 86400  # type: ignore[union-attr]
    assert "tagTimeRetained" not in stored.get("release").extra  # type: ignore[union-attr]
    assert wap.base_tag_name(wap.audit_branch_name("run-1")) not in tags
    assert wap.audit_branches(main) == []

