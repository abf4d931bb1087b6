"""Log: one partition replica's log (Kafka's ``Log``): segments, offsets, appends, reads, truncation,
flush, retention, and the leader epoch cache and producer state that live beside them.

Theory of operation
-------------------
*Files.* A log owns one directory, ``<log.dir>/<topic>-<partition>``, holding segments named by base
offset as 20 zero-padded digits (``00000000000000000000.log`` plus ``.index`` and ``.timeindex``) and
``leader-epoch-checkpoint``. The last segment is the *active* one; only it is appended to. There is
always at least one segment. Segments removed by truncation or retention are renamed ``*.deleted``
and physically deleted ``file.delete.delay.ms`` later (``delete_expired_files``), or at the next load.

*Offsets.* ``log_start_offset`` <= ``high_watermark`` <= ``log_end_offset`` always holds.
``append_as_leader`` assigns offsets from the log end offset and stamps the leader epoch;
``append_as_follower`` keeps the leader's offsets, which must be monotonic and start at or after the
log end offset. Every batch with a leader epoch >= 0 goes into the leader epoch cache. The high
watermark has two paths: ``maybe_increment_high_watermark`` (leader, never backwards) and
``update_high_watermark`` (follower and load, clamped to the log, may go backwards).

*Write before count.* An append writes every byte to the OS with an unbuffered write
(``FileHandle.write``) *before* ``log_end_offset`` moves, so an acknowledged or replicated record
survives a crash of this process. Nothing here blocks on a disk.

*Flush versus fsync.* Flushing means fsync, and fsync must not run on the event loop. It is split in
two: ``begin_flush(up_to_offset)`` (on the loop, cheap: writes pending index entries and lists the
files of the segments overlapping ``[recovery_point, up_to_offset)``) returns a ``FlushJob``;
``job.run()`` performs the fsyncs by path (in a worker thread, via the actor's ``pipe_to_self``);
``complete_flush(job)`` (back on the loop) moves the ``recovery_point`` up, unless the log was
truncated meanwhile. Jobs are idempotent and an empty one is cheap. ``flush()`` does all three at
once (shutdown, tests). The log never decides to flush appended data on its own: each append's
``LogAppendInfo`` says up to which offset a flush is due (``flush.messages`` count rule, a roll, or
``flush.policy = per_batch``), and ``flush_due(now_ms)`` implements the ``flush.ms`` rule for a
periodic task.

*Truncation is durable at once.* ``truncate_to`` and ``truncate_fully_and_start_at`` fsync the cut
segment and the directory before returning (a divergent suffix must not come back after a power
loss); they are rare (leadership changes). With recovery's cuts (below) these are the only fsyncs
the log does on its own.

*Crash recovery.* Everything below ``recovery_point`` was fsynced. After an unclean shutdown (no
``.kafka_cleanshutdown`` marker in the log dir) every segment from the one holding the recovery point
on is re-validated batch by batch (framing, CRC, offsets); the first invalid byte and everything
after it is cut, and later segments are moved aside (log_loader.py); cuts and renames are fsynced
before the log is used, so a second power loss cannot bring the cut bytes back. After a clean
shutdown the active segment alone is checked the same way (a clean stop does not prove the bytes
stayed intact since) and recovered only if a batch fails. Each partition that needed work gets one
summary line ("Recovered log ...", log_recovery.py) after its per-action WARN lines. Indexes of
recovered segments are rebuilt, newer leader epochs re-assigned from the batches, and the producer
state rebuilt by scanning
batch headers from the first segment (no producer snapshot files are written; in-memory snapshots
taken at each roll make truncation rescan only from the last roll below the truncation point).

*Value types* (``LogAppendInfo``, ``LogReadInfo``, ...) and ``FlushJob`` live in log_types.py;
retention rules in retention.py; loading and recovery in log_loader.py; batch validation and offset
assignment in log_validator.py.

What this module deliberately does not know: replication roles, ISR, the controller, transactions
(no LSO, no aborted-transaction index), compaction.
"""

from __future__ import annotations

import bisect
import posixpath
import random
from collections.abc import Iterator

from runtime.storage.checkpoint import LEADER_EPOCH_CHECKPOINT, EpochEntry, LeaderEpochCheckpointFile
from runtime.storage.compression import CompressionType
from runtime.storage.config import FlushPolicy, LogConfig
from runtime.storage.errors import (
    CorruptCheckpointError,
    InvalidOffsetError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    UnexpectedAppendOffsetError,
)
from runtime.storage.fs import FileSystem
from runtime.storage.leader_epoch import LeaderEpochCache
from runtime.storage.log_loader import load_segments
from runtime.storage.log_recovery import RecoveryAction, RecoveryKind, RecoveryReport
from runtime.storage.log_types import (
    FlushJob,
    LogAppendInfo,
    LogOffsetMetadata,
    LogReadInfo,
    LogStatistics,
    TimestampAndOffset,
)
from runtime.storage.log_validator import (
    PREFIX_SIZE,
    Analysis,
    LeaderPlan,
    analyze,
    assign_offsets,
    leader_prefix,
    one_plain_batch,
    validate_client_batch,
)
from runtime.storage.producer_state import BatchMetadata, ProducerAppend, ProducerStateManager
from runtime.storage.records import NO_TIMESTAMP, BatchHeader
from runtime.storage.retention import (
    SegmentPredicate,
    deletable_segments,
    log_start_offset_breached,
    size_breached,
    time_breached,
)
from runtime.storage.segment import LogSegment

