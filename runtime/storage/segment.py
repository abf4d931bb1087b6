"""LogSegment: one ``%020d.log`` file of batches with its sparse ``.index`` and ``.timeindex``.

Rules kept here (Kafka's ``LogSegment``, docs/log.md §2-§7):

* Appends go to the end of the ``.log`` through an unbuffered handle. *Before* writing, if more than
  ``index.interval.bytes`` were appended since the last index entry, the offset index gets
  ``(largest offset of this append, position where it starts)`` and the time index
  ``(max timestamp so far, its offset)``. The first append into a segment is never indexed.
* ``translate_offset(offset)`` starts at the index's floor entry and walks batch headers to the first
  batch whose *last* offset is >= the target; reads return whole batches from there.
* ``find_offset_by_timestamp(timestamp, starting_offset)`` (Kafka's ``findOffsetByTimestamp``): the
  time index's entry with the largest timestamp <= the target gives an offset, the offset index the
  position of the batch holding ``max(that offset, starting_offset)``; from there the first record
  (not batch) with a timestamp >= the target and an offset >= ``starting_offset`` is the answer,
  with the record's timestamp (the batch's max timestamp in a LogAppendTime batch) and its batch's
  partition leader epoch (docs/log.md §11).
* Rolling decisions (``should_roll``) use the first batch's max timestamp when it is >= 0, else the
  segment's creation time on the monotonic clock; ``roll_jitter_ms`` is fixed at creation.
* ``recover()`` rebuilds the indexes from the batches, validating each (framing, CRC, offsets), and
  truncates the file at the first invalid byte. ``first_invalid_batch()`` applies the same checks
  without changing anything (the active segment's check at a clean start, log_loader.py): one rule
  for what a valid batch is, so the check finds exactly where ``recover()`` would cut.
* The timestamps used for the time index and retention are batch max timestamps paired with the
  batch's last offset, whichever path (leader, follower, recovery) appended the batch, so every
  replica and every restart produces the same ``.timeindex``.
"""

from __future__ import annotations

import posixpath
import struct
from collections.abc import Callable, Iterator
from typing import Final, NamedTuple

from runtime.storage.config import LogConfig
from runtime.storage.errors import CorruptIndexError, CorruptRecordError, InvalidOffsetError
from runtime.storage.fs import FileHandle, FileSystem
from runtime.storage.index import PENDING_WRITE_THRESHOLD, OffsetIndex, TimeIndex
from runtime.storage.log_types import TimestampAndOffset
from runtime.storage.records import (
    HEADER_STRUCT,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    RecordBatch,
    TimestampType,
    decode_records,
    iterate_batches,
)

__all__ = [
    "DELETED_SUFFIX",
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "LogSegment",
    "SegmentDamage",
    "SegmentPosition",
    "SegmentRecovery",
    "read_file_batches",
    "segment_file_name",
]

LOG_SUFFIX: Final = ".log"
INDEX_SUFFIX: Final = ".index"
TIME_INDEX_SUFFIX: Final = ".timeindex"
DELETED_SUFFIX: Final = ".deleted"
INT32_MAX: Final = 2_147_483_647
_SCAN_WINDOW: Final = 8192
_RECOVERY_CHUNK: Final = 1 << 20
_HEADER_PREFIX: Final = struct.Struct(">qi")


def segment_file_name(base_offset: int, suffix: str) -> str:
    """``00000000000000368769.log``: the base offset as 20 zero-padded digits, then the suffix."""
    return f"{base_offset:020d}{suffix}"


class SegmentPosition(tuple[int, int, int]):
    """Where ``translate_offset`` found a batch: ``(last_offset, position, size)``."""

    __slots__ = ()

    def __new__(cls, last_offset: int, position: int, size: int) -> SegmentPosition:
        return super().__new__(cls, (last_offset, position, size))

    @property
    def last_offset(self) -> int:
        return self[0]

    @property
    def position(self) -> int:
        return self[1]

    @property
    def size(self) -> int:
        return self[2]


