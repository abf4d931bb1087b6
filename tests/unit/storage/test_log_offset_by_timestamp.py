"""Offsets by timestamp (docs/log.md §11): Kafka 2.4's ``Log.fetchOffsetByTimestamp`` and
``LogSegment.findOffsetByTimestamp``: the first record at or above the log start offset whose
timestamp is >= the target, with that record's timestamp and its batch's leader epoch."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import pytest

from runtime.storage.compression import CompressionType
from runtime.storage.config import LogConfig
from runtime.storage.fs import MemoryFileSystem
from runtime.storage.index import TimeIndex
from runtime.storage.log import Log, TimestampAndOffset
from runtime.storage.record_builder import SimpleRecord, build_batch
from runtime.storage.records import NO_TIMESTAMP, TimestampType, iterate_batches
from runtime.storage.segment import LogSegment
from tests.unit.storage.helpers import BASE_TIME_MS, open_log

T = BASE_TIME_MS
DIRECTORY = "/logs/topic-0"
# Every batch after a segment's first gets an offset and a time index entry.
DENSE = LogConfig(index_interval_bytes=0)


def stamped(*timestamps: int, epoch: int = -1, compression: CompressionType = CompressionType.NONE) -> bytes:
    """One CreateTime batch whose records carry exactly ``timestamps``, in that order."""
    return build_batch(
        [SimpleRecord(b"v%d" % i, timestamp=ts) for i, ts in enumerate(timestamps)],
        partition_leader_epoch=epoch,
        compression=compression,
    )


def append(log: Log, *timestamps: int, epoch: int = 0, wall_clock_ms: int = T) -> None:
    log.append_as_leader(stamped(*timestamps), epoch, now_ms=0, wall_clock_ms=wall_clock_ms)


def found(timestamp: int, offset: int, epoch: int | None = 0) -> TimestampAndOffset:
    return TimestampAndOffset(timestamp, offset, epoch)


def oracle(log: Log, target: int) -> tuple[int, int] | None:
    """``(timestamp, offset)`` of the smallest offset >= the log start offset whose record timestamp is
    >= target, by decoding every record of every segment."""
    for timestamp, offset in record_timestamps(log):
        if offset >= log.log_start_offset and timestamp >= target:
            return timestamp, offset
    return None


def record_timestamps(log: Log) -> Iterator[tuple[int, int]]:
    for segment in log.segments:
        data = segment.log_file.pread(segment.size, 0)
        for record_batch in iterate_batches(data):
            header = record_batch.header
            for record in record_batch.records():
                if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
                    yield header.max_timestamp, record.offset
                else:
                    yield record.timestamp, record.offset


def search_starts(segment: LogSegment, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The byte positions the segment's searches start scanning at."""
    starts: list[int] = []
    scan = segment.iterate_headers

    def spy(start_position: int = 0, end_position: int | None = None) -> Iterator[tuple[int, object]]:
        starts.append(start_position)
        return scan(start_position, end_position)

    monkeypatch.setattr(segment, "iterate_headers", spy)
    return starts


def test_the_time_index_lookup_is_the_last_entry_at_or_below_the_target() -> None:
    fs = MemoryFileSystem()
    fs.make_dirs("/i")
    index = TimeIndex.create(fs, "/i/00000000000000000100.timeindex", 100, 1_200)
    assert index.lookup(T) == (NO_TIMESTAMP, 100)  # empty: the segment's base offset
    index.maybe_append(T + 10, 103)
    index.maybe_append(T + 20, 107)
    assert index.lookup(T + 9) == (NO_TIMESTAMP, 100)
    assert index.lookup(T + 10) == (T + 10, 103)
    assert index.lookup(T + 19) == (T + 10, 103)
    assert index.lookup(T + 20) == (T + 20, 107)
    assert index.lookup(T + 99) == (T + 20, 107)


# ------------------------------------------------------------------------------------- the rule


def test_an_empty_log_has_no_offset_for_any_timestamp() -> None:
    log = open_log(MemoryFileSystem())
    assert log.fetch_offset_by_timestamp(0) is None
    assert log.fetch_offset_by_timestamp(T) is None