__all__ = [
    "FlushJob",
    "Log",
    "LogAppendInfo",
    "LogOffsetMetadata",
    "LogReadInfo",
    "LogStatistics",
    "TimestampAndOffset",
]
# The value types live in log_types.py; they are re-exported here because they are the Log's API.

_NO_EPOCHS = "no leader epoch entries (file missing or empty) although the log holds batches"
_NONE = CompressionType.NONE  # read on every append: a module global is cheaper than an enum lookup


class Log:
    def __init__(
        self, fs: FileSystem, directory: str, config: LogConfig, rng: random.Random, *, log_start_offset: int
    ) -> None:
        """Use ``Log.open``; this only sets fields."""
        self.fs = fs
        self.directory = directory
        self._rng = rng
        self._segments: dict[int, LogSegment] = {}
        self._bases: list[int] = []
        self._log_end_offset = 0
        self._log_start_offset = log_start_offset
        self._high_watermark = 0
        self._recovery_point = 0
        self._last_flush_ms = 0
        self._truncation_generation = 0
        self._directory_changes = 0
        self._directory_changes_synced = 0
        self._pending_roll_flush: int | None = None
        self._pending_deletes: list[tuple[int, list[str]]] = []
        # [from, to): offsets that were flushed but that loading found gone from this replica's files
        # (damage); a leader whose log still ends below ``to`` serves without records it once had.
        self.missing_flushed_offsets: tuple[int, int] | None = None
        self.producer_state = ProducerStateManager()
        self._apply_config(config)
        self._active: LogSegment
        self.leader_epoch_cache = LeaderEpochCache(
            lambda: self._log_end_offset, LeaderEpochCheckpointFile(fs, directory), entries=()
        )

    def _apply_config(self, config: LogConfig) -> None:
        # Config values the append path reads, copied to attributes once.
        self.config = config
        self._flush_every_batch = config.flush_policy is FlushPolicy.PER_BATCH
        self._flush_messages = config.flush_messages
        self._max_message_bytes = config.max_message_bytes
        self._segment_bytes = config.segment_bytes
        self._leader_plan = LeaderPlan.of(config)

    def update_config(self, config: LogConfig) -> None:
        """Apply a topic config change (Kafka's ``Log.updateConfig``) to this log and its segments."""
        self._apply_config(config)
        for segment in self._segments.values():
            segment.update_config(config)

    @classmethod
    def open(
        cls,
        fs: FileSystem,
        directory: str,
        config: LogConfig,
        *,
        now_ms: int,
        wall_clock_ms: int = 0,
        rng: random.Random,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        high_watermark: int = 0,
        clean_shutdown: bool = False,
        report: RecoveryReport | None = None,
    ) -> Log:
        """Open (creating if needed) the log in ``directory``; values come from the log dir's checkpoints.
        Every repair made while loading is recorded in ``report`` (and logged at WARN)."""
        if report is None:
            report = RecoveryReport()
        first_action = len(report.actions)
        fs.make_dirs(directory)
        log = cls(fs, directory, config, rng, log_start_offset=log_start_offset)
        checkpoint = LeaderEpochCheckpointFile(fs, directory)
        try:
            entries = checkpoint.read()
            epochs_damage: str | None = None
        except CorruptCheckpointError as error:
            # Only this partition is affected: its epochs are rebuilt from the batches below.
            entries, epochs_damage = [], str(error)
        log.leader_epoch_cache = LeaderEpochCache(lambda: log._log_end_offset, checkpoint, entries=entries)
        loaded = load_segments(
            fs,
            directory,
            config,
            clean_shutdown=clean_shutdown,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            leader_epoch_cache=log.leader_epoch_cache,
            now_ms=now_ms,
            wall_clock_ms=wall_clock_ms,
            roll_jitter_ms=log._roll_jitter_ms,
            report=report,
        )
        for segment in loaded.segments:
            log._add_segment(segment)
        log._log_end_offset = loaded.log_end_offset
        log._recovery_point = loaded.recovery_point
        log._last_flush_ms = now_ms
        # Missing, empty or without entries while the log holds batches is damage too if the batches
        # carry leader epochs (every epoch is checkpointed before its first batch is written).
        if epochs_damage is not None or (not entries and loaded.log_end_offset > log._bases[0]):
            log._rebuild_leader_epochs(epochs_damage, report)
        epochs_before = log.leader_epoch_cache.entries
        log.leader_epoch_cache.truncate_from_end(log._log_end_offset)
        dropped = epochs_before[len(log.leader_epoch_cache.entries) :]
        if dropped:
            report.record(
                RecoveryAction(
                    RecoveryKind.EPOCH_ENTRIES_DROPPED,
                    posixpath.basename(directory),
                    checkpoint.path,
                    f"leader epochs {', '.join(f'{e.epoch} from offset {e.start_offset}' for e in dropped)} "
                    f"start at or beyond the log end offset {log._log_end_offset}: dropped",
                )
            )
        log._log_start_offset = max(loaded.log_start_offset, log._bases[0])
        log.leader_epoch_cache.truncate_from_start(log._log_start_offset)
        log._rebuild_producer_state(log._log_end_offset)
        log.producer_state.truncate_head(log._log_start_offset)
        log.update_high_watermark(high_watermark)
        if any(a.kind is RecoveryKind.RECORDS_MISSING for a in report.actions[first_action:]):
            log.missing_flushed_offsets = (log._log_end_offset, recovery_point)
        report.summarize(
            posixpath.basename(directory),
            first_action,
            clean_shutdown=clean_shutdown,
            checkpointed_recovery_point=recovery_point,
            log_end_offset=log._log_end_offset,
            recovery_point=log._recovery_point,
        )
        log._directory_changes = 1  # The directory's entries are not known to be durable yet.
        return log

    # ------------------------------------------------------------------------------ offsets

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def recovery_point(self) -> int:
        """Every offset below it is on disk (fsynced)."""
        return self._recovery_point

    @property
    def last_flush_ms(self) -> int:
        return self._last_flush_ms

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        active = self.active_segment
        return LogOffsetMetadata(self._log_end_offset, active.base_offset, active.size)

    @property
    def active_segment(self) -> LogSegment:
        return self._active

    @property
    def segments(self) -> list[LogSegment]:
        return [self._segments[base] for base in self._bases]

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments.values())

    def statistics(self) -> LogStatistics:
        return LogStatistics(
            self._log_start_offset,
            self._log_end_offset,
            self._high_watermark,
            self._recovery_point,
            len(self._bases),
            self.size_in_bytes,
            self.leader_epoch_cache.latest_epoch if self.leader_epoch_cache.latest_epoch is not None else -1,
            len(self.producer_state.producers),
        )

    def maybe_increment_high_watermark(self, new_high_watermark: int) -> bool:
        """Leader path: move the high watermark up (never down). Returns whether it moved."""
        if new_high_watermark > self._log_end_offset:
            raise ValueError(
                f"high watermark {new_high_watermark} would exceed the log end offset {self._log_end_offset}"
            )
        if new_high_watermark > self._high_watermark:
            self._high_watermark = new_high_watermark
            return True
        return False

    def update_high_watermark(self, high_watermark: int) -> int:
        """Follower and load path: set, clamped to ``[log_start_offset, log_end_offset]``."""
        self._high_watermark = min(max(high_watermark, self._log_start_offset), self._log_end_offset)
        return self._high_watermark

    def maybe_increment_log_start_offset(self, new_log_start_offset: int) -> bool:
        """DeleteRecords and followers adopting the leader's start offset (never above the HW)."""
        if new_log_start_offset > self._high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot increment the log start offset to {new_log_start_offset} of {self.directory}: it is "
                f"larger than the high watermark {self._high_watermark}"
            )
        if new_log_start_offset <= self._log_start_offset:
            return False
        self._log_start_offset = new_log_start_offset
        self.leader_epoch_cache.truncate_from_start(new_log_start_offset)
        self.producer_state.truncate_head(new_log_start_offset)
        return True

    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """Record that ``leader_epoch`` starts at ``start_offset`` (``make_leader`` passes the log end
        offset, so followers can ask about an epoch before anything was written in it)."""
        self.leader_epoch_cache.assign(leader_epoch, start_offset)

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int] | None:
        """``(epoch, end offset)`` from the leader epoch cache, or None if unknown (Kafka's
        ``Log.endOffsetForEpoch``)."""
        epoch, offset = self.leader_epoch_cache.end_offset_for(leader_epoch)
        return None if offset == -1 else (epoch, offset)

    # ---------------------------------------------------------------------------- appending

    def append_as_leader(
        self, records: bytes | bytearray | memoryview, leader_epoch: int, *, now_ms: int, wall_clock_ms: int
    ) -> LogAppendInfo:
        """Validate a producer's batches, assign offsets from the log end offset, stamp
        ``leader_epoch`` and append (docs/log.md §4, docs/record-batch.md §3)."""
        if self._leader_plan.as_sent:
            # What nearly every produce request carries: one plain batch. The same result as
            # assign_offsets + _append, without their per-batch lists; the batch is written as sent
            # after a new prefix (base offset, length, leader epoch).
            header = one_plain_batch(records, self._max_message_bytes)
            if header is not None and header.base_offset == 0:
                validate_client_batch(header)
                first_offset = self._log_end_offset
                last_offset = first_offset + header.last_offset_delta
                producer_append = None
                if header.producer_id >= 0:
                    stamped = header._replace(base_offset=first_offset, partition_leader_epoch=leader_epoch)
                    duplicate = self.producer_state.find_duplicate(stamped)
                    if duplicate is not None:
                        return self._duplicate_appended(
                            duplicate, NO_TIMESTAMP, len(records), _NONE, _NONE, leader_epoch
                        )
                    producer_append = self.producer_state.prepare([stamped], from_client=True)
                return self._append(
                    [
                        leader_prefix(first_offset, header.batch_length, leader_epoch),
                        memoryview(records)[PREFIX_SIZE:],
                    ],
                    len(records),
                    first_offset,
                    last_offset,
                    header.max_timestamp,
                    last_offset,
                    header.records_count,
                    leader_epoch,
                    producer_append,
                    now_ms,
                    wall_clock_ms,
                )
        analysis = analyze(records, True, self._max_message_bytes)
        if not analysis.headers:
            return self._nothing_appended(analysis)
        assigned = assign_offsets(
            analysis,
            records,
            self._log_end_offset,
            leader_epoch,
            self.config,
            wall_clock_ms,
            self._leader_plan,
        )
        for header in assigned.headers if analysis.has_producer_ids else ():
            if header.has_producer_id:
                duplicate = self.producer_state.find_duplicate(header)
                if duplicate is not None:
                    return self._duplicate_appended(
                        duplicate,
                        assigned.log_append_time_ms,
                        analysis.valid_bytes,
                        analysis.source_codec,
                        assigned.target_codec,
                        leader_epoch,
                    )
        producer_append = (
            self.producer_state.prepare(assigned.headers, from_client=True)
            if analysis.has_producer_ids
            else None
        )
        last_header = assigned.headers[-1]
        return self._append(
            assigned.parts,
            assigned.size,
            self._log_end_offset,
            last_header.base_offset + last_header.last_offset_delta,
            assigned.max_timestamp,
            assigned.offset_of_max_timestamp,
            analysis.record_count,
            leader_epoch,
            producer_append,
            now_ms,
            wall_clock_ms,
            headers=assigned.headers,
            log_append_time_ms=assigned.log_append_time_ms,
            source_codec=analysis.source_codec,
            target_codec=assigned.target_codec,
        )

    def append_as_follower(
        self, records: bytes | bytearray | memoryview, *, now_ms: int, wall_clock_ms: int = 0
    ) -> LogAppendInfo:
        """Append the leader's batches byte for byte (CRC checked, offsets kept)."""
        header = one_plain_batch(records, self._max_message_bytes)
        if header is not None and header.base_offset >= self._log_end_offset:
            # One plain batch (a per-batch append, or a fetch that returned one): the same result as
            # the general path below, without its lists.
            last_offset = header.base_offset + header.last_offset_delta
            return self._append(
                [records],
                len(records),
                header.base_offset,
                last_offset,
                header.max_timestamp,
                last_offset if header.max_timestamp > NO_TIMESTAMP else -1,
                header.records_count,
                header.partition_leader_epoch,
                self.producer_state.prepare([header], from_client=False) if header.producer_id >= 0 else None,
                now_ms,
                wall_clock_ms,
            )
        analysis = analyze(records, False, self._max_message_bytes)
        headers = analysis.headers
        if not headers:
            return self._nothing_appended(analysis)
        if not analysis.offsets_monotonic:
            raise OffsetsOutOfOrderError(
                f"out of order offsets in the append to {self.directory}: "
                f"{[(h.base_offset, h.last_offset) for h in headers]}"
            )
        if analysis.first_offset < self._log_end_offset:
            raise UnexpectedAppendOffsetError(
                f"unexpected offset in the append to {self.directory}: first offset "
                f"{analysis.first_offset} is "
                f"less than the next offset {self._log_end_offset}; first 10 offsets: "
                f"{[h.base_offset for h in headers[:10]]}"
            )
        return self._append(
            [
                records
                if analysis.valid_bytes == len(records)
                else memoryview(records)[: analysis.valid_bytes]
            ],
            analysis.valid_bytes,
            analysis.first_offset,
            analysis.last_offset,
            analysis.max_timestamp,
            analysis.offset_of_max_timestamp,
            analysis.record_count,
            headers[-1].partition_leader_epoch,
            self.producer_state.prepare(headers, from_client=False) if analysis.has_producer_ids else None,
            now_ms,
            wall_clock_ms,
            headers=headers,
            source_codec=analysis.source_codec,
            target_codec=analysis.source_codec,
        )

    def _nothing_appended(self, analysis: Analysis) -> LogAppendInfo:
        return LogAppendInfo(
            -1, -1, NO_TIMESTAMP, -1, NO_TIMESTAMP, self._log_start_offset, 0, 0,
            analysis.source_codec, analysis.source_codec, -1,
        )  # fmt: skip

    def _duplicate_appended(
        self,
        duplicate: BatchMetadata,
        log_append_time_ms: int,
        valid_bytes: int,
        source_codec: CompressionType,
        target_codec: CompressionType,
        leader_epoch: int,
    ) -> LogAppendInfo:
        """An idempotent producer's retry of a batch already in the log: nothing is written; the
        offsets and timestamp are the original's."""
        return LogAppendInfo(
            duplicate.first_offset,
            duplicate.last_offset,
            duplicate.timestamp,
            duplicate.last_offset,
            duplicate.timestamp if log_append_time_ms != NO_TIMESTAMP else NO_TIMESTAMP,
            self._log_start_offset,
            duplicate.last_offset - duplicate.first_offset + 1,
            valid_bytes,
            source_codec,
            target_codec,
            leader_epoch,
            duplicate=True,
        )

    def _append(
        self,
        parts: list[bytes | bytearray | memoryview],
        size: int,
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
        record_count: int,
        last_leader_epoch: int,
        producer_append: ProducerAppend | None,
        now_ms: int,
        wall_clock_ms: int,
        headers: list[BatchHeader] | None = None,
        log_append_time_ms: int = NO_TIMESTAMP,
        source_codec: CompressionType = _NONE,
        target_codec: CompressionType = _NONE,
    ) -> LogAppendInfo:
        """Write ``parts`` (``size`` bytes holding offsets ``first_offset..last_offset``) and account
        for them: log end offset, leader epochs, producer state, flush due. ``headers`` is given when
        the bytes hold several batches (or the leader rebuilt them); without it they are one
        uncompressed batch in ``last_leader_epoch``, the hot path of both roles, kept to one frame."""
        if size > self._segment_bytes:
            raise RecordBatchTooLargeError(
                f"the append to {self.directory} is {size} bytes, larger than segment.bytes "
                f"{self.config.segment_bytes}"
            )
        # Batch-level max timestamps for the segment and its time index: every replica and every
        # recovery sees the same ones.
        segment_max_timestamp, segment_offset_of_max = max_timestamp, last_offset
        if headers is not None:
            if len(headers) == 1:
                segment_max_timestamp = headers[0].max_timestamp
            else:
                segment_max_timestamp, segment_offset_of_max = NO_TIMESTAMP, first_offset
                for header in headers:
                    if header.max_timestamp > segment_max_timestamp:
                        segment_max_timestamp = header.max_timestamp
                        segment_offset_of_max = header.base_offset + header.last_offset_delta
        segment = self._active
        if segment.should_roll(size, segment_max_timestamp, last_offset, now_ms):
            segment = self.roll(now_ms=now_ms, wall_clock_ms=wall_clock_ms, expected_next_offset=first_offset)
        segment.append(last_offset, segment_max_timestamp, segment_offset_of_max, parts, size, wall_clock_ms)
        # The bytes are in the OS: now the offsets may count.
        log_end_offset = self._log_end_offset = last_offset + 1
        cache = self.leader_epoch_cache
        latest = cache.latest_entry
        if headers is None:
            if last_leader_epoch >= 0 and (
                latest is None or latest.epoch != last_leader_epoch or latest.start_offset > first_offset
            ):
                cache.assign(last_leader_epoch, first_offset)
        else:
            for header in headers:
                epoch = header.partition_leader_epoch
                if epoch >= 0 and (
                    latest is None or latest.epoch != epoch or latest.start_offset > header.base_offset
                ):
                    cache.assign(epoch, header.base_offset)
                    latest = cache.latest_entry
        if producer_append is not None:
            self.producer_state.apply(producer_append, log_end_offset)
        else:
            self.producer_state.map_end_offset = log_end_offset
        flush_up_to_offset = self._pending_roll_flush
        if flush_up_to_offset is not None:
            self._pending_roll_flush = None
        if self._flush_every_batch or log_end_offset - self._recovery_point >= self._flush_messages:
            flush_up_to_offset = log_end_offset
        # Every field given, in order: tuple.__new__ skips the NamedTuple's Python-level __new__.
        info: LogAppendInfo = tuple.__new__(
            LogAppendInfo,
            (
                first_offset,
                last_offset,
                max_timestamp,
                offset_of_max_timestamp,
                log_append_time_ms,
                self._log_start_offset,
                record_count,
                size,
                source_codec,
                target_codec,
                last_leader_epoch,
                False,
                flush_up_to_offset,
            ),
        )
        return info

    # ------------------------------------------------------------------------------ rolling

    def _roll_jitter_ms(self) -> int:
        jitter = self.config.segment_jitter_ms
        if jitter == 0:
            return 0
        return self._rng.getrandbits(31) % min(jitter, self.config.segment_ms)

    def roll(
        self, *, now_ms: int, wall_clock_ms: int = 0, expected_next_offset: int | None = None
    ) -> LogSegment:
        """Start a new active segment at ``max(expected_next_offset, log_end_offset)``."""
        new_offset = max(
            expected_next_offset if expected_next_offset is not None else 0, self._log_end_offset
        )
        active = self.active_segment
        if new_offset in self._segments:
            if active.base_offset != new_offset or active.size != 0:
                raise InvalidOffsetError(
                    f"cannot roll {self.directory} to a new segment at {new_offset}: a non-empty "
                    "segment exists there"
                )
            self._remove_segments([active], now_ms=now_ms)
        elif new_offset < active.base_offset:
            raise InvalidOffsetError(
                f"cannot roll {self.directory} to {new_offset}, below the active segment's base "
                f"{active.base_offset}"
            )
        else:
            active.on_become_inactive()
        self.producer_state.take_snapshot(new_offset)
        segment = LogSegment.create(
            self.fs,
            self.directory,
            new_offset,
            self.config,
            now_ms=now_ms,
            wall_clock_ms=wall_clock_ms,
            roll_jitter_ms=self._roll_jitter_ms(),
        )
        self._add_segment(segment)
        self._directory_changes += 1
        self._pending_roll_flush = new_offset  # Kafka flushes the rolled-away segments asynchronously.
        return segment

    def _add_segment(self, segment: LogSegment) -> None:
        if segment.base_offset not in self._segments:
            bisect.insort(self._bases, segment.base_offset)
        self._segments[segment.base_offset] = segment
        self._active = self._segments[self._bases[-1]]

    def _remove_segments(self, segments: list[LogSegment], *, now_ms: int) -> None:
        """Take segments out of the log and rename their files to ``.deleted`` for later deletion."""
        for segment in segments:
            del self._segments[segment.base_offset]
            self._bases.remove(segment.base_offset)
            if self._bases:
                self._active = self._segments[self._bases[-1]]
            renamed = segment.rename_for_deletion()
            self._pending_deletes.append((now_ms + self.config.file_delete_delay_ms, renamed))
        if segments:
            self._directory_changes += 1

    def delete_expired_files(self, now_ms: int) -> int:
        """Physically delete ``.deleted`` files whose delay has passed; returns how many."""
        deleted = 0
        keep: list[tuple[int, list[str]]] = []
        for due_ms, paths in self._pending_deletes:
            if due_ms > now_ms:
                keep.append((due_ms, paths))
                continue
            for path in paths:
                if self.fs.exists(path):
                    self.fs.delete_file(path)
                    deleted += 1
        self._pending_deletes = keep
        return deleted

    # ------------------------------------------------------------------------------ reading

    def _floor_segment(self, offset: int) -> LogSegment | None:
        slot = bisect.bisect_right(self._bases, offset) - 1
        return self._segments[self._bases[slot]] if slot >= 0 else None

    def _segments_from(self, segment: LogSegment) -> Iterator[LogSegment]:
        for base in self._bases[bisect.bisect_left(self._bases, segment.base_offset) :]:
            yield self._segments[base]

    def _empty_read(self, metadata: LogOffsetMetadata) -> LogReadInfo:
        return LogReadInfo(
            b"", metadata, False, self._high_watermark, self._log_start_offset, self._log_end_offset
        )

    def _out_of_range(self, offset: int) -> OffsetOutOfRangeError:
        return OffsetOutOfRangeError(
            f"received request for offset {offset} of {self.directory}, but we only have log segments in the "
            f"range {self._log_start_offset} to {self._log_end_offset}"
        )

    def convert_to_offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Where ``offset`` is: the position of the batch holding it (``OFFSET_OUT_OF_RANGE`` outside
        ``[log_start_offset, log_end_offset]``)."""
        if offset == self._log_end_offset:
            return self.log_end_offset_metadata
        floor = self._floor_segment(offset)
        if offset > self._log_end_offset or floor is None or offset < self._log_start_offset:
            raise self._out_of_range(offset)
        for segment in self._segments_from(floor):
            found = segment.translate_offset(offset)
            if found is not None:
                return LogOffsetMetadata(offset, segment.base_offset, found.position)
        return self.log_end_offset_metadata

    def fetch_offset_by_timestamp(self, target_timestamp: int) -> TimestampAndOffset | None:
        """The first record at or above the log start offset whose timestamp is >=
        ``target_timestamp``: its timestamp, offset and batch leader epoch; None when there is none
        (Kafka's ``Log.fetchOffsetByTimestamp`` for a timestamp, docs/log.md §11).

        Segments whose max timestamp is below the target cannot hold the record and are skipped;
        the first one that may is searched from its time index position
        (``LogSegment.find_offset_by_timestamp``). Unlike Kafka 2.4, which stops at that segment,
        the search goes on to the next segments when it holds no such record at or above the log
        start offset (the log start offset moved into it past its only later records), so None
        always means "no such record in the log". Offsets below the log start offset are never
        returned. The high watermark is the caller's business (docs/log.md §11)."""
        log_start_offset = self._log_start_offset
        bases = self._bases
        first = max(bisect.bisect_right(bases, log_start_offset) - 1, 0)
        for base in bases[first:]:
            segment = self._segments[base]
            if segment.max_timestamp_so_far < target_timestamp:
                continue
            found = segment.find_offset_by_timestamp(target_timestamp, max(log_start_offset, base))
            if found is not None:
                return found
        return None

    def read(
        self, start_offset: int, max_bytes: int, max_offset: int | None = None, min_one_message: bool = True
    ) -> LogReadInfo:
        """Read whole batches from the one holding ``start_offset`` (docs/log.md §3).

        ``max_offset`` is the exclusive upper bound of what may be returned (the high watermark for a
        consumer, None = the log end offset for a follower). At most ``max_bytes`` are returned,
        but at least the first batch with ``min_one_message``. Reading at the log end offset (or at
        or above ``max_offset``) gives an empty result; below the log start offset or above the log
        end offset raises ``OffsetOutOfRangeError``.
        """
        log_end_offset = self._log_end_offset
        if start_offset == log_end_offset:
            return self._empty_read(self.log_end_offset_metadata)
        floor = self._floor_segment(start_offset)
        if start_offset > log_end_offset or floor is None or start_offset < self._log_start_offset:
            raise self._out_of_range(start_offset)
        if max_offset is None or max_offset >= log_end_offset:
            bound = self.log_end_offset_metadata
        else:
            if start_offset >= max_offset:
                return self._empty_read(self.convert_to_offset_metadata(max(start_offset, max_offset)))
            bound = self.convert_to_offset_metadata(max_offset)
        for segment in self._segments_from(floor):
            max_position = (
                bound.relative_position_in_segment
                if bound.segment_base_offset == segment.base_offset
                else None
            )
            found = segment.read(start_offset, max_bytes, max_position, min_one_message)
            if found is not None:
                position, data, incomplete = found
                return LogReadInfo(
                    data,
                    LogOffsetMetadata(start_offset, segment.base_offset, position),
                    incomplete,
                    self._high_watermark,
                    self._log_start_offset,
                    log_end_offset,
                )
            if bound.segment_base_offset == segment.base_offset:
                break
        return self._empty_read(self.log_end_offset_metadata)

    # --------------------------------------------------------------------------- truncation

    def truncate_to(self, target_offset: int, *, now_ms: int) -> bool:
        """Follower truncation (docs/log.md §6). Returns False if nothing changed."""
        if target_offset < 0:
            raise ValueError(f"cannot truncate {self.directory} to a negative offset ({target_offset})")
        if target_offset >= self._log_end_offset:
            # The log is untouched, but an epoch this replica started as leader at its log end
            # offset, with nothing appended since, must go (KAFKA-10706, after Kafka 2.4): kept, it
            # stays the latest epoch, and each OffsetsForLeaderEpoch round asks for it again.
            self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
            return False
        if target_offset < self._bases[0]:
            self.truncate_fully_and_start_at(target_offset, now_ms=now_ms)
            return True
        self._remove_segments([s for s in self.segments if s.base_offset > target_offset], now_ms=now_ms)
        self.active_segment.truncate_to(target_offset, now_ms=now_ms)
        self._make_truncation_durable(self.active_segment)
        self._truncation_generation += 1
        self._log_end_offset = target_offset
        self._high_watermark = min(self._high_watermark, target_offset)
        self._recovery_point = min(self._recovery_point, target_offset)
        self._log_start_offset = min(self._log_start_offset, target_offset)
        self.leader_epoch_cache.truncate_from_end(target_offset)
        self._rebuild_producer_state(target_offset)
        return True

    def truncate_fully_and_start_at(self, new_offset: int, *, now_ms: int, wall_clock_ms: int = 0) -> None:
        """Delete every segment and start empty at ``new_offset``."""
        if new_offset < 0:
            raise ValueError(f"cannot restart {self.directory} at a negative offset ({new_offset})")
        # The epochs first, durably, as for retention: loading never sees epochs below the first segment
        # unless the head's files went missing.
        self.leader_epoch_cache.clear_and_flush()
        self._remove_segments(self.segments, now_ms=now_ms)
        self._add_segment(
            LogSegment.create(
                self.fs,
                self.directory,
                new_offset,
                self.config,
                now_ms=now_ms,
                wall_clock_ms=wall_clock_ms,
                roll_jitter_ms=self._roll_jitter_ms(),
            )
        )
        self._make_truncation_durable(None)
        self._truncation_generation += 1
        self._log_end_offset = new_offset
        self.producer_state.truncate_fully()
        self.producer_state.map_end_offset = new_offset
        self._recovery_point = min(self._recovery_point, new_offset)
        self._log_start_offset = new_offset
        self._high_watermark = new_offset

    def _make_truncation_durable(self, truncated: LogSegment | None) -> None:
        """fsync the truncated segment and the directory (renamed and new segment files) right away:
        a power loss must never bring truncated records back, as they may be a divergent suffix that
        the leader epoch protocol already discarded. Truncations happen on leadership changes only, so
        this blocking call on the caller's thread is rare."""
        if truncated is not None:
            truncated.fsync()
        self.fs.fsync_dir(self.directory)
        self._directory_changes_synced = self._directory_changes

    def _rebuild_leader_epochs(self, damage: str | None, report: RecoveryReport) -> None:
        """The partition's ``leader-epoch-checkpoint`` could not be read (``damage``), or had no
        entries for a log that holds batches (None): rebuild the cache from the partition leader
        epochs in the batch headers (each epoch starts at its first batch)."""
        found: list[EpochEntry] = []
        for base in self._bases:
            for _position, header in self._segments[base].iterate_headers():
                epoch = header.partition_leader_epoch
                if epoch >= 0 and (not found or epoch > found[-1].epoch):
                    found.append(EpochEntry(epoch, header.base_offset))
        if damage is None and not found:
            return  # batches without a leader epoch (-1): the empty checkpoint was right
        cache = self.leader_epoch_cache
        cache.clear_and_flush()
        for entry in found:
            cache.assign(entry.epoch, entry.start_offset)
        rebuilt = ", ".join(f"{e.epoch} from offset {e.start_offset}" for e in cache.entries)
        report.record(
            RecoveryAction(
                RecoveryKind.CHECKPOINT_REBUILT,
                posixpath.basename(self.directory),
                posixpath.join(self.directory, LEADER_EPOCH_CHECKPOINT),
                f"{damage or _NO_EPOCHS}; rebuilt from the batch headers: epochs {rebuilt or 'none'}",
            )
        )

    def _rebuild_producer_state(self, up_to_offset: int) -> None:
        """Producer state as of ``up_to_offset``: the latest in-memory snapshot at or below it, then
        the batch headers from there (snapshots are re-taken at each segment base on the way)."""
        start = self.producer_state.restore_latest_snapshot(up_to_offset)
        for position, base in enumerate(self._bases):
            following = self._bases[position + 1] if position + 1 < len(self._bases) else None
            if following is not None and following <= start:
                continue  # Wholly covered by the snapshot.
            if base >= up_to_offset:
                break
            if base > start:
                self.producer_state.take_snapshot(base)
            for _position, header in self._segments[base].iterate_headers():
                if header.base_offset >= up_to_offset:
                    break
                if header.base_offset >= start:
                    self.producer_state.update(header)

    # ------------------------------------------------------------------------------ flushing

    def begin_flush(self, up_to_offset: int | None = None) -> FlushJob:
        """The fsyncs that make ``[recovery_point, up_to_offset)`` durable (default: everything)."""
        target = self._log_end_offset if up_to_offset is None else min(up_to_offset, self._log_end_offset)
        paths: list[str] = []
        if target > self._recovery_point:
            start = self._floor_segment(self._recovery_point)
            for segment in self._segments_from(start if start is not None else self.segments[0]):
                if segment.base_offset >= target:
                    break
                segment.write_pending_index_entries()
                paths.extend(segment.file_paths())
        directory = self.directory if self._directory_changes > self._directory_changes_synced else None
        return FlushJob(
            self.fs,
            tuple(paths),
            directory,
            up_to_offset=max(target, self._recovery_point),
            generation=self._truncation_generation,
            directory_changes=self._directory_changes,
        )

    def complete_flush(self, job: FlushJob, *, now_ms: int) -> None:
        """After ``job.run()`` succeeded: advance the recovery point (unless truncated meanwhile)."""
        if job.directory is not None:
            self._directory_changes_synced = max(self._directory_changes_synced, job.directory_changes)
        if job.generation == self._truncation_generation and job.up_to_offset > self._recovery_point:
            self._recovery_point = min(job.up_to_offset, self._log_end_offset)
        self._last_flush_ms = now_ms

    def flush(self, up_to_offset: int | None = None, *, now_ms: int) -> None:
        """Synchronous flush (shutdown, tests): fsync on the calling thread."""
        job = self.begin_flush(up_to_offset)
        job.run()
        self.complete_flush(job, now_ms=now_ms)

    def flush_due(self, now_ms: int) -> bool:
        """The ``flush.ms`` rule, for a periodic task: unflushed data and ``flush.ms`` elapsed."""
        return (
            self._log_end_offset > self._recovery_point
            and now_ms - self._last_flush_ms >= self.config.flush_ms
        )

    # ----------------------------------------------------------------------------- retention

    def delete_old_segments(self, *, now_ms: int, wall_clock_ms: int) -> int:
        """Retention by time and size (if ``cleanup.policy`` has ``delete``) and by log start offset
        (always), in that order; nothing at or above the high watermark goes (retention.py).
        Returns the number of segments deleted."""
        config = self.config
        deleted = 0
        if config.delete_retention_enabled:
            if config.retention_ms >= 0:
                deleted += self._delete_segments(
                    time_breached(config.retention_ms, wall_clock_ms), now_ms, wall_clock_ms
                )
            if config.retention_bytes >= 0 and self.size_in_bytes >= config.retention_bytes:
                predicate = size_breached(self.size_in_bytes, config.retention_bytes)
                deleted += self._delete_segments(predicate, now_ms, wall_clock_ms)
        deleted += self._delete_segments(
            log_start_offset_breached(self._log_start_offset), now_ms, wall_clock_ms
        )
        return deleted

    def _delete_segments(self, predicate: SegmentPredicate, now_ms: int, wall_clock_ms: int) -> int:
        deletable = deletable_segments(self.segments, self._log_end_offset, self._high_watermark, predicate)
        if not deletable:
            return 0
        if len(deletable) == len(self._bases):
            self.roll(now_ms=now_ms, wall_clock_ms=wall_clock_ms)  # there is always at least one segment
        # The log start offset first: its leader epoch checkpoint write is durable before any file
        # goes, so loading can tell segments retention removed from a head that went missing.
        self.maybe_increment_log_start_offset(self._bases[len(deletable)])
        self._remove_segments(deletable, now_ms=now_ms)
        return len(deletable)

    # ----------------------------------------------------------------------------- life cycle

    def close(self, *, flush: bool = False, now_ms: int = 0) -> None:
        """Write the final time index entry and pending index entries, optionally fsync everything
        (clean shutdown), and close every file."""
        active = self.active_segment
        active.on_become_inactive()
        if flush:
            self.flush(now_ms=now_ms)
            active.fsync()
        for segment in self._segments.values():
            segment.close()

    def delete(self) -> None:
        """Close and delete every file of the log, including ``.deleted`` ones and the directory."""
        for segment in self._segments.values():
            segment.close()
        self._segments.clear()
        self._bases.clear()
        self.leader_epoch_cache = LeaderEpochCache(lambda: self._log_end_offset, entries=())
        self.producer_state.truncate_fully()
        for name in self.fs.list_dir(self.directory):
            self.fs.delete_file(posixpath.join(self.directory, name))
        self.fs.delete_dir(self.directory)
