"""`make bench` rewrites the Spark table inside docs/spark.md between two markers."""

from __future__ import annotations

import pytest

from bench.run_all import SPARK_DOC, SPARK_TABLE_END, SPARK_TABLE_START, replace_marked


def test_replace_marked_swaps_only_the_marked_lines() -> None:
    text = f"intro\n{SPARK_TABLE_START}\nold table\n{SPARK_TABLE_END}\n\nprose after\n"
    out = replace_marked(text, "| new |\n")
    assert out == f"intro\n{SPARK_TABLE_START}\n| new |\n{SPARK_TABLE_END}\n\nprose after\n"
    assert replace_marked(out, "| newer |").count(SPARK_TABLE_START) == 1


def test_replace_marked_refuses_a_text_without_markers() -> None:
    with pytest.raises(ValueError, match="not found"):
        replace_marked("no markers here\n", "| t |")
    with pytest.raises(ValueError, match="not found"):
        replace_marked(f"{SPARK_TABLE_START}\nno end\n", "| t |")


def test_the_spark_page_carries_the_markers() -> None:
    text = SPARK_DOC.read_text()
    assert text.count(SPARK_TABLE_START) == 1 and text.count(SPARK_TABLE_END) == 1
    assert text.index(SPARK_TABLE_START) < text.index(SPARK_TABLE_END)
