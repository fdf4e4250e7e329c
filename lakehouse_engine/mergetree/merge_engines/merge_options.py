"""The options of the partial-update and aggregation merge engines, parsed and validated.

Paimon spells them per field: `fields.<f>.aggregate-function`, `fields.<f>.ignore-retract`,
`fields.<f>.list-agg-delimiter`, `fields.<f1>,<f2>.sequence-group`, plus
`fields.default-aggregate-function` and the engine-wide `*.remove-record-on-*` switches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lakehouse_engine.errors import InvalidOptionError, UnsupportedError
from lakehouse_engine.options import (
    AGGREGATION_REMOVE_RECORD_ON_DELETE,
    FIELDS_DEFAULT_AGG_FUNC,
    IGNORE_DELETE,
    MERGE_ENGINE,
    PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE,
    PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP,
    CoreOptions,
)
from lakehouse_engine.types import (
    BIGINT,
    BOOLEAN,
    CHAR,
    DATE,
    DECIMAL,
    DOUBLE,
    FLOAT,
    INT,
    SMALLINT,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMP_LTZ,
    TINYINT,
    VARCHAR,
    DataType,
)

if TYPE_CHECKING:
    from lakehouse_engine.schema import TableSchema

PARTIAL_UPDATE = "partial-update"
AGGREGATION = "aggregation"

FIELDS_PREFIX = "fields."
AGGREGATE_FUNCTION_SUFFIX = ".aggregate-function"
IGNORE_RETRACT_SUFFIX = ".ignore-retract"
LIST_AGG_DELIMITER_SUFFIX = ".list-agg-delimiter"
DISTINCT_SUFFIX = ".distinct"
SEQUENCE_GROUP_SUFFIX = ".sequence-group"
# The engine-wide options are declared, typed, in `lakehouse_engine.options`; these are their keys.
DEFAULT_AGGREGATE_FUNCTION = FIELDS_DEFAULT_AGG_FUNC.key

SUM, PRODUCT, COUNT = "sum", "product", "count"
MAX, MIN = "max", "min"
LAST_VALUE, LAST_NON_NULL_VALUE = "last_value", "last_non_null_value"
FIRST_VALUE, FIRST_NON_NULL_VALUE = "first_value", "first_non_null_value"
LISTAGG, BOOL_AND, BOOL_OR = "listagg", "bool_and", "bool_or"

AGGREGATE_FUNCTIONS = (SUM, PRODUCT, COUNT, MAX, MIN, LAST_VALUE, LAST_NON_NULL_VALUE, FIRST_VALUE,
                       FIRST_NON_NULL_VALUE, LISTAGG, BOOL_AND, BOOL_OR)
# Paimon's older spelling of first_non_null_value.
_ALIASES = {"first_not_null_value": FIRST_NON_NULL_VALUE}
# Functions Paimon has that this engine does not implement (yet): reject them clearly.
_PAIMON_ONLY = frozenset({"collect", "merge_map", "merge_map_with_keytime", "nested_update",
                          "nested_partial_update", "hll_sketch", "theta_sketch", "rbm32", "rbm64",
                          "count_non_null", "avg", "primary_key"})
# Paimon's docs: only these take retractions (-U/-D); the others need `ignore-retract`.
RETRACTABLE = frozenset({SUM, PRODUCT, COUNT, LAST_VALUE, LAST_NON_NULL_VALUE})

_INTEGERS = frozenset({TINYINT, SMALLINT, INT, BIGINT})
_NUMERIC = _INTEGERS | {FLOAT, DOUBLE, DECIMAL}
_STRINGS = frozenset({STRING, VARCHAR, CHAR})
_TEMPORAL = frozenset({DATE, TIME, TIMESTAMP, TIMESTAMP_LTZ})
# Which type roots each function accepts (None: every type), as Paimon's docs list them.
_ACCEPTED_TYPES: dict[str, frozenset[str] | None] = {
    SUM: _NUMERIC, PRODUCT: _NUMERIC, COUNT: _INTEGERS,
    MAX: _NUMERIC | _STRINGS | _TEMPORAL, MIN: _NUMERIC | _STRINGS | _TEMPORAL,
    LISTAGG: _STRINGS, BOOL_AND: frozenset({BOOLEAN}), BOOL_OR: frozenset({BOOLEAN}),
    LAST_VALUE: None, LAST_NON_NULL_VALUE: None, FIRST_VALUE: None, FIRST_NON_NULL_VALUE: None,
}
# Types a sequence-group's sequence fields may have: those Paimon's record comparator orders
# (character strings by their UTF-8 bytes, as Java's BinaryString and Arrow's sort compare them).
_COMPARABLE_SEQUENCE_TYPES = _NUMERIC | _TEMPORAL | _STRINGS | {BOOLEAN}


@dataclass(frozen=True)
class FieldAggregate:
    """How one field aggregates: the function, whether it ignores retractions, listagg's delimiter."""

    function: str
    ignore_retract: bool = False
    delimiter: str = ","

    @property
    def retracts(self) -> bool:
        """Whether a retraction changes this field (else it is ignored or rejected)."""
        return not self.ignore_retract and self.function in RETRACTABLE


