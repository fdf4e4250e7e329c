"""A bucket's index files rolled at `deletion-vector.index-file.target-size` as Paimon 0.9's
DeletionVectorIndexFileWriter rolls them: a vector goes into the current file, which closes once
its size is past (not at) the target."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.fs as pafs
import pytest

from lakehouse_engine.format.deletion_vectors import frame_vector
from lakehouse_engine.io import FileIO
from lakehouse_engine.mergetree.deletion_vector_files import write_deletion_vector_files

VECTORS = {"data-a": np.array([1, 5], np.uint32), "data-b": np.array([2], np.uint32),
           "data-c": np.array([0, 3, 9], np.uint32), "data-d": np.array([], np.uint32)}


def _files(tmp_path: Path, target: int) -> list[list[str]]:
    names = iter(f"index-{i}" for i in range(10))
    entries = write_deletion_vector_files(FileIO(pafs.LocalFileSystem()), str(tmp_path), lambda: next(names), b"", 0,
                                          VECTORS, target)
    return [[r.data_file_name for r in e.dv_ranges or ()] for e in entries]


def _frame(name: str) -> int:
    return len(frame_vector(VECTORS[name]))


@pytest.mark.parametrize(("target", "expected"), [
    (1, [["data-a"], ["data-b"], ["data-c"]]),  # past the target after every vector
    (2 << 20, [["data-a", "data-b", "data-c"]]),  # Paimon's default: one file
])
def test_vectors_roll_into_the_next_file_once_one_is_past_the_target(tmp_path: Path, target: int,
                                                                     expected: list[list[str]]) -> None:
    assert _files(tmp_path, target) == expected


def test_a_file_exactly_at_the_target_takes_the_next_vector(tmp_path: Path) -> None:
    at = 1 + _frame("data-a")  # the version byte and the first vector
    assert _files(tmp_path, at) == [["data-a", "data-b"], ["data-c"]]
