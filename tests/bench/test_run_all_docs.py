"""`make bench` rewrites the Spark table inside docs/spark.md between two markers."""

from __future__ import annotations

from typing import Any

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


def test_foundation_targets_name_each_step_and_verdict() -> None:
    from bench.run_all import PYARROW_LABEL, RUST_LABEL, foundation_targets

    ours = {"write_s": 0.5, "upsert_s": 0.1, "read_s": 0.1}
    results = {"lakehouse_engine": ours,
               RUST_LABEL: {"write_s": 1.0, "upsert_s": 0.15, "read_s": 0.3},
               PYARROW_LABEL: {"write_s": 0.6, "upsert_s": 0.7, "read_s": 0.07}}
    text = foundation_targets(results)
    assert "2x faster than pypaimon + pypaimon-rust, every step (ours / theirs): write 0.50x (yes), " \
           "upsert 0.67x (no), read 0.33x (yes)." in text
    assert "within 1.2x of plain pyarrow, every step (ours / theirs): write 0.83x (yes), upsert 0.14x (yes), " \
           "read 1.43x (no)." in text
    assert foundation_targets({"lakehouse_engine": ours}) == ""


def test_hand_written_sections_of_the_output_survive_a_run(tmp_path: Any, monkeypatch: Any) -> None:
    from bench import run_all

    out = tmp_path / "benchmarks.md"
    out.write_text(f"# old generated text\n\n{run_all.KEPT_MARKER}\n\n## Object-store requests\n\nkept prose\n")
    monkeypatch.setattr(run_all, "describe_machine", lambda: {"cpu": "test"})
    assert run_all.main(["--only", "none", "--out", str(out)]) == 0
    text = out.read_text()
    assert "# old generated text" not in text and text.startswith("# Benchmarks")
    assert text.count(run_all.KEPT_MARKER) == 1 and text.endswith("## Object-store requests\n\nkept prose\n")
    assert run_all.main(["--only", "none", "--out", str(out)]) == 0
    assert out.read_text() == text  # a second run keeps them once


def test_a_section_runs_in_a_fresh_process_of_its_own_and_returns_its_result() -> None:
    import os

    from bench.run_all import in_own_process

    child = in_own_process("os:getpid")
    assert isinstance(child, int) and child != os.getpid()
    assert in_own_process("bench.run_all:replace_marked", text="a\n<s>\nold\n<e>\nb", replacement="new",
                          start="<s>", end="<e>") == "a\n<s>\nnew\n<e>\nb"