@dataclass(frozen=True)
class SequenceGroup:
    """`fields.<sequence fields>.sequence-group` = protected fields, updated only by newer records."""

    option: str
    sequence_fields: tuple[str, ...]
    fields: tuple[str, ...]
    removes_record: bool = False


@dataclass(frozen=True)
class MergeOptions:
    """The options of one table's merge engine, parsed from its raw option map."""

    engine: str
    explicit_functions: Mapping[str, str] = field(default_factory=dict)
    default_function: str | None = None
    ignore_retract: frozenset[str] = frozenset()
    delimiters: Mapping[str, str] = field(default_factory=dict)
    sequence_groups: tuple[SequenceGroup, ...] = ()
    ignore_delete: bool = False
    remove_record_on_delete: bool = False

    # ---- parsing ----------------------------------------------------------------------------
    @staticmethod
    def parse(raw: Mapping[str, str] | CoreOptions, engine: str) -> MergeOptions:
        """Parse the merge options of `raw` (a table's options); raises InvalidOptionError naming a
        malformed option."""
        options = raw if isinstance(raw, CoreOptions) else CoreOptions(raw)
        raw = options.raw
        functions: dict[str, str] = {}
        ignore_retract: set[str] = set()
        delimiters: dict[str, str] = {}
        groups: list[SequenceGroup] = []
        for key, value in raw.items():
            if not key.startswith(FIELDS_PREFIX) or key == DEFAULT_AGGREGATE_FUNCTION:
                continue
            if key.endswith(AGGREGATE_FUNCTION_SUFFIX):
                functions[_field_of(key, AGGREGATE_FUNCTION_SUFFIX)] = _function(key, value)
            elif key.endswith(IGNORE_RETRACT_SUFFIX):
                if _bool(key, value):
                    ignore_retract.add(_field_of(key, IGNORE_RETRACT_SUFFIX))
            elif key.endswith(LIST_AGG_DELIMITER_SUFFIX):
                delimiters[_field_of(key, LIST_AGG_DELIMITER_SUFFIX)] = value
            elif key.endswith(DISTINCT_SUFFIX):
                if _bool(key, value):
                    raise UnsupportedError(
                        f"option '{key}' = 'true' (distinct listagg/collect) is not supported by this "
                        f"engine yet; remove it")
            elif key.endswith(SEQUENCE_GROUP_SUFFIX):
                groups.append(SequenceGroup(key, _names(key, _field_of(key, SEQUENCE_GROUP_SUFFIX)),
                                            _names(key, value)))
        default = options.get(FIELDS_DEFAULT_AGG_FUNC)
        ignore_delete = options.require(IGNORE_DELETE)
        remove_option = (PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE if engine == PARTIAL_UPDATE
                         else AGGREGATION_REMOVE_RECORD_ON_DELETE)
        remove = options.require(remove_option)
        on_group = options.get(PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP)
        if engine == PARTIAL_UPDATE and on_group is not None:
            removing = set(_names(PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP.key, on_group))
            known = {f for g in groups for f in g.sequence_fields}
            unknown = sorted(removing - known)
            if unknown:
                raise InvalidOptionError(
                    f"option '{PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP.key}' names {unknown}, "
                    f"which are not sequence fields of any 'fields.<f>.sequence-group'")
            groups = [SequenceGroup(g.option, g.sequence_fields, g.fields,
                                    bool(removing & set(g.sequence_fields))) for g in groups]
        opts = MergeOptions(
            engine=engine,
            explicit_functions=functions,
            default_function=_function(DEFAULT_AGGREGATE_FUNCTION, default) if default else None,
            ignore_retract=frozenset(ignore_retract),
            delimiters=delimiters,
            sequence_groups=tuple(sorted(groups, key=lambda g: g.option)),
            ignore_delete=ignore_delete,
            remove_record_on_delete=remove,
        )
        opts._check_conflicts(raw)
        return opts

    def _check_conflicts(self, raw: Mapping[str, str]) -> None:
        """Option combinations Paimon refuses because their delete handling contradicts."""
        if self.engine == AGGREGATION:
            if self.sequence_groups:
                raise UnsupportedError(
                    f"option '{self.sequence_groups[0].option}': sequence groups of the aggregation "
                    f"merge engine are not supported by this engine yet")
            if self.remove_record_on_delete and self.ignore_retract:
                raise InvalidOptionError(
                    f"options '{AGGREGATION_REMOVE_RECORD_ON_DELETE.key}' and 'fields."
                    f"{sorted(self.ignore_retract)[0]}{IGNORE_RETRACT_SUFFIX}' conflict; set only one")
            return
        if self.engine != PARTIAL_UPDATE:
            return
        remove_on_group = PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP.key in raw
        for flag, present in ((PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE.key, self.remove_record_on_delete),
                              (PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP.key, remove_on_group)):
            if present and self.ignore_delete:
                raise InvalidOptionError(
                    f"options '{IGNORE_DELETE.key}' and '{flag}' conflict (one drops deletes, the "
                    f"other acts on them); set only one")
        if self.remove_record_on_delete and self.sequence_groups:
            raise InvalidOptionError(
                f"options '{PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE.key}' and "
                f"'{self.sequence_groups[0].option}' conflict; use "
                f"'{PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP.key}' with sequence groups")

    # ---- resolution -------------------------------------------------------------------------
    @property
    def handles_retractions(self) -> bool:
        """Partial-update only: whether -U/-D records have a meaning (else they are rejected)."""
        return self.ignore_delete or self.remove_record_on_delete or bool(self.sequence_groups)

    def option_of(self, name: str) -> str:
        """The option that sets the function of field `name` (for messages)."""
        if name in self.explicit_functions:
            return f"{FIELDS_PREFIX}{name}{AGGREGATE_FUNCTION_SUFFIX}"
        return DEFAULT_AGGREGATE_FUNCTION

    def aggregate_of(self, name: str, fallback: str | None) -> FieldAggregate | None:
        """The aggregate of a value field: its own function, else the default, else `fallback`."""
        function = self.explicit_functions.get(name) or self.default_function or fallback
        if function is None:
            return None
        return FieldAggregate(function, name in self.ignore_retract, self.delimiters.get(name, ","))

    def group_of(self, name: str) -> SequenceGroup | None:
        """The sequence group protecting field `name`, if any."""
        for g in self.sequence_groups:
            if name in g.fields:
                return g
        return None

    @property
    def group_sequence_fields(self) -> set[str]:
        return {f for g in self.sequence_groups for f in g.sequence_fields}

    def columns_needed(self, columns: Sequence[str]) -> list[str]:
        """`columns` plus the columns merging them needs: the sequence fields of their groups."""
        needed = list(columns)
        for g in self.sequence_groups:
            if g.removes_record or any(c in g.fields or c in g.sequence_fields for c in columns):
                needed.extend(f for f in g.sequence_fields if f not in needed)
        return needed


