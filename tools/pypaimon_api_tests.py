"""Run pypaimon 2.1.0's own tests of its public batch API on pypaimon and on this engine, and say
what share of the tests that pass on pypaimon pass on ours.

pypaimon's tests are not in its wheel or sdist; they live in apache/paimon under
`paimon-python/pypaimon/tests/`. This script takes them from a git checkout of apache/paimon
(`--paimon-git DIR`, a ref with `--ref`) or from a directory holding the `tests` folder
(`--tests-dir DIR`), copies the chosen files into a scratch directory, and runs them twice with
pytest: once under `.venv-interop` against the installed pypaimon 2.1.0, once under `.venv` against
`tools/pypaimon_shim.py`, a `pypaimon` package made only of our names. Nothing of pypaimon's is kept.

    .venv/bin/python -m tools.pypaimon_api_tests --paimon-git /path/to/paimon [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS_IN_REPO = "paimon-python/pypaimon/tests"

#: pypaimon's tests of its public batch API, by the area the issue names.
TEST_FILES: dict[str, list[str]] = {
    "catalog": ["filesystem_catalog_test.py", "identifier_test.py"],
    "tags": ["filesystem_catalog_tag_test.py"],
    "predicates": ["predicates_test.py", "reader_predicate_test.py"],
    "reads": ["reader_append_only_test.py", "reader_primary_key_test.py", "reader_parallel_test.py",
              "reader_split_generator_test.py", "pushdown_bucket_test.py"],
    "writes": ["write/table_write_test.py"],
    "merge engines": ["test_partial_update_e2e.py", "test_aggregation_e2e.py", "test_first_row_e2e.py",
                      "test_sequence_field_read.py"],
    "types": ["nested_type_read_write_test.py", "data_types_test.py"],
}

# pytest, its pure-Python dependencies and parameterized (pypaimon's tests use it), lent from .venv to .venv-interop (which has no pytest).
_PYTEST_PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig", "pygments", "py.py", "parameterized")

_SHIM_INIT = """import sys
sys.path.insert(0, {root!r})
from tools.pypaimon_shim import install
install(sys.modules[__name__])
"""


def extract_tests(paimon_git: Path | None, ref: str, tests_dir: Path | None, dest: Path) -> Path:
    """Put pypaimon's `tests` package at `dest/pypaimon/tests` and return that directory."""
    target = dest / "pypaimon" / "tests"
    if tests_dir is not None:
        shutil.copytree(tests_dir, target)
        return target
    assert paimon_git is not None
    archive = subprocess.run(["git", "--git-dir", str(paimon_git), "archive", ref, TESTS_IN_REPO],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(dest / "src", filter="data")
    shutil.copytree(dest / "src" / TESTS_IN_REPO, target)
    return target


def _site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python*/site-packages"))


def _lend_pytest(dest: Path) -> Path:
    lent = dest / "lent-pytest"
    lent.mkdir()
    site = _site_packages(ROOT / ".venv")
    for name in _PYTEST_PACKAGES:
        if (site / name).exists():
            (lent / name).symlink_to(site / name)
    return lent


def run(engine: str, workdir: Path, files: list[str]) -> dict[str, str]:
    """Run `files` under one engine ("pypaimon" or "ours"); return {test id: outcome}."""
    package = workdir / "pypaimon"
    init = package / "__init__.py"
    env = dict(os.environ, PYTHONHASHSEED="0")
    if engine == "ours":
        init.write_text(_SHIM_INIT.format(root=str(ROOT)))
        python = ROOT / ".venv" / "bin" / "python"
        env["PYTHONPATH"] = str(ROOT)
    else:
        # The real package, its `__path__` extended so that `pypaimon.tests` is the scratch copy.
        real = _site_packages(ROOT / ".venv-interop") / "pypaimon"
        init.write_text(f"__path__.insert(0, {str(real)!r})\n"
                        f"exec(compile(open({str(real / '__init__.py')!r}).read(), __file__, 'exec'))\n")
        python = ROOT / ".venv-interop" / "bin" / "python"
        env["PYTHONPATH"] = str(_lend_pytest(workdir))
    report = workdir / f"{engine}.xml"
    subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                    "--continue-on-collection-errors",
                    f"--junitxml={report}",
                    "--rootdir", str(workdir), *[f"pypaimon/tests/{f}" for f in files]],
                   cwd=workdir, env=env, capture_output=True, check=False)
    return outcomes(report)


def outcomes(report: Path) -> dict[str, str]:
    """{test id: passed / failed / skipped} from a junit report."""
    result: dict[str, str] = {}
    if not report.exists():
        return result
    for case in ET.parse(report).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        tags = {child.tag for child in case}
        result[test_id] = ("failed" if tags & {"failure", "error"}
                           else "skipped" if "skipped" in tags else "passed")
    return result


