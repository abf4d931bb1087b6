"""The Log's value types and its flush job.

``LogAppendInfo``, ``LogReadInfo`` and ``LogOffsetMetadata`` are NamedTuples, not frozen dataclasses:
one is built per append or read, and a tuple costs a fifth of a frozen dataclass. They are immutable
all the same. ``FlushJob`` is the blocking half of a flush (see log.py, "Flush versus fsync").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from runtime.storage.compression import CompressionType
from runtime.storage.fs import FileSystem

__all__ = [
    "FlushJob",
    "LogAppendInfo",
    "LogOffsetMetadata",
    "LogReadInfo",
    "LogStatistics",
    "TimestampAndOffset",
]


class LogOffsetMetadata(NamedTuple):
    """An offset and where it is: the base offset of its segment and a byte position in it."""

    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1


class LogAppendInfo(NamedTuple):
    """The outcome of an append (Kafka's ``LogAppendInfo``).

    ``duplicate`` is True when an idempotent producer's retried batch was recognised: nothing was
    written and the offsets and timestamp are those of the original. ``first_offset`` is -1 when the
    input held no complete batch. ``flush_up_to_offset`` is set when a flush is due (see log.py).
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int
    log_start_offset: int
    record_count: int
    valid_bytes: int
    source_codec: CompressionType
    target_codec: CompressionType
    last_leader_epoch: int
    duplicate: bool = False
    flush_up_to_offset: int | None = None


class TimestampAndOffset(NamedTuple):
    """A record found by timestamp (Kafka's ``FileRecords.TimestampAndOffset``): its timestamp (the
    batch's max timestamp for a LogAppendTime batch), its offset, and the partition leader epoch of
    its batch (None when the batch has none, -1 on disk)."""

    timestamp: int
    offset: int
    leader_epoch: int | None


class LogReadInfo(NamedTuple):
    """Whole batches from the one holding ``fetch_offset_metadata.message_offset`` (possibly ending
    with a partial batch, which readers drop), plus the log's offsets when the read happened."""

    records: bytes
    fetch_offset_metadata: LogOffsetMetadata
    first_entry_incomplete: bool
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True, slots=True)
class LogStatistics:
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    recovery_point: int
    segment_count: int
    size_in_bytes: int
    latest_leader_epoch: int
    producer_count: int


class FlushJob:
    """fsyncs to perform off the event loop. ``run()`` may be called from any thread, any number of
    times; files deleted meanwhile are skipped (they need no durability)."""

    __slots__ = ("directory", "directory_changes", "fs", "generation", "paths", "up_to_offset")

    def __init__(
        self,
        fs: FileSystem,
        paths: tuple[str, ...],
        directory: str | None,
        *,
        up_to_offset: int,
        generation: int,
        directory_changes: int,
    ) -> None:
        self.fs = fs
        self.paths = paths
        self.directory = directory
        self.up_to_offset = up_to_offset
        self.generation = generation
        self.directory_changes = directory_changes

    def __repr__(self) -> str:
        return (
            f"FlushJob(up_to_offset={self.up_to_offset}, files={len(self.paths)}, directory={self.directory})"
        )

    @property
    def is_empty(self) -> bool:
        return not self.paths and self.directory is None

    def run(self) -> None:
        for path in self.paths:
            try:
                self.fs.fsync_path(path)
            except FileNotFoundError:
                continue
        if self.directory is not None:
            self.fs.fsync_dir(self.directory)