def test_the_first_record_at_or_after_the_target_with_its_own_timestamp() -> None:
    log = open_log(MemoryFileSystem())
    append(log, T, T + 10, T + 20)  # offsets 0-2
    append(log, T + 30, T + 40)  # offsets 3-4
    assert log.fetch_offset_by_timestamp(0) == found(T, 0)
    assert log.fetch_offset_by_timestamp(T) == found(T, 0)
    assert log.fetch_offset_by_timestamp(T + 1) == found(T + 10, 1)  # a record, not its batch
    assert log.fetch_offset_by_timestamp(T + 20) == found(T + 20, 2)
    assert log.fetch_offset_by_timestamp(T + 21) == found(T + 30, 3)
    assert log.fetch_offset_by_timestamp(T + 40) == found(T + 40, 4)
    assert log.fetch_offset_by_timestamp(T + 41) is None  # beyond the max timestamp


def test_out_of_order_create_times_within_a_batch_give_the_first_record_in_offset_order() -> None:
    log = open_log(MemoryFileSystem())
    append(log, T + 100, T + 50, T + 120, T + 110)  # offsets 0-3
    assert log.fetch_offset_by_timestamp(T + 60) == found(T + 100, 0)  # not offset 3 (T+110)
    assert log.fetch_offset_by_timestamp(T + 105) == found(T + 120, 2)
    assert log.fetch_offset_by_timestamp(T + 50) == found(T + 100, 0)
    assert log.fetch_offset_by_timestamp(T + 121) is None


def test_out_of_order_create_times_across_batches_give_the_first_record_in_offset_order() -> None:
    log = open_log(MemoryFileSystem(), config=DENSE)
    append(log, T + 300)  # offset 0
    append(log, T + 100)  # offset 1
    append(log, T + 200, T + 250)  # offsets 2-3
    append(log, T + 150)  # offset 4
    assert log.fetch_offset_by_timestamp(T + 150) == found(T + 300, 0)
    assert log.fetch_offset_by_timestamp(T + 301) is None
    log.maybe_increment_high_watermark(5)
    log.maybe_increment_log_start_offset(1)
    assert log.fetch_offset_by_timestamp(T + 150) == found(T + 200, 2)
    assert log.fetch_offset_by_timestamp(T + 210) == found(T + 250, 3)
    assert log.fetch_offset_by_timestamp(T + 260) is None  # only offset 0 (below the start) has it


def test_records_without_a_timestamp_never_match() -> None:
    log = open_log(MemoryFileSystem())
    append(log, NO_TIMESTAMP, NO_TIMESTAMP)
    append(log, NO_TIMESTAMP, T)
    assert log.fetch_offset_by_timestamp(0) == found(T, 3)


def test_the_leader_epoch_is_the_batch_s_and_none_without_one() -> None:
    log = open_log(MemoryFileSystem())
    append(log, T, epoch=3)  # offset 0
    append(log, T + 10, T + 20, epoch=5)  # offsets 1-2
    assert log.fetch_offset_by_timestamp(T + 20) == found(T + 20, 2, epoch=5)
    assert log.fetch_offset_by_timestamp(T) == found(T, 0, epoch=3)
    for offset in (0, 2):
        answer = log.fetch_offset_by_timestamp(T + 10 * offset)
        assert answer is not None
        assert answer.leader_epoch == log.leader_epoch_cache.epoch_for_offset(offset)
    follower = open_log(MemoryFileSystem())
    follower.append_as_follower(stamped(T, T + 1), now_ms=0)  # a batch with no leader epoch (-1)
    assert follower.fetch_offset_by_timestamp(T + 1) == found(T + 1, 1, epoch=None)


def test_a_compressed_batch_is_searched_record_by_record() -> None:
    log = open_log(MemoryFileSystem())
    log.append_as_leader(
        stamped(T + 5, T + 1, T + 9, compression=CompressionType.GZIP), 0, now_ms=0, wall_clock_ms=T
    )
    assert log.fetch_offset_by_timestamp(T + 6) == found(T + 9, 2)
    assert log.fetch_offset_by_timestamp(T + 2) == found(T + 5, 0)


# ------------------------------------------------------------------------------ LogAppendTime