# ---- validation at table creation ---------------------------------------------------------------
def validate_merge_options(schema: TableSchema) -> None:
    """Check the merge-engine options of `schema` against its fields.

    Raises:
        InvalidOptionError: naming the option, for an unknown aggregate function or field, an
            aggregate on a primary-key field, a function that does not take the field's type,
            a sequence group naming unknown or key fields, or contradicting delete options.
        UnsupportedError: for Paimon features this engine does not implement.
    """
    engine = schema.core_options.require(MERGE_ENGINE)
    if not schema.primary_keys or engine not in (PARTIAL_UPDATE, AGGREGATION):
        return
    raw = schema.core_options.raw
    opts = MergeOptions.parse(schema.core_options, engine)
    types = {f.name: f.type for f in schema.fields}
    keys = set(schema.primary_keys)
    _check_field_options(raw, types)
    for name in opts.explicit_functions:
        if name in keys:
            raise InvalidOptionError(
                f"option '{FIELDS_PREFIX}{name}{AGGREGATE_FUNCTION_SUFFIX}': '{name}' is a primary "
                f"key field, which is never aggregated; remove the option")
    sequence_fields = set(schema.core_options.sequence_fields)
    if engine == AGGREGATION:
        for name in opts.explicit_functions:
            if name in sequence_fields:
                raise InvalidOptionError(
                    f"option '{FIELDS_PREFIX}{name}{AGGREGATE_FUNCTION_SUFFIX}': '{name}' is the "
                    f"'sequence.field', which keeps the latest value and is never aggregated")
        for name, t in types.items():
            if name not in keys and name not in sequence_fields:
                agg = opts.aggregate_of(name, LAST_NON_NULL_VALUE)
                assert agg is not None
                _check_type(opts.option_of(name), name, agg.function, t)
        return
    _validate_sequence_groups(opts, types, keys)
    group_sequence = opts.group_sequence_fields
    for name, t in types.items():
        if name in keys or name in group_sequence:
            if name in group_sequence and name in opts.explicit_functions:
                raise InvalidOptionError(
                    f"option '{FIELDS_PREFIX}{name}{AGGREGATE_FUNCTION_SUFFIX}': '{name}' is a "
                    f"sequence field of a sequence group and is never aggregated")
            continue
        agg = opts.aggregate_of(name, None)
        if agg is None:
            continue
        _check_type(opts.option_of(name), name, agg.function, t)
        if agg.function != LAST_NON_NULL_VALUE and opts.group_of(name) is None:
            raise InvalidOptionError(
                f"option '{opts.option_of(name)}': field '{name}' is not in any "
                f"'fields.<f>.sequence-group'; a partial-update table aggregates only fields "
                f"protected by a sequence group (except with last_non_null_value)")


