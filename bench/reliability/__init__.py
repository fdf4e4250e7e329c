"""Reliability campaigns: adversarial runs against the engine, tallied into docs/reliability.md.

Each module `campaign_*.py` in this package defines `run(quick: bool) -> list[Outcome]`; `python -m
bench.reliability` (`make reliability`) runs them all and writes their table between the markers
in docs/reliability.md. A campaign counts what it tried and what went wrong: rows lost, rows
wrong (present but with another value, or present though deleted) and errors that did not name
what was wrong. The tests in `tests/` assert the same outcomes on smaller runs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Outcome:
    """What one kind of attack did: how often it was tried and what went wrong."""

    area: str  # "concurrency", "retry", "corruption", "faults", "bad input", ...
    tried: str  # what was done, in a sentence: processes, rounds, kills, faults, flips, inputs
    trials: int  # how many times (rounds, flips, inputs, ...)
    lost_rows: int = 0  # acknowledged rows a read did not return
    wrong_rows: int = 0  # rows returned with another value, or that should not be there
    unclear_errors: int = 0  # failures whose error did not name the file, table or input at fault
    result: str = ""  # what happened, in a few words ("CorruptFileError naming the file: 412")