def test_log_append_time_records_have_the_time_the_leader_appended_them() -> None:
    config = LogConfig(message_timestamp_type=TimestampType.LOG_APPEND_TIME)
    log = open_log(MemoryFileSystem(), config=config)
    # The producer's own timestamps (T, T+1, ...) are replaced by the append time, batch by batch.
    append(log, T, T + 1, wall_clock_ms=T + 1_000)  # offsets 0-1
    append(log, T + 2, T + 3, wall_clock_ms=T + 2_000)  # offsets 2-3
    assert log.fetch_offset_by_timestamp(T) == found(T + 1_000, 0)
    assert log.fetch_offset_by_timestamp(T + 1_000) == found(T + 1_000, 0)
    assert log.fetch_offset_by_timestamp(T + 1_001) == found(T + 2_000, 2)
    assert log.fetch_offset_by_timestamp(T + 2_001) is None
    log.maybe_increment_high_watermark(4)
    log.maybe_increment_log_start_offset(3)
    assert log.fetch_offset_by_timestamp(T + 1_500) == found(T + 2_000, 3)  # inside the batch


def test_a_log_that_changed_from_create_time_to_log_append_time_is_searched_by_each_batch_s_type() -> None:
    log = open_log(MemoryFileSystem())
    append(log, T + 50, T + 5_000)  # CreateTime: offsets 0-1
    log.update_config(LogConfig(message_timestamp_type=TimestampType.LOG_APPEND_TIME))
    append(log, T + 9_000, wall_clock_ms=T + 3_000)  # LogAppendTime: offset 2 at T+3000
    assert log.fetch_offset_by_timestamp(T + 100) == found(T + 5_000, 1)
    log.maybe_increment_high_watermark(3)
    log.maybe_increment_log_start_offset(2)
    assert log.fetch_offset_by_timestamp(T + 100) == found(T + 3_000, 2)
    assert log.fetch_offset_by_timestamp(T + 3_001) is None  # the producer's T+9000 is not stored


# ----------------------------------------------------------------------- segments and indexes


def segmented_log(config: LogConfig, timestamps: Sequence[Sequence[int]]) -> Log:
    log = open_log(MemoryFileSystem(), config=config)
    for batch_timestamps in timestamps:
        append(log, *batch_timestamps)
    return log


def test_segments_whose_max_timestamp_is_below_the_target_are_not_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    size = len(stamped(T))
    log = segmented_log(LogConfig(segment_bytes=2 * size), [[T], [T + 1], [T + 2], [T + 3], [T + 4], [T + 5]])
    assert [s.base_offset for s in log.segments] == [0, 2, 4]
    starts = [search_starts(segment, monkeypatch) for segment in log.segments]
    assert log.fetch_offset_by_timestamp(T + 3) == found(T + 3, 3)
    assert [len(s) for s in starts] == [0, 1, 0]  # the middle segment alone was scanned
    assert log.fetch_offset_by_timestamp(T + 6) is None


def test_the_scan_starts_at_the_time_index_position(monkeypatch: pytest.MonkeyPatch) -> None:
    log = segmented_log(DENSE, [[T + i] for i in range(10)])  # one segment; entries from offset 1 on
    segment = log.active_segment
    assert segment.time_index.entries == 9
    position_of = {header.base_offset: position for position, header in segment.iterate_headers()}
    starts = search_starts(segment, monkeypatch)
    assert log.fetch_offset_by_timestamp(T + 7) == found(T + 7, 7)
    assert starts == [position_of[7]]
    assert log.fetch_offset_by_timestamp(T + 7) == log.active_segment.find_offset_by_timestamp(T + 7, 0)


def test_a_sparse_time_index_scans_from_an_earlier_batch_and_finds_the_same_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = segmented_log(LogConfig(), [[T + i] for i in range(10)])  # 4096-byte spacing: no entries
    segment = log.active_segment
    assert segment.time_index.entries == 0
    starts = search_starts(segment, monkeypatch)
    assert log.fetch_offset_by_timestamp(T + 7) == found(T + 7, 7)
    assert starts == [0]


def test_a_time_index_entry_at_the_target_itself_still_finds_the_first_record_with_it() -> None:
    # Entries are (max timestamp so far, the offset where it was first reached): offsets 2 and 3
    # both have T+50, and the entry for T+50 points at 2.
    log = segmented_log(DENSE, [[T], [T + 10], [T + 50], [T + 50], [T + 60]])
    assert log.active_segment.time_index.lookup(T + 50) == (T + 50, 2)
    assert log.fetch_offset_by_timestamp(T + 50) == found(T + 50, 2)


