"""BucketWriter: one (partition, bucket) of a TableWrite, as Paimon's MergeTreeWriter is one bucket
of its KeyValueFileStoreWrite: the bucket's buffered rows, their flush into level-0 sorted runs
(merged, with their changelog, looked up and cached as the table asks), the bucket's levels and the
compaction inside the writer, and the bucket's part of the commit message.

TableWrite routes rows to their bucket writers, counts the memory of all their buffers (it
chooses which buckets flush), flushes and compacts several buckets at once, and adds what the
table's bucket index contributes to each message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lakehouse_engine.errors import CommitConflictError, DataFileMissingError
from lakehouse_engine.format.manifest_entries import DataFileMeta, IndexManifestEntry
from lakehouse_engine.mergetree.changelog import input_changelog
from lakehouse_engine.mergetree.data_file import DataFileWriter
from lakehouse_engine.options import MERGE_ENGINE
from lakehouse_engine.partition import Partition
from lakehouse_engine.path_factory import POSTPONE_BUCKET
from lakehouse_engine.read.split import PartitionRow
from lakehouse_engine.schema import SEQUENCE_NUMBER, VALUE_KIND
from lakehouse_engine.write.bucket_levels import BucketLevels
from lakehouse_engine.write.bucket_router import RestoredState
from lakehouse_engine.write.commit_cycles import CommitCycles
from lakehouse_engine.write.commit_message import CommitMessage
from lakehouse_engine.write.deletion_vectors import DeletionVectorBase, DeletionVectorCompactor
from lakehouse_engine.write.flush_files import input_changelog_files, looked_up, write_and_look_up
from lakehouse_engine.write.level0_changelog import level0_changelog_of
from lakehouse_engine.write.write_roles import FlushLookup, OutputRole

if TYPE_CHECKING:
    from lakehouse_engine.mergetree.lookup_cache import CachedFileReader
    from lakehouse_engine.mergetree.merge import MergeFunction
    from lakehouse_engine.options import CoreOptions
    from lakehouse_engine.schema import TableSchema
    from lakehouse_engine.store.file_store import FileStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriteContext:
    """What the bucket writers of one TableWrite share: the table and commit user, what the files
    are to the commit, and how a flush merges its rows, makes changelog, looks up and caches its run."""

    table: FileStore
    commit_user: str
    role: OutputRole
    #: What the latest snapshot holds (read on first use, once per TableWrite).
    restored: Callable[[], RestoredState]
    merge_function: MergeFunction | None
    changelog_producer: str
    flush_lookup: FlushLookup | None
    key_names: list[str]
    target_file_size: int
    #: No compaction inside the writer (a DV table's compaction at commit aside).
    write_only: bool
    #: Paimon's `num-sorted-run.stop-trigger`: a bucket with this many sorted runs compacts at flush.
    stop_trigger: int
    #: Every this many commits, the compaction at commit is a full one (None: never).
    full_compaction_delta_commits: int | None
    deletion_vectors: bool
    #: A DV table's writer compacts each bucket's level 0 at commit (write/deletion_vectors.py).
    dv_compacts: bool
    #: The lookup cache the flush puts its runs in (a table whose commits look keys up).
    run_cache: CachedFileReader | None
    #: `changelog-producer` = lookup or `merge-engine` = first-row (not DV): the compaction at commit
    #: takes level 0 up (Paimon's ForceUpLevel0Compaction), as Paimon's readers of such tables skip
    #: level 0; a first-row table's drops the level-0 rows of keys already above (BucketCompactor).
    force_up_level0: bool = False
    #: What the latest snapshot holds now (read at most once per commit cycle): a stream writer's
    #: later lookups check their levels against it.
    current: Callable[[], RestoredState] | None = None
    #: A first-row table with `changelog-producer` = lookup whose writer takes level 0 up at every
    #: commit: the flush looks nothing up; the compaction that takes level 0 up writes the `+I`
    #: changelog of its new keys (`mergetree.compact.first_row_lookup.FirstRowChangelog`).
    first_row_changelog: bool = False
    #: The TableWrite's commit cycles: in a later one, the levels are checked against the table.
    cycles: CommitCycles | None = None
    #: A DV writer's flush lookup: what the latest snapshot holds at the cycle's first flush (its
    #: levels and the vectors the lookup applies come from there; `BucketLevels.levels`).
    flush_state: Callable[[], RestoredState] | None = None

    @property
    def schema(self) -> TableSchema:
        """The table's schema."""
        return self.table.schema

    @property
    def options(self) -> CoreOptions:
        """The table's options."""
        return self.table.schema.core_options

    @property
    def primary_key(self) -> bool:
        """Whether the table has a primary key."""
        return self.table.schema.has_primary_key


