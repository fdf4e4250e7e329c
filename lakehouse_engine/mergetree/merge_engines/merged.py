"""What a merge engine computes for the key groups, before it becomes one record per key."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa


@dataclass
class MergedGroups:
    """The merge result of every key group.

    `values` holds one merged value per group for each value field; `kinds` the `_VALUE_KIND`
    of each result. A group whose result is one of its records unchanged (a lone record, as
    Paimon's ReducerMergeFunctionWrapper passes it through, or the record that removed the
    row) names that record's merge-order position in `verbatim` (-1: merged). A field in
    `counted` holds `count`s of written records: as is, a record holds its contribution (1 or 0).
    """

    values: dict[str, pa.Array]
    kinds: np.ndarray
    verbatim: np.ndarray
    counted: set[str] = field(default_factory=set)
