"""Opening a partition directory: find the segments, check they form one log, load or rebuild their
indexes, recover after an unclean shutdown (Kafka's ``Log.loadSegments`` / ``recoverLog``, made
stricter: docs/log.md §7).

Steps, in order:

1. Leftovers are removed: ``*.tmp`` files, ``*.deleted`` files (their deletion was pending when the
   process stopped) and index files without a ``.log``.
2. Every ``%020d.log`` must hold what its name says: a file whose first (CRC-valid) batch does not
   start at the offset of its name (a copy, a renamed file) is moved aside, never truncated.
3. Every remaining segment's indexes are loaded and sanity-checked; a missing or failing index, or
   bytes after the last complete batch (a file cut short), make that segment be recovered at once
   (rebuilt from its batches). If that cuts bytes off the segment, the later segments are moved
   aside (the log must stay a contiguous prefix).
4. Without a clean shutdown, every segment that may hold offsets at or above the recovery point is
   recovered in order: batches validated (framing, CRC, offsets), indexes rebuilt, leader epochs
   newer than the cache's latest re-assigned. At the first segment that had to be truncated every
   later segment is moved aside and recovery stops. This runs even when step 3 already cut a later
   segment: an earlier one may be torn as well. After a clean shutdown the active (last) segment's
   batches are checked the same way, without changing anything; at the first invalid batch that
   segment is recovered as above (cut there, indexes rebuilt). Older segments are not read: a full
   scan of the log at every start costs too much (Kafka checks nothing after a clean shutdown).
5. The segments must follow each other exactly: each one's base offset is the previous one's next
   offset. At the first overlap or gap, that segment and every later one are moved aside (no
   compaction here, so offsets are contiguous; a hole is what a power loss leaves when the OS wrote
   a later segment back before an earlier one's tail).
6. The head: when the leader epoch checkpoint says the log starts below its first segment, the head's
   files are gone; the log is not kept without them (every segment moved aside, the log empty there).
7. A log start offset beyond the log end is trusted only when a cut explains it (a power loss after
   retention or DeleteRecords moved it up: every record left was deleted, the log starts over there,
   as in Kafka); otherwise the entry is ignored: records are never deleted because a checkpoint says
   so. An empty log gets one empty segment at the log start offset, or, when every file was moved
   aside, at the lowest offset they held: a follower then re-fetches from there whatever the leader
   still has.

Offsets below the recovery point that the loaded log no longer holds were on disk: that is reported
as records missing from this replica (a follower re-fetches them; a leader has lost them).

"Moved aside" is a rename to ``<name>.stray`` with the files' bytes intact; every action is logged at
WARN with partition, file, byte and offset ranges and counted (log_recovery.py). The loaded log is
always a prefix of what the files held, and the report says from which offset on it was cut.

The recovery point the log then uses is the checkpointed one after an unclean start (the recovered
tail was validated but is not known to be on disk) and the log end offset after a clean one.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from runtime.storage.checkpoint import LOG_START_OFFSET_CHECKPOINT
from runtime.storage.config import LogConfig
from runtime.storage.errors import CorruptIndexError, CorruptRecordError, InvalidOffsetError
from runtime.storage.fs import FileSystem
from runtime.storage.leader_epoch import LeaderEpochCache
from runtime.storage.log_recovery import RecoveryAction, RecoveryKind, RecoveryReport
from runtime.storage.records import BatchHeader, iterate_batches
from runtime.storage.segment import (
    DELETED_SUFFIX,
    LOG_SUFFIX,
    LogSegment,
)

__all__ = ["STRAY_SUFFIX", "LoadedSegments", "load_segments"]

_SEGMENT_NAME: Final = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex)$")
# A file that does not fit the log is renamed with this suffix: out of the log, its bytes kept.
STRAY_SUFFIX: Final = ".stray"


@dataclass(slots=True)
class LoadedSegments:
    segments: list[LogSegment]
    log_end_offset: int
    recovery_point: int
    log_start_offset: int


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
    report: RecoveryReport,
) -> LoadedSegments:
    partition = posixpath.basename(directory)
    # An empty directory is a new log (or one that never got a file): nothing in it to repair.
    untouched = not fs.list_dir(directory)
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
            fs.delete_file(posixpath.join(directory, name))  # an orphan index: it holds no records

    def on_recovered_batch(header: BatchHeader) -> None:
        # Kafka 2.8 rule (epoch >= 0): batches written in epoch 0 come back too after the cache was lost.
        epoch = header.partition_leader_epoch
        latest = leader_epoch_cache.latest_epoch
        if epoch >= 0 and (latest is None or epoch > latest):
            leader_epoch_cache.assign(epoch, header.base_offset)

    loader = _Loader(fs, partition, report, on_recovered_batch)

    # Step 2: every file must hold what its name says.
    segments: list[LogSegment] = []
    for base_offset in log_bases:
        segment = LogSegment.open_existing(
            fs, directory, base_offset, config, now_ms=now_ms, roll_jitter_ms=roll_jitter_ms()
        )
        misfit = _misfit(segment)
        if misfit is None:
            segments.append(segment)
        else:
            loader.move_aside([segment], misfit, cut_from_offset=None)

    # Step 3: indexes loaded, or rebuilt from the batches when missing or failing their checks.
    recovered_bases: set[int] = set()
    for position, segment in enumerate(segments):
        try:
            segment.load_indexes()
            problem = _partial_tail(segment)
        except (FileNotFoundError, CorruptIndexError, InvalidOffsetError, CorruptRecordError) as error:
            problem = f"its indexes could not be used ({error})"
        if problem is not None:
            cut = loader.recover(segment, problem)
            recovered_bases.add(segment.base_offset)
            if cut > 0:
                # A torn segment ends the log: what follows it cannot be trusted to be contiguous.
                loader.move_aside(
                    segments[position + 1 :],
                    f"segment {segment.base_offset} was cut at offset {segment.read_next_offset()}",
                    cut_from_offset=segment.read_next_offset(),
                )
                del segments[position + 1 :]
                break

    # Step 4: after an unclean shutdown, everything that may not have been flushed is re-validated.
    if not clean_shutdown:
        # Also when step 3 cut a later segment: an earlier one above the recovery point may be torn.
        for position, segment in enumerate(segments):
            following = segments[position + 1] if position + 1 < len(segments) else None
            if following is not None and following.base_offset <= recovery_point:
                continue  # Wholly below the recovery point: flushed before the crash.
            cut = 0
            if segment.base_offset not in recovered_bases:  # step 3 may have recovered it already
                cut = loader.recover(
                    segment, f"unflushed after an unclean shutdown (recovery point {recovery_point})"
                )
                recovered_bases.add(segment.base_offset)
            if cut > 0 and following is not None:
                end = segment.read_next_offset()
                loader.move_aside(
                    segments[position + 1 :],
                    f"segment {segment.base_offset} was cut at offset {end}",
                    cut_from_offset=end,
                )
                del segments[position + 1 :]
                break

    # Step 4, after a clean shutdown: the active segment's batches are CRC-checked all the same. A
    # clean shutdown proves the process wrote and flushed them, not that the bytes are still what
    # it wrote (a bad sector, a stray write, a copy gone wrong while the broker was stopped); and
    # the active segment is the one a restarted replica serves first, to followers and consumers
    # alike. One read of at most segment.bytes; older segments are not read (docs/log.md §7).
    elif segments and segments[-1].base_offset not in recovered_bases:
        active = segments[-1]
        damage = active.first_invalid_batch()
        if damage is not None:
            # Recovered as after an unclean shutdown: cut at that batch, indexes rebuilt. The lost
            # tail lies below the recovery point, so it is reported as records missing, and the
            # replica fetches it again from the leader like any follower that truncated.
            loader.recover(
                active,
                f"checked after a clean shutdown: byte {damage.position} (offset {damage.next_offset}) "
                f"starts an invalid batch",
            )
            recovered_bases.add(active.base_offset)

    # Step 5: the segments must follow each other without overlap or gap (a hole is as bad as a torn
    # batch: the OS writes pages back in no particular order, so a later segment may have reached the
    # disk while an earlier one lost its tail at a batch boundary).
    for position in range(1, len(segments)):
        end = segments[position - 1].read_next_offset()
        base_offset = segments[position].base_offset
        if end != base_offset:
            problem = (
                f"the segment before it ends at offset {end}, past its base offset {base_offset}"
                if end > base_offset
                else f"offsets {end}..{base_offset - 1} are missing before it"
            )
            loader.move_aside(segments[position:], problem, cut_from_offset=end)
            del segments[position:]
            break

    # Step 6: the head. The leader epoch checkpoint names the first offset the log holds (retention,
    # DeleteRecords and full truncations make it durable before removing any file): a first segment
    # above it means the head's files are gone, and a log without its head is not kept: it starts
    # empty there, so that a follower re-fetches all of it.
    empty_start: int | None = None
    earliest = leader_epoch_cache.earliest_entry
    if segments and earliest is not None and earliest.start_offset < segments[0].base_offset:
        loader.move_aside(
            segments,
            f"the leader epoch checkpoint says the log holds offsets from {earliest.start_offset}, "
            f"but its first segment starts at {segments[0].base_offset}: the head is missing",
            cut_from_offset=earliest.start_offset,
        )
        segments = []
        empty_start = earliest.start_offset

    # Step 7: the log start offset must lie within the log. Below it after a cut is what a power
    # loss leaves when the log start offset had moved up (DeleteRecords, retention) and the tail above
    # it was not flushed: every record left was deleted already, so the log starts over there, as in
    # Kafka. Without a cut the checkpoint contradicts the log and is not trusted: records are never
    # deleted because a checkpoint says so.
    effective_log_start_offset = log_start_offset
    end = segments[-1].read_next_offset() if segments else log_start_offset
    if end < log_start_offset:
        first = segments[0].base_offset
        if loader.lost_records:
            loader.delete_below_log_start(segments, log_start_offset, end)
            segments = []
            empty_start = log_start_offset
        else:
            report.record(
                RecoveryAction(
                    RecoveryKind.CHECKPOINT_REBUILT,
                    partition,
                    posixpath.join(posixpath.dirname(directory), LOG_START_OFFSET_CHECKPOINT),
                    f"log start offset {log_start_offset} is beyond the log end offset {end}, and nothing "
                    f"was cut: entry ignored, the log keeps offsets {first}..{end - 1}",
                )
            )
            effective_log_start_offset = first
    if not segments:
        # Nothing left (a new log, or every file moved aside): empty, at the lowest offset the
        # files named, so a follower re-fetches everything the leader still has from there.
        start = effective_log_start_offset
        if empty_start is not None:
            start = effective_log_start_offset = empty_start
        elif loader.moved_bases:
            start = min(min(loader.moved_bases), start)
            effective_log_start_offset = start
        segments.append(
            LogSegment.create(
                fs,
                directory,
                start,
                config,
                now_ms=now_ms,
                wall_clock_ms=wall_clock_ms,
                roll_jitter_ms=roll_jitter_ms(),
            )
        )
    # Cut, moved, or created segment files: durable before anything is appended, as above. Except a
    # new log's first files (docs/log.md §8): nothing depends on their entries before the log's first
    # flush, which syncs the directory (a loaded log counts it as changed); lost to a power loss
    # before that, they are created again, empty, as they were. Kafka syncs no directory here.
    if not untouched and (loader.changed or [segment.base_offset for segment in segments] != log_bases):
        fs.fsync_dir(directory)
    log_end_offset = segments[-1].read_next_offset()
    if log_end_offset < recovery_point:
        # Offsets below the recovery point were flushed: only damage takes them away.
        report.record(
            RecoveryAction(
                RecoveryKind.RECORDS_MISSING,
                partition,
                directory,
                f"offsets below the recovery point {recovery_point} were flushed, but the log now ends at "
                f"{log_end_offset}: offsets {log_end_offset}..{recovery_point - 1} are gone from this "
                "replica",
                cut_from_offset=log_end_offset,
            )
        )
    return LoadedSegments(
        segments,
        log_end_offset,
        log_end_offset if clean_shutdown else min(recovery_point, log_end_offset),
        effective_log_start_offset,
    )


def _partial_tail(segment: LogSegment) -> str | None:
    """Why the segment's bytes do not end with a complete batch (a file cut short), or None. Read from
    the last index entry on, as the log end offset is: a clean start must not append after a stump."""
    end = segment.offset_index.lookup(2**63 - 1).position
    for position, header in segment.iterate_headers(end):
        end = position + header.size_in_bytes
    if end == segment.size:
        return None
    return f"bytes {end}..{segment.size - 1} do not hold a complete batch"


def _misfit(segment: LogSegment) -> str | None:
    """Why the segment's file does not hold what its name says (a copy, or a renamed file), or None.
    A first batch that cannot be read or fails its CRC is left to recovery."""
    try:
        first = next(segment.iterate_headers(), None)
    except CorruptRecordError:
        return None
    if first is None:
        return None
    _position, header = first
    try:
        batch = next(iterate_batches(segment.log_file.pread(header.size_in_bytes, 0)), None)
        if batch is None:
            return None
        batch.ensure_valid()
    except CorruptRecordError:
        return None
    if header.base_offset == segment.base_offset:
        return None
    return (
        f"its first batch holds offsets {header.base_offset}..{header.last_offset}, "
        f"but its name says the segment starts at {segment.base_offset}"
    )


class _Loader:
    """The repairs of one partition directory's load, each recorded in the report as it is made."""

    def __init__(
        self,
        fs: FileSystem,
        partition: str,
        report: RecoveryReport,
        on_batch: Callable[[BatchHeader], None],
    ) -> None:
        self.fs = fs
        self.partition = partition
        self.report = report
        self.on_batch = on_batch
        self.changed = False
        self.moved_bases: list[int] = []
        # Records the files held are not in the loaded log (a cut, or segments moved aside).
        self.lost_records = False

    def recover(self, segment: LogSegment, reason: str) -> int:
        size = segment.size
        try:
            result = segment.recover(self.on_batch)
            cut, batches = result.truncated_bytes, result.truncated_batches
            cause, problem = (result.damage.cause, result.damage.problem) if result.damage else ("", "")
        except InvalidOffsetError as error:
            # Kafka: an offset that cannot be indexed empties the segment.
            cut = segment.truncate_to(segment.base_offset, now_ms=segment.created_ms)
            cause, problem, batches = "an offset that cannot be indexed", str(error), None
        end = segment.read_next_offset()
        self.report.record(
            RecoveryAction(
                RecoveryKind.SEGMENT_RECOVERED,
                self.partition,
                segment.log_path,
                f"{reason}: batches re-validated and indexes rebuilt; offsets "
                f"{segment.base_offset}..{end - 1} in bytes 0..{segment.size} kept",
            )
        )
        if cut > 0:
            self.changed = True
            self.lost_records = True
            counted = "" if batches is None else f", {batches} batch(es)"
            self.report.record(
                RecoveryAction(
                    RecoveryKind.BYTES_TRUNCATED,
                    self.partition,
                    segment.log_path,
                    f"bytes {size - cut}..{size - 1} ({cut} bytes{counted}) cut at the first invalid or "
                    f"incomplete batch, {cause} ({problem}); the log now ends at offset {end}",
                    truncated_bytes=cut,
                    truncated_batches=batches,
                    cut_from_offset=end,
                    cause=cause,
                )
            )
            # Durable before anything is appended after it: otherwise a second power loss could bring
            # the cut bytes back, and recovery would then cut at them again, losing what was appended
            # (and flushed) in between.
            segment.fsync()
        return cut

    def move_aside(self, segments: list[LogSegment], reason: str, *, cut_from_offset: int | None) -> None:
        """Rename each segment's files ``<name>.stray``: out of the log, but kept for the operator."""
        for segment in segments:
            segment.close()
            if cut_from_offset is not None:
                self.moved_bases.append(segment.base_offset)
                self.lost_records = True
            for path in segment.file_paths():
                if self.fs.exists(path):
                    self.fs.rename(path, path + STRAY_SUFFIX)
                    self.changed = True
                    self.report.record(
                        RecoveryAction(
                            RecoveryKind.FILE_MOVED_ASIDE,
                            self.partition,
                            path + STRAY_SUFFIX,
                            f"moved aside ({self.fs.file_size(path + STRAY_SUFFIX)} bytes): {reason}",
                            cut_from_offset=cut_from_offset if path.endswith(LOG_SUFFIX) else None,
                        )
                    )

    def delete_below_log_start(self, segments: list[LogSegment], log_start_offset: int, end: int) -> None:
        """Every segment ends below the log start offset: its records were deleted already."""
        for segment in segments:
            segment.close()
            for path in segment.file_paths():
                if self.fs.exists(path):
                    self.fs.delete_file(path)
        self.changed = True
        self.report.record(
            RecoveryAction(
                RecoveryKind.BYTES_TRUNCATED,
                self.partition,
                segments[0].log_path,
                f"after the cut the log ends at offset {end}, below its log start offset {log_start_offset}: "
                f"segments {', '.join(str(s.base_offset) for s in segments)} held only deleted records and "
                f"were removed; the log starts empty at {log_start_offset}",
                cut_from_offset=end,
            )
        )


def _remove_leftovers(fs: FileSystem, directory: str) -> None:
    for name in fs.list_dir(directory):
        if name.endswith((".tmp", DELETED_SUFFIX, ".cleaned", ".swap")):
            path = posixpath.join(directory, name)
            if not fs.is_dir(path):
                fs.delete_file(path)
