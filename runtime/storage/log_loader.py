"""Opening a partition directory: find the segments, load or rebuild their indexes, recover after an
unclean shutdown (Kafka's ``Log.loadSegments`` / ``recoverLog``, docs/log.md §7).

Steps, in order:

1. Leftovers are removed: ``*.tmp`` files, ``*.deleted`` files (their deletion was pending when the
   process stopped) and index files without a ``.log``.
2. Every ``%020d.log`` becomes a segment. Its indexes are loaded and sanity-checked; a missing or
   failing index makes that segment be recovered at once (rebuilt from its batches). If that cuts
   bytes off the segment, the later segments are deleted (the log must stay a contiguous prefix).
3. Without a clean shutdown, every segment that may hold offsets at or above the recovery point is
   recovered in order: batches validated (framing, CRC, offsets), indexes rebuilt, leader epochs
   newer than the cache's latest re-assigned. At the first segment that had to be truncated, or that
   now ends below the next segment's base offset (the OS wrote the later file back first), every later
   segment is deleted and recovery stops: the log is always a contiguous prefix of what was written.
   This runs even when step 2 already cut a later segment: an earlier one may be torn as well.
   (A follower segment rolled across a leader's offset gap looks the same and is dropped too if it was
   above the recovery point; replication fetches it again.)
4. If the log ends below the log start offset, all segments go; an empty log gets one empty segment at
   the log start offset.

The recovery point the log then uses is the checkpointed one after an unclean start (the recovered
tail was validated but is not known to be on disk) and the log end offset after a clean one.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from runtime.storage.config import LogConfig
from runtime.storage.errors import CorruptIndexError, CorruptRecordError, InvalidOffsetError
from runtime.storage.fs import FileSystem
from runtime.storage.leader_epoch import LeaderEpochCache
from runtime.storage.records import BatchHeader
from runtime.storage.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    segment_file_name,
)

__all__ = ["LoadedSegments", "load_segments"]

_SEGMENT_NAME: Final = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex)$")


@dataclass(slots=True)
class LoadedSegments:
    segments: list[LogSegment]
    log_end_offset: int
    recovery_point: int
    recovered_segments: int
    truncated_bytes: int


def load_segments(
    fs: FileSystem,
    directory: str,
    config: LogConfig,
    *,
    clean_shutdown: bool,
    recovery_point: int,
    log_start_offset: int,
    leader_epoch_cache: LeaderEpochCache,
    now_ms: int,
    wall_clock_ms: int,
    roll_jitter_ms: Callable[[], int],
) -> LoadedSegments:
    _remove_leftovers(fs, directory)
    names = fs.list_dir(directory)
    log_bases = sorted(
        int(match.group(1))
        for name in names
        if (match := _SEGMENT_NAME.match(name)) and match.group(2) == LOG_SUFFIX
    )
    for name in names:
        match = _SEGMENT_NAME.match(name)
        if match and match.group(2) != LOG_SUFFIX and int(match.group(1)) not in log_bases:
            fs.delete_file(posixpath.join(directory, name))  # an orphan index

    def on_recovered_batch(header: BatchHeader) -> None:
        # Kafka 2.8 rule (epoch >= 0): batches written in epoch 0 come back too after the cache was lost.
        epoch = header.partition_leader_epoch
        latest = leader_epoch_cache.latest_epoch
        if epoch >= 0 and (latest is None or epoch > latest):
            leader_epoch_cache.assign(epoch, header.base_offset)

    segments: list[LogSegment] = []
    recovered_bases: set[int] = set()
    truncated_bytes = 0
    for position, base_offset in enumerate(log_bases):
        segment = LogSegment.open_existing(
            fs, directory, base_offset, config, now_ms=now_ms, roll_jitter_ms=roll_jitter_ms()
        )
        segments.append(segment)
        try:
            segment.load_indexes()
        except (FileNotFoundError, CorruptIndexError, InvalidOffsetError, CorruptRecordError):
            cut = _recover(segment, on_recovered_batch)
            recovered_bases.add(base_offset)
            truncated_bytes += cut
            if cut > 0:
                # A torn segment ends the log: what follows it cannot be trusted to be contiguous.
                for later_base in log_bases[position + 1 :]:
                    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                        path = posixpath.join(directory, segment_file_name(later_base, suffix))
                        if fs.exists(path):
                            fs.delete_file(path)
                break

    if not clean_shutdown:
        # Also when step 2 cut a later segment: an earlier one above the recovery point may be torn.
        for position, segment in enumerate(segments):
            following = segments[position + 1] if position + 1 < len(segments) else None
            if following is not None and following.base_offset <= recovery_point:
                continue  # Wholly below the recovery point: flushed before the crash.
            cut = 0
            if segment.base_offset not in recovered_bases:  # step 2 may have recovered it already
                cut = _recover(segment, on_recovered_batch)
                recovered_bases.add(segment.base_offset)
                truncated_bytes += cut
            # The OS writes pages back in no particular order: a later segment may have reached the
            # disk while this one lost its tail at a batch boundary. A hole is as bad as a torn batch.
            torn = cut > 0 or (following is not None and segment.read_next_offset() < following.base_offset)
            if torn:
                for later in segments[position + 1 :]:
                    _delete_now(fs, later)
                del segments[position + 1 :]
                break

    if segments and segments[-1].read_next_offset() < log_start_offset:
        for segment in segments:
            _delete_now(fs, segment)
        segments = []
    if not segments:
        segments.append(
            LogSegment.create(
                fs,
                directory,
                log_start_offset,
                config,
                now_ms=now_ms,
                wall_clock_ms=wall_clock_ms,
                roll_jitter_ms=roll_jitter_ms(),
            )
        )
    if truncated_bytes > 0 or [segment.base_offset for segment in segments] != log_bases:
        # Cut, deleted or created segment files: durable before anything is appended, as above.
        fs.fsync_dir(directory)
    log_end_offset = segments[-1].read_next_offset()
    return LoadedSegments(
        segments,
        log_end_offset,
        log_end_offset if clean_shutdown else min(recovery_point, log_end_offset),
        len(recovered_bases),
        truncated_bytes,
    )


def _recover(segment: LogSegment, on_batch: Callable[[BatchHeader], None]) -> int:
    try:
        cut = segment.recover(on_batch)
    except InvalidOffsetError:
        # Kafka: an offset that cannot be indexed empties the segment.
        cut = segment.truncate_to(segment.base_offset, now_ms=segment.created_ms)
    if cut > 0:
        # Durable before anything is appended after it: otherwise a second power loss could bring
        # the cut bytes back, and recovery would then cut at them again, losing what was appended
        # (and flushed) in between.
        segment.fsync()
    return cut


def _remove_leftovers(fs: FileSystem, directory: str) -> None:
    for name in fs.list_dir(directory):
        if name.endswith((".tmp", DELETED_SUFFIX, ".cleaned", ".swap")):
            path = posixpath.join(directory, name)
            if not fs.is_dir(path):
                fs.delete_file(path)


def _delete_now(fs: FileSystem, segment: LogSegment) -> None:
    segment.close()
    for path in segment.file_paths():
        if fs.exists(path):
            fs.delete_file(path)
