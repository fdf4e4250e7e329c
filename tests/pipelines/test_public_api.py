"""The pipelines use only the engine's public API and Dagster's public API.

Public engine modules: `lakehouse_engine` (what its `__all__` exports), `lakehouse_engine.options`
and `lakehouse_engine.spark` (its `__all__`). Dagster's underscore modules (`dagster._core...`)
and private methods of dagster-pyspark change without notice between releases.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PIPELINES = Path(__file__).resolve().parents[2] / "pipelines"
PUBLIC_ENGINE_MODULES = {"lakehouse_engine", "lakehouse_engine.options", "lakehouse_engine.spark"}


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every import in a file; names empty for `import module`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names]
    return found


SOURCES = sorted(PIPELINES.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(PIPELINES)) for p in SOURCES])
def test_pipelines_import_only_public_engine_modules_and_names(path: Path) -> None:
    wrong = []
    for line, module, names in _imports(path):
        if module.split(".")[0] != "lakehouse_engine":
            continue
        if module not in PUBLIC_ENGINE_MODULES:
            wrong.append(f"{path.name}:{line}: {module} is not a public engine module")
            continue
        exported = getattr(importlib.import_module(module), "__all__", None)
        if exported is not None:
            wrong += [f"{path.name}:{line}: {module}.{n} is not exported (__all__)"
                      for n in names if n not in exported]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(PIPELINES)) for p in SOURCES])
def test_pipelines_import_no_private_dagster_module(path: Path) -> None:
    private = [f"{path.name}:{line}: {module}" for line, module, _ in _imports(path)
               if module.split(".")[0].startswith("dagster")
               and any(part.startswith("_") for part in module.split(".")[1:])]
    assert not private, "\n".join(private)


def test_the_checker_catches_an_internal_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from lakehouse_engine.write.commit_retry import snapshots_of_commit\n"
                   "from dagster._core.storage.tags import PARTITION_NAME_TAG\n")
    with pytest.raises(AssertionError, match="commit_retry is not a public"):
        test_pipelines_import_only_public_engine_modules_and_names(bad)
    with pytest.raises(AssertionError, match=r"dagster\._core"):
        test_pipelines_import_no_private_dagster_module(bad)