def _per_file(written: list[DataFileMeta], run: pa.Table) -> Iterator[tuple[DataFileMeta, pa.Table]]:
    """Each file of a written run with its slice of `run`'s rows (a run's files hold them in order)."""
    offset = 0
    for f in written:
        yield f, run.slice(offset, f.row_count)
        offset += f.row_count


class BucketWriter(BucketLevels):
    """Rows of one (partition, bucket) waiting to become a level-0 sorted run, and the files the
    bucket's flushes and compactions wrote since the last commit message."""

    def __init__(self, context: WriteContext, partition: Partition, bucket: int, total_buckets: int,
                 next_sequence: int):
        """A writer of `bucket` of `partition` (of `total_buckets`), numbering its rows from `next_sequence`."""
        super().__init__()
        self.context = context
        self.partition = partition
        self.bucket = bucket
        self.total_buckets = total_buckets
        self.next_sequence = next_sequence
        self._buffer: list[pa.Table] = []
        #: What the buffered rows take in memory (TableWrite flushes the largest buffers first).
        self.buffered_bytes = 0
        self.new_files: list[DataFileMeta] = []
        self.compact_before: list[DataFileMeta] = []
        self.compact_after: list[DataFileMeta] = []
        #: Index files the flush lookup made for this bucket since the last commit message.
        self.lookup_index_files: list[IndexManifestEntry] = []
        #: Changelog files of the new data (input producer) and of compaction (lookup, full-compaction).
        self.new_changelog: list[DataFileMeta] = []
        self.compact_changelog: list[DataFileMeta] = []
        #: The files of the bucket the first flush lookup since the last message compared rows with.
        self.lookup_base: list[str] | None = None
        self.lookup_snapshot: int | None = None
        #: Every file this writer handed out in a message (a stream writer's earlier commits): its
        #: levels hold what they left, so one its compactions removed again is no other writer's.
        self._handed_out: set[str] = set()
        #: A DV table's compaction at commit: new vector index files, and what they were computed against.
        self.deletion_vector_files: list[IndexManifestEntry] = []
        self.deletion_vector_base: tuple[list[str], list[str]] | None = None
        #: A first-row table's compactions since the last message: the bucket's files they saw.
        self.compact_base: set[str] | None = None
        #: A DV table's new level-0 files' keys, kept from the flush so its lookup need not read them.
        self.new_keys: dict[str, pa.Table] = {}
        #: Level-0 files this writer flushed whose `lookup` changelog their flush gave: the
        #: compaction taking them up gives that of the bucket's other level-0 files only.
        self.changelog_given: set[str] = set()
        #: The flush changelog of each of those runs (its files' names, its changelog files).
        self._run_changelog: list[tuple[frozenset[str], list[DataFileMeta]]] = []
        #: Written since this writer's last full compaction of it landed: the next commit that
        #: compacts fully takes it too, written in that commit or not (Paimon's
        #: GlobalFullCompactionSinkWrite; `write.full_compaction_cadence` clears it).
        self.awaits_full_compaction = False
        #: The identifier of the last commit that wrote the bucket, while it awaits a full compaction.
        self.written_at: int | None = None
        #: The identifier of the last commit whose compaction left the bucket fully compacted (its
        #: COMPACT snapshot landing clears the debt; one that skipped the bucket does not).
        self.full_compacted_at: int | None = None
        #: A first-row lookup-changelog writer: the first sequence number of the flushed rows whose
        #: changelog no compaction of this writer wrote yet (None: none waits).
        self.first_row_unlogged: int | None = None

    # ---- the write buffer ------------------------------------------------------------------
    def write(self, rows: pa.Table, kinds: np.ndarray) -> int:
        """Buffer `rows` with their row kinds (int8 `_VALUE_KIND` codes), numbered in arrival order;
        the bytes they now take in the buffer."""
        n = rows.num_rows
        seq = np.arange(self.next_sequence, self.next_sequence + n, dtype=np.int64)
        self.next_sequence += n
        rows = rows.append_column(SEQUENCE_NUMBER, pa.array(seq)).append_column(
            VALUE_KIND, pa.array(kinds, type=pa.int8()))
        self._buffer.append(rows)
        self.buffered_bytes += rows.nbytes
        return rows.nbytes

    @property
    def has_buffered_rows(self) -> bool:
        """Whether rows wait in the buffer."""
        return bool(self._buffer)

    def take_buffer(self) -> tuple[pa.Table, int]:
        """The buffered rows as one table (in sequence order) and the bytes they took; the buffer is
        then empty. Only with rows buffered."""
        rows = pa.concat_tables(self._buffer) if len(self._buffer) > 1 else self._buffer[0]
        nbytes = self.buffered_bytes
        self._buffer, self.buffered_bytes = [], 0
        return rows, nbytes

    # ---- the flush ---------------------------------------------------------------------------
    def flush(self, rows: pa.Table) -> None:
        """Write `rows` (taken from the buffer) as a level-0 sorted run: merged, with its input
        changelog, looked up in the bucket's older files and kept in the lookup cache as the table
        asks; then compact the bucket if its sorted runs reached the stop trigger."""
        ctx = self.context
        table, schema = ctx.table, ctx.schema
        bucket_dir = table.path_factory.bucket_dir(self.partition.spec, self.bucket)
        looks_up = ctx.flush_lookup is not None and ctx.primary_key and self.bucket >= 0
        if looks_up or (ctx.primary_key and not ctx.write_only and not ctx.deletion_vectors and self.bucket >= 0):
            rows = self._above_levels(rows)
        given = rows
        if ctx.merge_function is not None:
            # Buffered rows stand in sequence order (numbers were handed out as they arrived).
            rows = ctx.merge_function.merge(rows, rows_in_sequence_order=True, raw_input=True)
        changelog = None
        if ctx.changelog_producer == "input":
            # The records as given, kinds and all, before they merge (Paimon's input changelog).
            # A deduplicate merge that kept every record changed none: they are its run already.
            kept_all = ctx.options.require(MERGE_ENGINE) == "deduplicate" and rows.num_rows == given.num_rows
            changelog = rows if kept_all else input_changelog(given, ctx.key_names)
        paths = table.path_factory
        namer = (paths.postpone_data_file_namer(ctx.commit_user) if self.bucket == POSTPONE_BUCKET
                 else paths.data_file_namer(bucket_dir))
        writer = DataFileWriter(table.file_io, schema, bucket_dir, namer, ctx.target_file_size)
        first_seq = None if ctx.primary_key else int(rows.column(SEQUENCE_NUMBER)[0].as_py())
        if looks_up and ctx.first_row_changelog and self.first_row_unlogged is None:
            # The compaction taking level 0 up writes this run's changelog (it looks the keys up
            # anyway). The buffer stands in sequence order: its first row has the lowest number.
            self.first_row_unlogged = int(given.column(SEQUENCE_NUMBER)[0].as_py())
        older: list[DataFileMeta] = []
        if looks_up:
            older = self.levels().all_files()
            # (A write-only writer keeps its earlier runs out of the levels: they are older too.)
            names = {f.file_name for f in older}
            if self.lookup_base is None:
                self.lookup_base = sorted(names | self._handed_out)
                self.lookup_snapshot = self.levels_snapshot
                # (A DV writer's levels come from the table as this cycle's first flush read it: as of now.)
                if self._handed_out and ctx.current is not None and ctx.flush_state is None:
                    # A stream writer's later commit: where the bucket is now what its levels
                    # hold, the lookup saw the table as of now, and the staleness check need not
                    # read (possibly expired) snapshots back to where the writer started.
                    now = ctx.current()
                    live = {f.file_name for f in now.bucket_files.get((self.partition.binary, self.bucket), [])}
                    if now.latest is not None and live == names:
                        self.lookup_snapshot = now.latest.id
            if self.runs_outside_levels:
                # (A compaction of the levels replaced their own runs: never read those again.)
                older += [f for f in self.new_files if f.file_name not in names]
        run = self._run_columns(rows) if (looks_up or ctx.run_cache is not None) and self.bucket >= 0 else None
        defers = looks_up and ctx.changelog_producer == "lookup" and self.level0_pending()
        if looks_up and (ctx.first_row_changelog or defers):
            # The compaction taking level 0 up gives this run's changelog, one change per key with
            # the level-0 files before it (Paimon's lookup-wait compaction); a flush changelog
            # would give a key in both twice. (The base is still recorded: the commit checks no
            # other writer's keys landed since.)
            written, found = writer.write_run(rows, level=0, min_sequence=first_seq), None
        elif looks_up and run is not None and ctx.flush_lookup is not None and ctx.flush_lookup.takes_run:
            written, found, run = write_and_look_up(table, ctx.flush_lookup, writer, rows, self.partition,
                                                    self.bucket, older, run)
        else:
            written = writer.write_run(rows, level=0, min_sequence=first_seq)
            found = None
            if looks_up:
                flush_lookup = ctx.flush_lookup
                assert flush_lookup is not None
                found = looked_up(table, written, lambda: flush_lookup.lookup(
                    self.partition, self.bucket, written, older), bucket_dir)
        if changelog is not None:
            self.new_changelog.extend(input_changelog_files(table, ctx.target_file_size, changelog, rows,
                                                            written, bucket_dir))
        if ctx.run_cache is not None and run is not None:
            for f, rows_of_file in _per_file(written, run):
                ctx.run_cache.put_written(f"{bucket_dir}/{f.file_name}", rows_of_file)
        if found is not None:
            self.lookup_index_files.extend(found.index_files)
            self.compact_changelog.extend(found.changelog_files)
            self.changelog_given.update(f.file_name for f in written)
            self._run_changelog.append((frozenset(f.file_name for f in written), list(found.changelog_files)))
        self.new_files.extend(written)
        if ctx.dv_compacts:
            for f, keys_of_file in _per_file(written, rows.select(ctx.key_names)):
                self.new_keys[f.file_name] = keys_of_file
        if not self.runs_outside_levels:
            levels = self.levels()
            levels.add_files(written)
            if levels.number_of_sorted_runs() >= ctx.stop_trigger:
                # Paimon's stop trigger: compact before taking more input into this bucket.
                self.compact(full=False)

    def level0_pending(self) -> bool:
        """Whether the bucket's level 0 holds a file whose changelog is not given yet (a write-only
        writer's, a flush that left it to the compaction): the next flush leaves its changelog to
        the compaction that takes level 0 up too. Without one, the flush gives it (the common case)."""
        return any(f.level == 0 and f.file_name not in self.changelog_given for f in self.lookup_files())

    @property
    def runs_outside_levels(self) -> bool:
        """Whether the runs this writer flushes stay out of its levels (a write-only writer's, a DV
        table's until its compaction at commit): else the levels hold them, or what compacted them."""
        ctx = self.context
        return not (ctx.primary_key and not ctx.write_only and not ctx.deletion_vectors and self.bucket >= 0)

    def lookup_files(self) -> list[DataFileMeta]:
        """The bucket's files a flush lookup now would look in: its levels and the runs this writer
        flushed outside them (a write-only writer's)."""
        older = self.levels().all_files()
        if not self.runs_outside_levels:
            return older
        names = {f.file_name for f in older}
        return older + [f for f in self.new_files if f.file_name not in names]

    def _run_columns(self, rows: pa.Table) -> pa.Table | None:
        """The run's rows in file layout (the fields, `_SEQUENCE_NUMBER`, `_VALUE_KIND` with the
        data files' types): what the lookup cache holds and the flush lookup reads; None when
        they do not convert (the lookup then reads the files)."""
        schema = self.context.schema
        file_schema = schema.data_file_arrow_schema()
        names = schema.field_names + [SEQUENCE_NUMBER, VALUE_KIND]
        if any(n not in rows.column_names for n in names):
            return None
        try:
            return rows.select(names).cast(pa.schema([file_schema.field(n) for n in names]))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return None

    # ---- levels and the compaction inside the writer --------------------------------------------------------------------------------
    def compact(self, full: bool, force_up_level0: bool = False, changelog: bool = True,
                realign: bool = True) -> None:
        """Compact the bucket now (with `force_up_level0`, level 0 up when nothing else is picked;
        without `changelog`, writing no full-compaction changelog); the results merge into what it
        compacted since the last message. A file of the levels that is gone because the table no
        longer lists it: the levels are taken from the table again and the compaction tried again
        (once, with `realign`)."""
        from lakehouse_engine.mergetree.compact.rewriter import BucketCompactor
        from lakehouse_engine.mergetree.compact.universal import pick_unit

        ctx = self.context
        levels = self.levels()
        unit = pick_unit(levels, ctx.options, full, force_up_level0)
        if unit is None:
            return
        level0 = [f for f in unit.files if f.level == 0]
        unlogged = None
        if level0 and ctx.first_row_changelog:
            # No level-0 file a snapshot lists has given its changelog (a write-only writer's
            # neither): the first-row compaction writes that of every level-0 row it keeps.
            own = [] if self.first_row_unlogged is None else [self.first_row_unlogged]
            unlogged = min(own + [f.min_sequence_number for f in level0])
        lookup = ctx.changelog_producer == "lookup" and not ctx.first_row_changelog
        compactor = BucketCompactor(ctx.table, self.partition, self.bucket, changelog,
                                    level0_changelog_of(ctx.table, given=self.changelog_given) if lookup else None,
                                    unlogged)
        seen = {f.file_name for f in levels.all_files()}
        try:
            before, after = compactor.compact(levels, unit)
            if lookup:
                # The changelog of the bucket's other level-0 files (a write-only writer's) comes
                # first: this writer's flushes that gave their own came after those went up.
                self.compact_changelog[:0] = compactor.changelog_files
            else:
                self.compact_changelog.extend(compactor.changelog_files)
            if unlogged is not None:
                self.first_row_unlogged = None  # (a compaction with level 0 takes all of it up)
        except DataFileMissingError as e:
            replaced, damaged = self._levels_replaced()
            if replaced and realign:
                # The bucket's files changed under this writer during the cycle (a dedicated
                # compaction replaced them and expiry removed them): compact what the table holds.
                log.info("table %s, bucket %s: the writer's compaction met a file the table no longer "
                         "lists; compacting again on its latest files: %s", ctx.table.name, self.bucket, e)
                self.compact(full, force_up_level0, changelog, realign=False)
                return
            if unlogged is not None:
                # This compaction writes the changelog of the writer's new keys (and takes its level
                # 0 up, which readers of first-row skip): it cannot be skipped.
                if damaged:
                    raise DataFileMissingError(
                        f"table {ctx.table.name}, bucket {self.bucket}: data file {damaged[0]} is listed in "
                        f"the latest snapshot but missing from storage (the table is damaged: restore "
                        f"the file or roll the table back); the writer's first-row compaction must read "
                        f"it to give the changelog of its new keys, nothing was committed") from e
                raise CommitConflictError(
                    f"table {ctx.table.name}, bucket {self.bucket}: the bucket's files changed under "
                    f"this writer's first-row compaction ({e}); nothing was committed, write again") from e
            # Compaction here is an optimisation: write the data without it (a `lookup` table's
            # runs left in level 0 give their changelog later). A file that is there but will not
            # decode still fails the write.
            log.warning("table %s, bucket %s: skipping the writer's compaction: %s", ctx.table.name,
                        self.bucket, e)
            return
        if ctx.options.require(MERGE_ENGINE) == "first-row":
            # The commit checks no file it did not see took the same keys up meanwhile.
            self.compact_base = seen | (self.compact_base or set())
        after_names = {f.file_name for f in self.compact_after}
        before_names = {f.file_name for f in self.compact_before}
        upgraded = {f.file_name for f in after}
        bucket_dir = ctx.table.path_factory.bucket_dir(self.partition.spec, self.bucket)
        for f in before:
            if f.file_name in after_names:
                # An intermediate file of this session, never committed: drop it for good
                # (unless it is an upgraded committed file sharing its physical file, or this
                # compaction only moved it up a level).
                self.compact_after = [a for a in self.compact_after if a.file_name != f.file_name]
                if f.file_name not in before_names and f.file_name not in upgraded:
                    ctx.table.file_io.delete_file(f"{bucket_dir}/{f.file_name}")
            else:
                self.compact_before.append(f)
        self.compact_after.extend(after)

    def compact_at_commit(self, full: bool) -> None:
        """The compaction before the commit: `full` at the commits `full-compaction.delta-commits`
        names (TableWrite decides); a `lookup` or first-row table's takes level 0 up."""
        self.compact(full, self.context.force_up_level0)
        self._withhold_level0_changelog()

    def _withhold_level0_changelog(self) -> None:
        """The flush changelog of the runs the compaction at commit left in level 0 (it was skipped,
        or picked other runs) stays out of the commit, whatever else this cycle compacted (Paimon's
        invariant: a level-0 file a snapshot lists has not given its changelog yet); the compaction
        that takes them up gives it. A run partly taken up keeps its changelog (its files above
        level 0 would give none)."""
        if not self._run_changelog:
            return
        level0 = {f.file_name for f in self.levels().level0}
        withheld = [run for run in self._run_changelog if run[0] <= level0]
        if not withheld:
            return
        gone = {f.file_name for _, files in withheld for f in files}
        self.compact_changelog = [f for f in self.compact_changelog if f.file_name not in gone]
        self._run_changelog = [run for run in self._run_changelog if not run[0] <= level0]
        bucket_dir = self.context.table.path_factory.bucket_dir(self.partition.spec, self.bucket)
        for names, files in withheld:
            self.changelog_given -= names
            for f in files:
                self.context.table.file_io.delete_file(f"{bucket_dir}/{f.file_name}")

    def _drop_cycle_work(self, live: list[DataFileMeta], snapshot: int) -> None:
        """Before the levels are taken from `live` (the bucket's files in `snapshot`): what this
        cycle's compactions did on the old levels is dropped (their files deleted), and the flush
        changelog with them.

        Raises:
            CommitConflictError: a first-row lookup-changelog writer's new rows number below a file
                above level 0 that another writer's rows reached meanwhile: its compaction tells
                its new keys by their numbers, and would give that writer's again.
        """
        ctx = self.context
        names = {f.file_name for f in live}
        if ctx.first_row_changelog and self.new_files:
            unlogged = min(f.min_sequence_number for f in self.new_files)
            newer = [f.file_name for f in live if f.level > 0 and f.max_sequence_number >= unlogged]
            if newer:
                raise CommitConflictError(
                    f"table {ctx.table.name}, bucket {self.bucket}: another writer's rows were compacted "
                    f"into the bucket's files above level 0 ({newer[0]}) while this writer's were "
                    f"numbered below them; its first-row changelog cannot tell its new keys apart, "
                    f"nothing was committed, write again")
        bucket_dir = ctx.table.path_factory.bucket_dir(self.partition.spec, self.bucket)
        kept = {f.file_name for f in self.new_files}
        for f in self.compact_after + self.compact_changelog:
            if f.file_name not in kept:
                ctx.table.file_io.delete_file(f"{bucket_dir}/{f.file_name}")
        self.compact_before, self.compact_after, self.compact_changelog = [], [], []
        # (The flush changelog was of the old levels: the compaction taking those runs up gives it,
        # from the new ones, which the commit's staleness check then starts from.)
        self.changelog_given, self._run_changelog = set(), []
        if self.lookup_base is not None:
            self.lookup_base = sorted(names | self._handed_out)
            self.lookup_snapshot = snapshot
        if ctx.first_row_changelog and self.new_files:
            # Their first-row changelog went with the dropped compactions: the next one writes it.
            self.first_row_unlogged = min(f.min_sequence_number for f in self.new_files)

    def take_level0_up(self, full: bool = False) -> None:
        """At the commit of a writer that does not compact as it writes (an overwrite, a rescale,
        postpone compaction), take its level 0 up (Paimon's ForceUpLevel0Compaction), as Paimon's
        writers of those do on a table whose readers skip level 0; `full`: to the top level, with
        no changelog (an overwrite's files on a full-compaction table, whose readers read the top)."""
        ctx = self.context
        if ctx.role.compaction_output:
            # Its files are a compaction's output already: what this compaction replaces of them
            # never lands.
            self.compact_after.extend(self.new_files)
            self.new_files = []
        if ctx.write_only:
            # Its flushes kept the levels as they were: the files it wrote join them now.
            names = {f.file_name for f in self.levels().all_files()}
            self.levels().add_files(f for f in self.new_files + self.compact_after if f.file_name not in names)
        self.compact(full=full, force_up_level0=not full, changelog=not full)

    def compact_deletion_vectors(self, state: RestoredState,
                                 bases: dict[tuple[bytes, int], DeletionVectorBase]) -> None:
        """Compact a DV table's bucket at commit: its level 0 up through the lookup, vectors marked.

        `state` and `bases`: the table's files and vectors as the commit finds them.
        """
        key = (self.partition.binary, self.bucket)
        if self.context.role.replaces:
            # The older files go with the replaced partition: the new ones compact among themselves.
            files, base = list(self.new_files), DeletionVectorBase()
        else:
            base = bases.get(key, DeletionVectorBase())
            files = state.bucket_files.get(key, []) + list(self.new_files)
        ctx = self.context
        level0_changelog = (level0_changelog_of(ctx.table, lambda: state.latest, self.changelog_given)
                            if ctx.changelog_producer == "lookup" else None)
        done = DeletionVectorCompactor(ctx.table, self.partition, self.bucket, base, self.new_keys,
                                       level0_changelog).compact(files)
        if done is None:
            return
        # The changelog of the bucket's other level-0 files first (see `compact`).
        self.compact_changelog[:0] = done.changelog_files
        self.compact_before, self.compact_after = done.before, done.after
        self.deletion_vector_files = done.index_files
        self.deletion_vector_base = (list(base.index_files), list(base.upper_files))

    # ---- the bucket's part of the commit -------------------------------------------------------
    @property
    def has_increment(self) -> bool:
        """Whether the bucket wrote files since the last commit message."""
        return bool(self.new_files or self.compact_before or self.compact_after or self.lookup_index_files
                    or self.new_changelog or self.compact_changelog)

    def drain_increment(self) -> CommitMessage:
        """The bucket's commit message (its new and compacted files, changelog, the lookup's and the
        deletion vectors' index files), which the writer then forgets: Paimon's drainIncrement.
        TableWrite adds what the table's bucket index contributes."""
        ctx = self.context
        new_files, after = list(self.new_files), list(self.compact_after)
        if ctx.role.compaction_output:
            new_files, after = [], new_files + after
            # Its changelog lands with the compaction (Paimon's compact increment).
            self.compact_changelog, self.new_changelog = self.new_changelog + self.compact_changelog, []
        # The partition also reads as its values (`tuple(message.partition)`), as pypaimon's.
        partition = PartitionRow(self.partition.binary, self.partition.values,
                                 [ctx.schema.field(k) for k in ctx.schema.partition_keys])
        bucket_dir = ctx.table.path_factory.bucket_dir(self.partition.spec, self.bucket)
        new_files = [f.located(bucket_dir) for f in new_files]
        message = CommitMessage(partition, self.bucket, self.total_buckets,
                                new_files, list(self.compact_before), after,
                                commit_user=ctx.commit_user)
        message.new_index_files = self.lookup_index_files
        message.new_changelog, message.compact_changelog = self.new_changelog, self.compact_changelog
        message.deletion_vector_files = self.deletion_vector_files
        message.deletion_vector_base = self.deletion_vector_base
        message.lookup_base, message.lookup_snapshot = self.lookup_base, self.lookup_snapshot
        self._handed_out.update(f.file_name for f in new_files + after)
        message.compact_base = sorted(self.compact_base) if self.compact_base is not None else None
        self.compact_base = None
        self.new_files, self.compact_before, self.compact_after = [], [], []
        self.new_changelog, self.compact_changelog = [], []
        self.lookup_index_files, self.deletion_vector_files = [], []
        self.deletion_vector_base, self.lookup_base, self.lookup_snapshot = None, None, None
        self.changelog_given, self._run_changelog = set(), []
        self.new_keys = {}
        return message

    def uncommitted(self) -> CommitMessage | None:
        """The data, changelog and index files the bucket wrote and has not handed out in a message
        (to delete when the write is aborted); None when there are none. The compaction's inputs go
        with them: a committed file the compaction only moved up a level is the same physical file
        as its original, and must stay."""
        if not (self.new_files or self.compact_after or self.new_changelog or self.compact_changelog
                or self.lookup_index_files):
            return None
        return CommitMessage(self.partition.binary, self.bucket, self.total_buckets,
                             list(self.new_files), list(self.compact_before), list(self.compact_after),
                             new_index_files=list(self.lookup_index_files),
                             new_changelog=list(self.new_changelog),
                             compact_changelog=list(self.compact_changelog),
                             commit_user=self.context.commit_user)