def test_the_log_start_offset_inside_a_segment_is_never_passed_below() -> None:
    log = segmented_log(DENSE, [[T + 100], [T + 10], [T + 200], [T + 20]])
    log.maybe_increment_high_watermark(4)
    log.maybe_increment_log_start_offset(1)
    assert log.fetch_offset_by_timestamp(T + 50) == found(T + 200, 2)
    log.maybe_increment_log_start_offset(3)
    assert log.fetch_offset_by_timestamp(T + 15) == found(T + 20, 3)
    assert log.fetch_offset_by_timestamp(T + 50) is None


def test_a_segment_whose_matches_lie_below_the_log_start_offset_hands_over_to_the_next() -> None:
    """Kafka 2.4 answers "no offset" here (it searches only the first segment whose largest
    timestamp reaches the target); the log goes on to the next segment."""
    size = len(stamped(T))
    log = segmented_log(LogConfig(segment_bytes=2 * size), [[T + 500], [T], [T + 100], [T + 200]])
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.maybe_increment_high_watermark(4)
    log.maybe_increment_log_start_offset(1)  # DeleteRecords: offset 0 (T+500) is gone
    assert log.segments[0].max_timestamp_so_far == T + 500  # still the first segment's max
    assert log.fetch_offset_by_timestamp(T + 150) == found(T + 200, 3)


def test_retention_moves_the_log_start_offset_and_the_answer_with_it() -> None:
    size = len(stamped(T))
    log = segmented_log(LogConfig(segment_bytes=2 * size, retention_ms=1_000), [[T], [T + 1], [T + 2_000]])
    log.maybe_increment_high_watermark(3)
    assert log.fetch_offset_by_timestamp(0) == found(T, 0)
    deleted = log.delete_old_segments(now_ms=0, wall_clock_ms=T + 1_500)
    assert deleted == 1
    assert log.log_start_offset == 2
    assert log.fetch_offset_by_timestamp(0) == found(T + 2_000, 2)


@pytest.mark.parametrize("clean_shutdown", [True, False])
def test_the_answers_survive_a_restart_and_a_truncation(clean_shutdown: bool) -> None:
    fs = MemoryFileSystem()
    size = len(stamped(T))
    config = LogConfig(segment_bytes=3 * size, index_interval_bytes=0)
    log = open_log(fs, DIRECTORY, config)
    for ts in (T + 30, T + 10, T + 20, T + 60, T + 40, T + 50, T + 90, T + 70):
        append(log, ts)
    before = {target: log.fetch_offset_by_timestamp(target) for target in range(T, T + 100, 5)}
    log.close(flush=True)
    reopened = open_log(fs, DIRECTORY, config, clean_shutdown=clean_shutdown)
    assert {t: reopened.fetch_offset_by_timestamp(t) for t in before} == before
    reopened.truncate_to(5, now_ms=0)  # offsets 0-4 stay: T+30 T+10 T+20 T+60 T+40
    assert reopened.fetch_offset_by_timestamp(T + 45) == found(T + 60, 3)
    assert reopened.fetch_offset_by_timestamp(T + 61) is None


@pytest.mark.parametrize("seed", range(6))
def test_random_out_of_order_logs_agree_with_decoding_every_record(seed: int) -> None:
    rng = random.Random(seed)
    interval = rng.choice([0, 100, 400, 4096])
    log = open_log(MemoryFileSystem(), config=LogConfig(index_interval_bytes=interval, segment_bytes=1_500))
    for _ in range(60):
        count = rng.randint(1, 4)
        compression = rng.choice([CompressionType.NONE, CompressionType.GZIP])
        timestamps = [T + rng.randint(0, 1_000) for _ in range(count)]
        log.append_as_leader(stamped(*timestamps, compression=compression), 0, now_ms=0, wall_clock_ms=T)
    assert len(log.segments) > 3
    log.maybe_increment_high_watermark(log.log_end_offset)
    if seed % 2:
        log.maybe_increment_log_start_offset(rng.randint(1, log.log_end_offset - 1))
    for target in [0, T, T + 1_000, T + 1_001, *(T + rng.randint(0, 1_000) for _ in range(40))]:
        answer = log.fetch_offset_by_timestamp(target)
        expected = oracle(log, target)
        assert (None if answer is None else (answer.timestamp, answer.offset)) == expected, target