class SegmentDamage(NamedTuple):
    """Where a segment stops holding valid batches, and why."""

    position: int  # the byte at which the first invalid (or incomplete) batch starts
    next_offset: int  # the offset after the last valid batch: the log end offset after a cut there
    cause: str  # what kind of damage, for a summary line: "a CRC mismatch", "a batch cut short", ...
    problem: str  # the details: positions, offsets, stored and computed CRC


class SegmentRecovery(NamedTuple):
    """What ``LogSegment.recover`` did."""

    truncated_bytes: int
    # Why validation stopped before the end of the file; None when every byte held a valid batch.
    damage: SegmentDamage | None
    # The complete batches the cut bytes framed (the invalid one first, CRCs not checked), or None
    # when their framing could not be followed to the end of the file.
    truncated_batches: int | None


class _InvalidBatch(Exception):
    def __init__(self, cause: str, problem: str) -> None:
        super().__init__(problem)
        self.cause = cause
        self.problem = problem


class LogSegment:
    def __init__(
        self,
        fs: FileSystem,
        directory: str,
        base_offset: int,
        config: LogConfig,
        log_file: FileHandle,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        *,
        created_ms: int,
        roll_jitter_ms: int,
    ) -> None:
        self.fs = fs
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self.log_file = log_file
        self.offset_index = offset_index
        self.time_index = time_index
        self.created_ms = created_ms
        self.roll_jitter_ms = roll_jitter_ms
        self.bytes_since_last_index_entry = 0
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = base_offset
        self.last_modified_ms = 0
        # Max timestamp of the first append (Kafka's rollingBasedTimestamp); None = not known yet.
        self._rolling_based_timestamp: int | None = None
        self._index_interval_bytes = config.index_interval_bytes
        self._segment_bytes = config.segment_bytes
        self._segment_ms = config.segment_ms

    # ------------------------------------------------------------------------- life cycle

    @classmethod
    def create(
        cls,
        fs: FileSystem,
        directory: str,
        base_offset: int,
        config: LogConfig,
        *,
        now_ms: int,
        wall_clock_ms: int,
        roll_jitter_ms: int,
    ) -> LogSegment:
        """A new, empty segment (an existing ``.log`` at that offset is emptied)."""
        log_path = posixpath.join(directory, segment_file_name(base_offset, LOG_SUFFIX))
        fs.write_file(log_path, b"", fsync=False)
        segment = cls(
            fs,
            directory,
            base_offset,
            config,
            fs.open(log_path),
            OffsetIndex.create(
                fs,
                posixpath.join(directory, segment_file_name(base_offset, INDEX_SUFFIX)),
                base_offset,
                config.segment_index_bytes,
            ),
            TimeIndex.create(
                fs,
                posixpath.join(directory, segment_file_name(base_offset, TIME_INDEX_SUFFIX)),
                base_offset,
                config.segment_index_bytes,
            ),
            created_ms=now_ms,
            roll_jitter_ms=roll_jitter_ms,
        )
        segment.last_modified_ms = wall_clock_ms
        return segment

    @classmethod
    def open_existing(
        cls,
        fs: FileSystem,
        directory: str,
        base_offset: int,
        config: LogConfig,
        *,
        now_ms: int,
        roll_jitter_ms: int,
    ) -> LogSegment:
        """Open a segment's files. Indexes start empty: call ``load_indexes`` or ``recover`` next."""
        log_path = posixpath.join(directory, segment_file_name(base_offset, LOG_SUFFIX))
        segment = cls(
            fs,
            directory,
            base_offset,
            config,
            fs.open(log_path),
            OffsetIndex(
                fs,
                posixpath.join(directory, segment_file_name(base_offset, INDEX_SUFFIX)),
                base_offset,
                config.segment_index_bytes,
            ),
            TimeIndex(
                fs,
                posixpath.join(directory, segment_file_name(base_offset, TIME_INDEX_SUFFIX)),
                base_offset,
                config.segment_index_bytes,
            ),
            created_ms=now_ms,
            roll_jitter_ms=roll_jitter_ms,
        )
        segment.last_modified_ms = fs.modified_ms(log_path)
        return segment

    def update_config(self, config: LogConfig) -> None:
        """A topic config change: roll, index spacing and sizes apply from now on."""
        self.config = config
        self._index_interval_bytes = config.index_interval_bytes
        self._segment_bytes = config.segment_bytes
        self._segment_ms = config.segment_ms

    def load_indexes(self) -> None:
        """Load and sanity-check both index files (``CorruptIndexError``/``FileNotFoundError`` mean
        the caller must ``recover()`` instead), then the largest timestamp."""
        self.offset_index = OffsetIndex.load(
            self.fs, self.offset_index.path, self.base_offset, self.config.segment_index_bytes, self.size
        )
        self.time_index = TimeIndex.load(
            self.fs, self.time_index.path, self.base_offset, self.config.segment_index_bytes
        )
        next_offset = self.read_next_offset()
        if self.time_index.entries and self.time_index.last_entry.offset >= next_offset:
            raise CorruptIndexError(f"time index {self.time_index.path} points past the end of its segment")
        if self.offset_index.entries and self.offset_index.last_offset >= next_offset:
            raise CorruptIndexError(
                f"offset index {self.offset_index.path} points past the end of its segment"
            )
        self._load_largest_timestamp()

    @property
    def log_path(self) -> str:
        return self.log_file.path

    @property
    def size(self) -> int:
        return self.log_file.size

    def file_paths(self) -> tuple[str, str, str]:
        return (self.log_file.path, self.offset_index.path, self.time_index.path)

    def write_pending_index_entries(self) -> None:
        self.offset_index.write_pending()
        self.time_index.write_pending()

    def fsync(self) -> None:
        """Make the segment's files durable now, on the calling thread (after a cut: truncation and
        recovery, both rare; appended data is flushed through ``FlushJob`` off the event loop)."""
        self.write_pending_index_entries()
        for path in self.file_paths():
            self.fs.fsync_path(path)

    def on_become_inactive(self) -> None:
        """Called when rolled away from (and on close): the final time index entry, indexes written."""
        self.time_index.maybe_append(
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
        )
        self.write_pending_index_entries()

    def close(self) -> None:
        self.write_pending_index_entries()
        self.offset_index.close()
        self.time_index.close()
        self.log_file.close()

    def rename_for_deletion(self) -> list[str]:
        """Close the files and rename each to ``<name>.deleted``; return the new paths."""
        self.offset_index.close()
        self.time_index.close()
        self.log_file.close()
        renamed: list[str] = []
        for path in self.file_paths():
            if self.fs.exists(path):
                target = path + DELETED_SUFFIX
                if self.fs.exists(target):
                    self.fs.delete_file(target)
                self.fs.rename(path, target)
                renamed.append(target)
        return renamed

    # ---------------------------------------------------------------------------- appending

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        offset_of_max_timestamp: int,
        parts: list[bytes | bytearray | memoryview],
        size: int,
        wall_clock_ms: int = 0,
    ) -> None:
        """Write already-validated batches (``parts`` back to back, ``size`` bytes in all) and index
        them sparsely (hot path: kept lean)."""
        if not size:
            return
        log_file = self.log_file
        physical_position = log_file.size
        if physical_position == 0:
            self._rolling_based_timestamp = largest_timestamp
        relative = largest_offset - self.base_offset
        if relative < 0 or relative > INT32_MAX:
            raise InvalidOffsetError(
                f"offset {largest_offset} cannot be stored in segment {self.base_offset} (relative "
                "offset overflow)"
            )
        if len(parts) == 1:
            log_file.write(parts[0])
        else:
            log_file.writev(parts, size)
        if largest_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = largest_timestamp
            self.offset_of_max_timestamp_so_far = offset_of_max_timestamp
        if self.bytes_since_last_index_entry > self._index_interval_bytes:
            self._add_index_entries(relative, physical_position)
            self.bytes_since_last_index_entry = size
        else:
            self.bytes_since_last_index_entry += size
        if wall_clock_ms:
            self.last_modified_ms = wall_clock_ms

    def _add_index_entries(self, relative_offset: int, physical_position: int) -> None:
        """``OffsetIndex.append`` and ``TimeIndex.maybe_append`` for the append path, in one call.
        With batches above ``index.interval.bytes`` this runs on every append, hence inlined."""
        offset_index = self.offset_index
        keys = offset_index.keys
        if keys and relative_offset <= keys[-1]:
            raise InvalidOffsetError(
                f"attempt to append offset {self.base_offset + relative_offset} to index {offset_index.path} "
                f"whose last offset is {offset_index.last_offset}"
            )
        if len(keys) >= offset_index.max_entries:
            raise AssertionError(f"attempt to append to a full index {offset_index.path}")
        keys.append(relative_offset)
        offset_index.values.append(physical_position)
        time_index = self.time_index
        timestamps = time_index.keys
        max_timestamp = self.max_timestamp_so_far
        if timestamps:
            if max_timestamp > timestamps[-1]:
                relative_of_max = self.offset_of_max_timestamp_so_far - self.base_offset
                if relative_of_max >= time_index.values[-1] and len(timestamps) < time_index.max_entries:
                    # What maybe_append would do after its checks, which hold here.
                    timestamps.append(max_timestamp)
                    time_index.values.append(relative_of_max)
                else:
                    time_index.maybe_append(max_timestamp, self.offset_of_max_timestamp_so_far)  # raises
        else:
            time_index.maybe_append(max_timestamp, self.offset_of_max_timestamp_so_far)
        if len(keys) - offset_index.written >= PENDING_WRITE_THRESHOLD:
            offset_index.write_pending()
        if len(timestamps) - time_index.written >= PENDING_WRITE_THRESHOLD:
            time_index.write_pending()

    # ------------------------------------------------------------------------------ rolling

    def time_waited_for_roll(self, now_ms: int, max_timestamp_in_messages: int) -> int:
        rolling_based = self._rolling_based_timestamp  # known after the first append or load
        if rolling_based is None:
            rolling_based = self._load_first_batch_timestamp()
        if rolling_based is not None and rolling_based >= 0:
            return max_timestamp_in_messages - rolling_based
        return now_ms - self.created_ms

    def should_roll(
        self, messages_size: int, max_timestamp_in_messages: int, max_offset_in_messages: int, now_ms: int
    ) -> bool:
        """Kafka's ``LogSegment.shouldRoll`` (docs/log.md §5); the log asks before every append."""
        size = self.log_file.size
        if size > self._segment_bytes - messages_size:
            return True
        if size > 0 and (
            self.time_waited_for_roll(now_ms, max_timestamp_in_messages)
            > self._segment_ms - self.roll_jitter_ms
        ):
            return True
        relative = max_offset_in_messages - self.base_offset
        return (
            len(self.offset_index.keys) >= self.offset_index.max_entries
            or len(self.time_index.keys) >= self.time_index.max_entries
            or relative < 0
            or relative > INT32_MAX
        )

    def _load_first_batch_timestamp(self) -> int | None:
        if self._rolling_based_timestamp is None and self.size >= RECORD_BATCH_OVERHEAD:
            header = HEADER_STRUCT.unpack_from(self.log_file.pread(RECORD_BATCH_OVERHEAD, 0))
            self._rolling_based_timestamp = int(header[8])
        return self._rolling_based_timestamp

    # ------------------------------------------------------------------------------ reading

    def iterate_headers(
        self, start_position: int = 0, end_position: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """Yield ``(position, header)`` for each complete batch from ``start_position``, reading only
        headers (in windows of a few KiB). Stops at a partial batch; CRCs are not checked."""
        end = self.size if end_position is None else end_position
        position = start_position
        window = b""
        window_start = position
        while end - position >= RECORD_BATCH_OVERHEAD:
            relative = position - window_start
            if relative + RECORD_BATCH_OVERHEAD > len(window):
                window = self.log_file.pread(min(_SCAN_WINDOW, end - position), position)
                window_start = position
                relative = 0
                if len(window) < RECORD_BATCH_OVERHEAD:
                    return
            header = BatchHeader._make(HEADER_STRUCT.unpack_from(window, relative))
            if header.batch_length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
                raise CorruptRecordError(
                    f"{self.log_path}: batch at byte {position} declares length {header.batch_length}, "
                    f"below the minimum {RECORD_BATCH_OVERHEAD - LOG_OVERHEAD}"
                )
            size = header.batch_length + LOG_OVERHEAD
            if position + size > end:
                return
            yield position, header
            position += size

    def translate_offset(self, offset: int, starting_position: int = 0) -> SegmentPosition | None:
        """The first batch at or after ``starting_position`` whose last offset is >= ``offset``."""
        mapping = self.offset_index.lookup(offset)
        start = max(mapping.position, starting_position)
        for position, header in self.iterate_headers(start):
            last_offset = header.base_offset + header.last_offset_delta
            if last_offset >= offset:
                return SegmentPosition(last_offset, position, header.batch_length + LOG_OVERHEAD)
        return None

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> TimestampAndOffset | None:
        """The first record at or after ``starting_offset`` in this segment whose timestamp is >=
        ``timestamp``, or None (Kafka's ``LogSegment.findOffsetByTimestamp``).

        The time index entry with the largest timestamp <= the target names an offset below which
        every record's timestamp is at most that entry's (a time index entry is the segment's max
        timestamp so far and the offset where it was first reached), so no record before the batch
        holding that offset can qualify; the offset index gives that batch's position. The scan
        from there is exact: the result is the smallest qualifying offset, however the timestamps
        are ordered, not an approximation from the sparse index."""
        indexed = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(indexed.offset, starting_offset)).position
        return self.search_for_timestamp(timestamp, position, starting_offset)

    def search_for_timestamp(
        self, target_timestamp: int, starting_position: int, starting_offset: int
    ) -> TimestampAndOffset | None:
        """Kafka's ``FileRecords.searchForTimestamp``: from the batch at ``starting_position`` on,
        the first record whose timestamp is >= the target and whose offset is >= ``starting_offset``.
        Only batches whose max timestamp reaches the target are decoded. A record of a LogAppendTime
        batch has the batch's max timestamp (the time the leader appended it), as Kafka's readers
        see it. CRCs are not checked (nor are they by Kafka's search); bytes that cannot be
        decoded raise ``CorruptRecordError``."""
        for position, header in self.iterate_headers(starting_position):
            if header.max_timestamp < target_timestamp or header.last_offset < starting_offset:
                continue
            log_append_time = header.timestamp_type is TimestampType.LOG_APPEND_TIME
            data = self.log_file.pread(header.size_in_bytes, position)
            for record in decode_records(header, data, position):
                record_timestamp = header.max_timestamp if log_append_time else record.timestamp
                if record_timestamp >= target_timestamp and record.offset >= starting_offset:
                    epoch = header.partition_leader_epoch
                    return TimestampAndOffset(
                        record_timestamp, record.offset, None if epoch == NO_PARTITION_LEADER_EPOCH else epoch
                    )
        return None

    def read(
        self, start_offset: int, max_size: int, max_position: int | None = None, min_one_message: bool = False
    ) -> tuple[int, bytes, bool] | None:
        """``(start position, bytes, first_entry_incomplete)`` or None if no batch in this segment
        has a last offset >= ``start_offset``. The bytes are whole batches from that batch on, at most
        ``max_size`` (at least the first batch with ``min_one_message``) and never past ``max_position``."""
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size} for a log read from segment {self.log_path}")
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        limit = self.size if max_position is None else max_position
        adjusted_max_size = max(max_size, found.size) if min_one_message else max_size
        if adjusted_max_size == 0:
            return found.position, b"", False
        fetch_size = max(min(limit - found.position, adjusted_max_size), 0)
        data = self.log_file.pread(fetch_size, found.position) if fetch_size else b""
        return found.position, data, adjusted_max_size < found.size

    def read_next_offset(self) -> int:
        """The offset after the last batch (base offset if empty), read from the last index entry on."""
        next_offset = self.base_offset
        for _position, header in self.iterate_headers(self.offset_index.lookup(2**63 - 1).position):
            next_offset = header.base_offset + header.last_offset_delta + 1
        return next_offset

    def batches(self, start_position: int = 0) -> Iterator[RecordBatch]:
        """Complete batches from ``start_position``, bytes included, read in large chunks."""
        return read_file_batches(self.log_file, start_position)

    # --------------------------------------------------------------------- recovery, truncation

    def _valid_batches(self) -> Iterator[RecordBatch]:
        """The batches from the first byte on, each checked as recovery checks it: framing (length,
        magic, codec), CRC, and offsets that fit this segment and do not go backwards. Raises
        ``_InvalidBatch`` at the first invalid batch; stops quietly at an incomplete one."""
        batches = self.batches()
        next_offset = self.base_offset
        while True:
            try:
                batch = next(batches, None)
            except CorruptRecordError as error:
                raise _InvalidBatch("a batch that cannot be framed", str(error)) from error
            if batch is None:
                return
            try:
                batch.ensure_valid()
            except CorruptRecordError as error:
                raise _InvalidBatch("a CRC mismatch", str(error)) from error
            header = batch.header
            # Base offset and length lie outside the CRC: offsets are checked on their own.
            if (
                not self.can_convert_to_relative_offset(header.last_offset)
                or header.base_offset < next_offset
            ):
                raise _InvalidBatch(
                    "offsets that do not fit the segment",
                    f"batch at byte {batch.position} has offsets {header.base_offset}..{header.last_offset}, "
                    f"not at or after offset {next_offset} of segment {self.base_offset}",
                )
            next_offset = header.last_offset + 1
            yield batch

    def _damage_at(
        self, valid_bytes: int, next_offset: int, error: _InvalidBatch | None
    ) -> SegmentDamage | None:
        if error is not None:
            return SegmentDamage(valid_bytes, next_offset, error.cause, error.problem)
        if valid_bytes == self.size:
            return None
        return SegmentDamage(
            valid_bytes,
            next_offset,
            "a batch cut short",
            f"bytes {valid_bytes}..{self.size - 1} do not hold a complete batch",
        )

    def first_invalid_batch(self) -> SegmentDamage | None:
        """Where ``recover()`` would cut, or None when every byte holds a valid batch. Reads the whole
        file once and changes nothing (not even the indexes)."""
        valid_bytes = 0
        next_offset = self.base_offset
        try:
            for batch in self._valid_batches():
                valid_bytes = batch.position + batch.size_in_bytes
                next_offset = batch.header.last_offset + 1
        except _InvalidBatch as error:
            return self._damage_at(valid_bytes, next_offset, error)
        return self._damage_at(valid_bytes, next_offset, None)

    def recover(self, on_batch: Callable[[BatchHeader], None]) -> SegmentRecovery:
        """Rebuild the indexes from the batches, stopping at the first invalid one, and truncate the
        file there. ``on_batch`` sees every valid batch header (epoch cache, producer state)."""
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = self.base_offset
        valid_bytes = 0
        next_offset = self.base_offset
        last_index_entry = 0
        invalid: _InvalidBatch | None = None
        try:
            for batch in self._valid_batches():
                header = batch.header
                if header.max_timestamp > self.max_timestamp_so_far:
                    self.max_timestamp_so_far = header.max_timestamp
                    self.offset_of_max_timestamp_so_far = header.last_offset
                if valid_bytes - last_index_entry > self.config.index_interval_bytes:
                    self.offset_index.append(header.last_offset, valid_bytes)
                    self.time_index.maybe_append(
                        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far
                    )
                    last_index_entry = valid_bytes
                valid_bytes += header.size_in_bytes
                next_offset = header.last_offset + 1
                on_batch(header)
        except _InvalidBatch as error:
            invalid = error  # Everything from the first invalid batch on is cut below.
        except InvalidOffsetError as error:  # the index refused the batch's offset: cut there too
            invalid = _InvalidBatch("an offset that cannot be indexed", str(error))
        damage = self._damage_at(valid_bytes, next_offset, invalid)
        truncated = self.size - valid_bytes
        truncated_batches = self._count_batches(valid_bytes) if truncated else 0
        self.log_file.truncate(valid_bytes)
        self.time_index.maybe_append(
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
        )
        self.bytes_since_last_index_entry = valid_bytes - last_index_entry if valid_bytes else 0
        self._rolling_based_timestamp = None
        return SegmentRecovery(truncated, damage, truncated_batches)

    def _count_batches(self, start_position: int) -> int | None:
        """The complete batches from ``start_position`` to the end of the file, by their headers
        only; None when the framing cannot be followed to the end (what the operator is told)."""
        count = 0
        end = start_position
        try:
            for position, header in self.iterate_headers(start_position):
                count += 1
                end = position + header.size_in_bytes
        except CorruptRecordError:
            return None
        return count if end == self.size else None

    def truncate_to(self, offset: int, *, now_ms: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; return the bytes removed."""
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        truncated = 0
        if mapping is not None:
            truncated = self.size - mapping.position
            self.log_file.truncate(mapping.position)
        if self.size == 0:
            self.created_ms = now_ms
            self._rolling_based_timestamp = None
        self.bytes_since_last_index_entry = 0
        if self.max_timestamp_so_far >= 0:
            self._load_largest_timestamp()
        return truncated

    def _load_largest_timestamp(self) -> None:
        last = self.time_index.last_entry
        self.max_timestamp_so_far = last.timestamp
        self.offset_of_max_timestamp_so_far = last.offset
        start = self.offset_index.lookup(last.offset).position
        for _position, header in self.iterate_headers(start):
            if header.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = header.max_timestamp
                self.offset_of_max_timestamp_so_far = header.last_offset

    @property
    def largest_timestamp(self) -> int:
        """Max record timestamp in the segment, or its last modification time if none (retention)."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return self.last_modified_ms


def read_file_batches(handle: FileHandle, start_position: int = 0) -> Iterator[RecordBatch]:
    """The complete batches of a ``.log`` file from ``start_position``, read in 1 MiB chunks (a batch
    larger than a chunk is read whole). Stops at a partial batch; ``CorruptRecordError`` (with file
    positions) for framing that cannot be followed. CRCs are not checked."""
    position = start_position
    end = handle.size
    while position < end:
        chunk = handle.pread(_RECOVERY_CHUNK, position)
        if len(chunk) >= LOG_OVERHEAD:
            (_, batch_length) = _HEADER_PREFIX.unpack_from(chunk, 0)
            if batch_length + LOG_OVERHEAD > len(chunk) and position + batch_length + LOG_OVERHEAD <= end:
                chunk = handle.pread(batch_length + LOG_OVERHEAD, position)
        consumed = 0
        for batch in iterate_batches(chunk, file_position=position):
            consumed = batch.position - position + batch.size_in_bytes
            yield batch
        if consumed == 0:
            return  # A partial batch at the end.
        position += consumed