def _validate_sequence_groups(opts: MergeOptions, types: Mapping[str, DataType], keys: set[str]) -> None:
    protected: dict[str, str] = {}
    sequence_owner: dict[str, str] = {}
    for g in opts.sequence_groups:
        for name in g.sequence_fields:
            if name not in types:
                raise InvalidOptionError(f"option '{g.option}' names unknown sequence field '{name}'")
            if types[name].root not in _COMPARABLE_SEQUENCE_TYPES:
                raise InvalidOptionError(
                    f"option '{g.option}': sequence field '{name}' has type {types[name]}, which "
                    f"cannot order records (use a numeric, string, boolean, date, time or timestamp field)")
            if name in sequence_owner:
                raise InvalidOptionError(
                    f"option '{g.option}': field '{name}' is already the sequence field of "
                    f"'{sequence_owner[name]}'")
            sequence_owner[name] = g.option
        for name in g.fields:
            if name not in types:
                raise InvalidOptionError(f"option '{g.option}' names unknown field '{name}'")
            if name in keys:
                raise InvalidOptionError(
                    f"option '{g.option}': '{name}' is a primary key field and cannot be in a "
                    f"sequence group")
            if name in protected:
                raise InvalidOptionError(
                    f"option '{g.option}': field '{name}' is already in '{protected[name]}'; a "
                    f"field belongs to one sequence group")
            protected[name] = g.option
    for name, option in protected.items():
        if name in sequence_owner and sequence_owner[name] != option:
            raise InvalidOptionError(
                f"option '{option}': field '{name}' is the sequence field of "
                f"'{sequence_owner[name]}' and cannot be protected by another group")


def _check_field_options(raw: Mapping[str, str], types: Mapping[str, DataType]) -> None:
    """Every per-field option must name a field of the table."""
    for key in raw:
        if not key.startswith(FIELDS_PREFIX):
            continue
        for suffix in (AGGREGATE_FUNCTION_SUFFIX, IGNORE_RETRACT_SUFFIX, LIST_AGG_DELIMITER_SUFFIX):
            if key.endswith(suffix) and key != DEFAULT_AGGREGATE_FUNCTION:
                name = _field_of(key, suffix)
                if name not in types:
                    raise InvalidOptionError(
                        f"option '{key}' names unknown field '{name}' (fields: {', '.join(types)})")


def _check_type(option: str, name: str, function: str, t: DataType) -> None:
    accepted = _ACCEPTED_TYPES[function]
    if accepted is not None and t.root not in accepted:
        raise InvalidOptionError(
            f"option '{option}': aggregate function '{function}' does not take field '{name}' of "
            f"type {t} (it takes {', '.join(sorted(accepted))})")


# ---- small parsers ------------------------------------------------------------------------------
def _field_of(key: str, suffix: str) -> str:
    return key[len(FIELDS_PREFIX):len(key) - len(suffix)]


def _names(key: str, text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(","))
    if not names or any(not n for n in names):
        raise InvalidOptionError(f"option '{key}' has an empty field name in {text!r}")
    return names


def _bool(key: str, text: str) -> bool:
    low = text.strip().lower()
    if low not in ("true", "false"):
        raise InvalidOptionError(f"option '{key}' has invalid value {text!r}: expected 'true' or 'false'")
    return low == "true"


def _function(key: str, text: str) -> str:
    name = _ALIASES.get(text.strip(), text.strip())
    if name in AGGREGATE_FUNCTIONS:
        return name
    if name in _PAIMON_ONLY:
        raise UnsupportedError(
            f"option '{key}': aggregate function '{name}' is not supported by this engine yet "
            f"(supported: {', '.join(AGGREGATE_FUNCTIONS)})")
    raise InvalidOptionError(
        f"option '{key}' names unknown aggregate function {text!r} "
        f"(one of {', '.join(AGGREGATE_FUNCTIONS)})")
