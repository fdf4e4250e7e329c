"""The README's Python snippet runs as written, twice (a re-run finds its table), in a fresh warehouse."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def python_blocks(markdown: str) -> list[str]:
    """The ```python fenced blocks of a markdown text."""
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.DOTALL)


def test_the_readme_snippet_runs_as_written_twice(tmp_path: Path) -> None:
    [snippet] = python_blocks((REPO / "README.md").read_text())
    script = tmp_path / "readme_snippet.py"
    script.write_text(snippet)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for attempt in (1, 2):
        proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"run {attempt}: {proc.stderr[-2000:]}"
        assert proc.stdout.strip() == "[{'order_id': 2, 'amount': Decimal('20.00')}]"
    assert (tmp_path / "warehouse" / "shop.db" / "readme_orders").is_dir()


def test_getting_started_first_table_runs_after_make_run_without_touching_its_table(tmp_path: Path) -> None:
    from lakehouse_engine import Catalog
    from pipelines.lib.resources import LakehouseResource

    # What `make run` leaves behind: shop.orders in ./warehouse (created, no data needed here).
    made = LakehouseResource(warehouse=str(tmp_path / "warehouse")).get_or_create_table()
    [snippet] = python_blocks((REPO / "docs" / "getting-started.md").read_text())
    (tmp_path / "first_table.py").write_text(snippet)
    proc = subprocess.run([sys.executable, "first_table.py"], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    catalog = Catalog(str(tmp_path / "warehouse"))
    assert catalog.get_table("shop.orders").schema.field_names == made.schema.field_names
    assert catalog.get_table("shop.orders").latest_snapshot() is None
    first = catalog.get_table("shop.first_orders")
    rb = first.new_read_builder()
    assert rb.new_read().to_arrow(rb.new_scan().plan().splits()).num_rows == 3
