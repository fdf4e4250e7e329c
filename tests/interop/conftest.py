"""Drive pypaimon 2.1.0 in its own virtual environment (it pins pyarrow<20), one subprocess a call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
INTEROP_PYTHON = Path(os.environ.get("LAKEHOUSE_INTEROP_PYTHON", ROOT / ".venv-interop" / "bin" / "python"))

PREAMBLE = """
import json, os, sys
import pyarrow as pa
import pypaimon
from pypaimon import CatalogFactory, Schema
ARGS = json.loads(sys.stdin.read())
def _leave():
    # Without the interpreter's teardown: twice in CI, after scripts that wrote postpone-bucket
    # tables, the C++ runtime aborted there ("terminate called without an active exception").
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
def emit(obj):  # the script's last statement
    sys.stdout.write("\\n@@RESULT@@" + json.dumps(obj, default=str))
    _leave()
"""


def run_pypaimon(code: str, **args: Any) -> Any:
    """Run `code` under pypaimon with `ARGS` = args; the code calls `emit(obj)` to return JSON."""
    if not INTEROP_PYTHON.exists():
        pytest.fail(f"{INTEROP_PYTHON} is missing: run `make .venv-interop` (make test builds it)")
    script = PREAMBLE + textwrap.dedent(code) + "\n_leave()\n"  # a script that emits nothing leaves so too
    proc = subprocess.run(
        [str(INTEROP_PYTHON), "-c", script],
        input=json.dumps(args),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise AssertionError(f"pypaimon subprocess failed:\n{proc.stderr[-4000:]}")
    out = proc.stdout
    marker = out.rfind("@@RESULT@@")
    return None if marker < 0 else json.loads(out[marker + len("@@RESULT@@"):])


@pytest.fixture(scope="session")
def pypaimon() -> Callable[..., Any]:
    """The `run_pypaimon` callable, for tests marked `interop`."""
    return run_pypaimon


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/interop" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.interop)


__all__ = ["run_pypaimon", "sys"]
