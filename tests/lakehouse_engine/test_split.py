"""Split generation: interval partition of key ranges and ordered packing by weight."""

from __future__ import annotations

from lakehouse_engine.format.binary_row import serialize_row
from lakehouse_engine.format.manifest_entries import DataFileMeta, SimpleStats
from lakehouse_engine.read.split import interval_partition, ordered_pack
from lakehouse_engine.types import DataType

BIGINT = [DataType("BIGINT", False)]


def file(name: str, lo: int, hi: int) -> DataFileMeta:
    return DataFileMeta(name, 100, 10, serialize_row([lo], BIGINT), serialize_row([hi], BIGINT),
                        SimpleStats.EMPTY, SimpleStats.EMPTY, 0, 0, 0, 0)


def key(binary: bytes) -> tuple[int, ...]:
    from lakehouse_engine.format.binary_row import deserialize_row

    return tuple(deserialize_row(binary, BIGINT))  # type: ignore[arg-type]


def names(sections: list[list[DataFileMeta]]) -> list[list[str]]:
    return [[f.file_name for f in s] for s in sections]


def test_overlapping_files_share_a_section_and_disjoint_ones_do_not() -> None:
    files = [file("c", 50, 60), file("a", 0, 10), file("b", 5, 20), file("d", 61, 70), file("e", 20, 30)]
    assert names(interval_partition(files, key)) == [["a", "b", "e"], ["c"], ["d"]]


def test_a_file_touching_the_bound_overlaps() -> None:
    assert names(interval_partition([file("a", 0, 10), file("b", 10, 12)], key)) == [["a", "b"]]


def test_ordered_pack_keeps_order_and_target() -> None:
    assert ordered_pack([4, 4, 4, 10, 1, 1], 8) == [[0, 1], [2], [3], [4, 5]]
    assert ordered_pack([], 8) == []
