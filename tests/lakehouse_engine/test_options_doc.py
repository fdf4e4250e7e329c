"""The option reference: docs/options.md is what `options_doc` renders from OPTIONS, group by group."""

from __future__ import annotations

from pathlib import Path

from lakehouse_engine.options import OPTIONS
from lakehouse_engine.options_doc import REGENERATE, format_default, option_groups, render

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


def test_groups_come_from_section_comments_and_unknown_options_go_last() -> None:
    source = '# ---- reading ----\nA = _opt("a.key", "int", 1, "A.")\n'
    options = {"z.key": OPTIONS["bucket"], "a.key": OPTIONS["bucket"]}
    titles = [title for title, _ in option_groups(options, source)]
    assert titles == ["Reading", "Other"]


def test_defaults_are_written_in_the_options_own_units() -> None:
    assert format_default(OPTIONS["write-buffer-size"]) == "`256 mb`"
    assert format_default(OPTIONS["snapshot.time-retained"]) == "`1 h`"
    assert format_default(OPTIONS["commit.max-retry-wait"]) == "`10 s`"
    assert format_default(OPTIONS["ignore-delete"]) == "`false`"
    assert format_default(OPTIONS["bucket-key"]) == "(none)"
