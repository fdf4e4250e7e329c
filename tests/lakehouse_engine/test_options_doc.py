"""The option reference: docs/options.md is what `options_doc` renders from OPTIONS, group by group."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from lakehouse_engine.options import OPTIONS
from tools.options_doc import REGENERATE, format_default, option_groups, render

DOC = Path(__file__).resolve().parents[2] / "docs" / "options.md"


def test_docs_options_md_is_up_to_date() -> None:
    current = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
    assert current == render(), (
        f"{DOC} is out of date with lakehouse_engine/options.py; regenerate it with: "
        f"cd {DOC.parents[1]} && .venv/bin/{REGENERATE}")


def test_every_option_is_documented_once_under_its_module_group() -> None:
    groups = option_groups()
    documented = [o.key for _, members in groups for o in members]
    assert sorted(documented) == sorted(OPTIONS)
    by_key = {o.key: title for title, members in groups for o in members}
    assert by_key["bucket"] == "Distribution"
    assert by_key["file.compression"] == "Files"
    assert by_key["snapshot.num-retained.min"] == "Snapshots and commits"


def test_groups_come_from_the_declarations_and_options_without_one_go_last() -> None:
    ungrouped = replace(OPTIONS["bucket"], key="z.key", group="")
    options = {"z.key": ungrouped, "a.key": OPTIONS["source.split.target-size"], "bucket": OPTIONS["bucket"]}
    assert OPTIONS["source.split.target-size"].group == "Reading"
    assert [(title, [o.key for o in members]) for title, members in option_groups(options)] == [
        ("Reading", ["source.split.target-size"]), ("Distribution", ["bucket"]), ("Other", ["z.key"])]


def test_defaults_are_written_in_the_options_own_units() -> None:
    assert format_default(OPTIONS["write-buffer-size"]) == "`256 mb`"
    assert format_default(OPTIONS["snapshot.time-retained"]) == "`1 h`"
    assert format_default(OPTIONS["commit.max-retry-wait"]) == "`10 s`"
    assert format_default(OPTIONS["ignore-delete"]) == "`false`"
    assert format_default(OPTIONS["bucket-key"]) == "(none)"
