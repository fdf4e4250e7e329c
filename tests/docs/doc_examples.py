"""Run a documentation page's examples as written: its ```python blocks in order in one namespace,
each block's printed output checked against its `# prints:` comment, and its ```console blocks'
`$ lakehouse ...` commands checked against the output the page shows under them."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SPARK_IMPORT = "lakehouse_engine.spark"


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: its language and text, and the line it starts on."""

    language: str
    text: str
    line: int

    @property
    def uses_spark(self) -> bool:
        return SPARK_IMPORT in self.text


def blocks(page: str) -> list[Block]:
    """The ```python and ```console blocks of docs/<page>, in page order."""
    text = (REPO / "docs" / page).read_text()
    found = []
    for m in re.finditer(r"^```(python|console)\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE):
        found.append(Block(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1))
    return found


def expected_prints(code: str) -> str:
    """What a block says it prints: the comment lines after each `# prints:` line, unindented by
    their `# ` (a block with no `# prints:` prints nothing checked)."""
    out: list[str] = []
    taking = False
    for line in code.splitlines():
        stripped = line.strip()
        if stripped == "# prints:":
            taking = True
            continue
        if taking and stripped.startswith("#"):
            out.append(stripped[2:] if stripped.startswith("# ") else "")
            continue
        taking = False
    return "\n".join(out)


@contextlib.contextmanager
def in_directory(path: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def run_python(block: Block, namespace: dict[str, object], page: str) -> None:
    """Execute one block in `namespace`; AssertionError when what it prints is not what it says."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        exec(compile(block.text, f"docs/{page}:{block.line}", "exec"), namespace)  # noqa: S102 - the doc's own code
    want = expected_prints(block.text)
    if want:
        got = "\n".join(line.rstrip() for line in buffer.getvalue().rstrip("\n").splitlines())
        assert got == want, f"docs/{page} line {block.line} printed:\n{got}\nbut says:\n{want}"


def console_commands(block: Block) -> list[tuple[list[str], str]]:
    """Each `$ lakehouse ...` line of a console block with the output the page shows under it."""
    commands: list[tuple[list[str], str]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            argv = shlex.split(line[2:], comments=True)
            assert argv[0] == "lakehouse", f"only lakehouse commands run here: {line}"
            commands.append((argv[1:], ""))
        elif commands:
            argv, out = commands[-1]
            commands[-1] = (argv, out + line.rstrip() + "\n")
    return commands


def run_console(block: Block, page: str) -> None:
    """Run each command of a console block through the CLI; its output must be what the page shows."""
    from lakehouse_engine.cli.app import main

    for argv, want in console_commands(block):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            code = main(argv)
        got = "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())
        assert code == 0, f"docs/{page} line {block.line}: lakehouse {' '.join(argv)} exited {code}"
        assert got.strip("\n") == want.strip("\n"), \
            f"docs/{page} line {block.line}: lakehouse {' '.join(argv)} printed:\n{got}\nbut the page shows:\n{want}"


def run_page(page: str, tmp_path: Path, spark: bool = False) -> int:
    """Run a page's examples in `tmp_path` (the relative `warehouse` of the examples lands there):
    the Spark blocks only when `spark`; returns how many blocks ran."""
    namespace: dict[str, object] = {"__name__": "__doc_example__"}
    ran = 0
    with in_directory(tmp_path):
        for block in blocks(page):
            if block.uses_spark and not spark:
                continue
            if block.language == "python":
                run_python(block, namespace, page)
            else:
                run_console(block, page)
            ran += 1
    return ran


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def broken_links(page: str) -> list[str]:
    """The links of docs/<page> to another page (or a heading of one) that does not exist."""
    text = (REPO / "docs" / page).read_text()
    broken = []
    for target, anchor in re.findall(r"\]\(([\w\-./]*\.md)?(?:#([\w\-]+))?\)", text):
        path = REPO / "docs" / (target or page)
        if not path.is_file():
            broken.append(f"{target}#{anchor}")
            continue
        if anchor:
            headings = re.findall(r"^#+ (.+)$", path.read_text(), flags=re.MULTILINE)
            if anchor not in {github_slug(h) for h in headings}:
                broken.append(f"{target or page}#{anchor}")
    return broken
