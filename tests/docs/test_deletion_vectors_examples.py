"""docs/deletion-vectors.md's examples run as written, in order, against a fresh warehouse: the
Python blocks (what each prints is what the page says); its Spark block runs in test_spark_examples.py."""

from __future__ import annotations

from pathlib import Path

from tests.docs.doc_examples import blocks, broken_links, run_page

PAGE = "deletion-vectors.md"


def test_the_page_has_python_and_spark_examples() -> None:
    found = blocks(PAGE)
    assert {b.language for b in found} == {"python"}
    assert any(b.uses_spark for b in found)


def test_the_python_examples_run_as_written(tmp_path: Path) -> None:
    ran = run_page(PAGE, tmp_path)
    assert ran == len([b for b in blocks(PAGE) if not b.uses_spark])
    assert any((tmp_path / "warehouse" / "shop.db" / "orders_dv" / "index").iterdir())



def test_every_link_of_the_page_reaches_a_page_and_heading() -> None:
    assert broken_links(PAGE) == []