# A failure that comes from reaching into pypaimon's insides: a name the shim does not re-export
# (file scanners, row serializers, writers) used, or used as a class or a value (`_Missing`); a
# private attribute of ours; or the plumbing issue 31 names as not the target: `TableScan.file_scanner`,
# row key extractors, the commit's `file_store_commit`, row-at-a-time `write_row` and
# `Predicate.test` on pypaimon's row objects.
_INTERNAL_RE = re.compile(
    r"PypaimonInternalError|has no attribute '_|does not have the attribute '_|'_Missing'"
    r"|isinstance\(\) arg 2 must be a type|no attribute '(file_scanner|create_row_key_extractor"
    r"|file_store_commit|write_row)'|'Predicate' object has no attribute 'test'")


# A test that asserts one of pypaimon's own limitations: it expects pypaimon's NotImplementedError
# for a feature this engine implements as Paimon (Java) does (partial-update with aggregate
# functions, `ignore-delete`, sequence groups, `target-file-row-num`, ...).
_LIMITATION_RE = re.compile(r"NotImplementedError not raised")


def internal_failures(workdir: Path, pattern: re.Pattern[str] = _INTERNAL_RE) -> set[str]:
    """Tests whose failure on our engine is pypaimon's internals, not its public API (or, with
    `_LIMITATION_RE`, that assert a limitation of pypaimon's)."""
    out: set[str] = set()
    report = workdir / "ours.xml"
    if report.exists():
        for case in ET.parse(report).getroot().iter("testcase"):
            for child in case:
                if child.tag in ("failure", "error") and pattern.search(child.get("message") or ""):
                    out.add(f"{case.get('classname')}::{case.get('name')}")
    return out


def first_errors(workdir: Path) -> Counter[str]:
    """The first line of each failure on our engine, counted (what to fix first)."""
    counts: Counter[str] = Counter()
    report = workdir / "ours.xml"
    if report.exists():
        for case in ET.parse(report).getroot().iter("testcase"):
            for child in case:
                if child.tag in ("failure", "error"):
                    counts[(child.get("message") or "").splitlines()[0][:160] if child.get("message") else "?"] += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--paimon-git", type=Path, help="git directory of an apache/paimon clone")
    source.add_argument("--tests-dir", type=Path, help="a copy of paimon-python/pypaimon/tests")
    parser.add_argument("--ref", default="HEAD", help="commit of apache/paimon to take the tests from")
    parser.add_argument("--json", type=Path, help="write every test's two outcomes here")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--area", action="append", help="only these areas (default: all)")
    args = parser.parse_args(argv)

    areas = {a: fs for a, fs in TEST_FILES.items() if not args.area or a in args.area}
    files = [f for fs in areas.values() for f in fs]
    workdir = Path(tempfile.mkdtemp(prefix="pypaimon-api-tests-"))
    try:
        extract_tests(args.paimon_git, args.ref, args.tests_dir, workdir)
        theirs = run("pypaimon", workdir, files)
        ours = run("ours", workdir, files)
        baseline = sorted(t for t, o in theirs.items() if o == "passed")
        passed = [t for t in baseline if ours.get(t) == "passed"]
        print(f"{'area':<16}{'pypaimon passes':>16}{'ours passes':>13}")
        for area, fs in areas.items():
            mods = tuple("pypaimon.tests." + f[:-3].replace("/", ".") for f in fs)
            base = [t for t in baseline if t.startswith(mods)]
            print(f"{area:<16}{len(base):>16}{sum(ours.get(t) == 'passed' for t in base):>13}")
        share = len(passed) / len(baseline) if baseline else 0.0
        print(f"{'total':<16}{len(baseline):>16}{len(passed):>13}   {share:.0%}")
        internal = internal_failures(workdir)
        public = [t for t in baseline if t not in internal]
        public_passed = [t for t in passed if t not in internal]
        public_share = len(public_passed) / len(public) if public else 0.0
        print(f"{'public API':<16}{len(public):>16}{len(public_passed):>13}   {public_share:.0%}"
              f"   (without the {len(baseline) - len(public)} tests that reach into pypaimon's internals)")
        limits = internal_failures(workdir, _LIMITATION_RE)
        usable = [t for t in public if t not in limits]
        usable_passed = [t for t in public_passed if t not in limits]
        print(f"{'  and features':<16}{len(usable):>16}{len(usable_passed):>13}   "
              f"{len(usable_passed) / len(usable) if usable else 0.0:.0%}"
              f"   (also without the {len(public) - len(usable)} that assert a feature pypaimon lacks)")
        print("\nfirst errors on ours:")
        for message, count in first_errors(workdir).most_common(40):
            print(f"{count:5}  {message}")
        if args.json:
            args.json.write_text(json.dumps({t: [theirs.get(t), ours.get(t)] for t in sorted(theirs)}, indent=1))
    finally:
        if args.keep:
            print(f"scratch directory kept: {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
