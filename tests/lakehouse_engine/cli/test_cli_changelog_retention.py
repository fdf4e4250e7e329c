"""`lakehouse expire-changelogs` expires long-lived changelogs past the table's `changelog.*`
retention, as the table's own `expire_changelogs()` does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.cli.app import main
from tests.lakehouse_engine.read.changes_helpers import keyed_table, put


def test_expire_changelogs_keeps_what_the_retention_keeps(catalog: Catalog, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    t = keyed_table(catalog, **{"changelog-producer": "input", "write-only": "true",
                                "snapshot.num-retained.min": "1", "changelog.num-retained.min": "1",
                                "changelog.num-retained.max": "3", "changelog.time-retained": "1 ms"})
    for i in range(6):
        put(t, (i, "v", "+I"))
    t.expire_snapshots(retain_max=1, older_than=2**62)
    assert len(list(Path(t.path, "changelog").glob("changelog-*"))) == 5
    root = str(tmp_path / "warehouse")
    assert main(["--json", "expire-changelogs", root, "db.t"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # All are older than changelog.time-retained, so only changelog.num-retained.min (1) holds
    # them, and the latest long-lived changelog always stays (Paimon's ExpireChangelogImpl).
    assert doc == {"table": "db.t", "expired": 4, "earliest_changelog_id": 5, "latest_changelog_id": 5}
    assert main(["expire-changelogs", root, "db.t"]) == 0
    assert "expired 0 long-lived changelogs of db.t; changelog 5 remains" in capsys.readouterr().out
