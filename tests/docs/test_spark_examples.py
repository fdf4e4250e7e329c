"""The Spark examples of docs/changelog.md and docs/deletion-vectors.md run as written, each page's
blocks in order after the blocks before them, on one Spark session (one file: one pytest worker)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.docs.doc_examples import blocks, run_page

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("page", ["changelog.md", "deletion-vectors.md"])
def test_the_spark_examples_run_as_written(tmp_path: Path, doc_spark: Any, page: str) -> None:
    assert any(b.uses_spark for b in blocks(page))
    assert run_page(page, tmp_path, spark=True) == len(blocks(page))
