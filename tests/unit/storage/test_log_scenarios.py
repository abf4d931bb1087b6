"""docs/scenarios.md §4, scenarios 30-36, each as its own test (37 and 38 live in test_index.py and
test_leader_epoch.py). Times are virtual: ``now`` stands for Kafka's MockTime in both the monotonic
and the wall-clock roles."""

from __future__ import annotations

import random

import pytest

from runtime.storage.checkpoint import EpochEntry
from runtime.storage.config import LogConfig
from runtime.storage.fs import MemoryFileSystem
from runtime.storage.log import Log
from runtime.storage.records import NO_TIMESTAMP, iterate_batches
from runtime.storage.segment import LogSegment
from tests.unit.storage.helpers import batch, decode_all, open_log


def _append(log: Log, data: bytes, now: int = 0) -> None:
    log.append_as_leader(data, 0, now_ms=now, wall_clock_ms=now)


def test_scenario_30_high_watermark_maintenance() -> None:
    """LogTest.testHighWatermarkMaintenance."""
    log = open_log(MemoryFileSystem())
    assert log.high_watermark == 0
    _append(log, batch(b"a", b"b", b"c"))
    assert log.high_watermark == 0
    log.maybe_increment_high_watermark(1)
    assert log.high_watermark == 1
    log.update_high_watermark(5)
    assert log.high_watermark == 3  # clamped to the log end offset
    log.append_as_follower(batch(b"d", b"e", b"f", base_offset=3, leader_epoch=0), now_ms=0)
    log.update_high_watermark(6)
    assert log.high_watermark == 6
    log.truncate_to(3, now_ms=0)
    assert log.high_watermark == 3
    _append(log, batch(b"g", b"h", b"i"))
    assert (log.high_watermark, log.log_end_offset) == (3, 6)
    assert not log.maybe_increment_high_watermark(2)  # the leader path never goes back
    with pytest.raises(ValueError, match="exceed the log end offset"):
        log.maybe_increment_high_watermark(7)
    log.truncate_fully_and_start_at(4, now_ms=0)
    assert (log.log_end_offset, log.log_start_offset, log.high_watermark) == (4, 4, 4)


def test_scenario_31_time_based_roll() -> None:
    """LogTest.testTimeBasedLogRoll: segment.ms = 3600."""
    segment_ms = 3600
    log = open_log(MemoryFileSystem(), config=LogConfig(segment_ms=segment_ms))
    no_timestamp = batch(b"test", timestamp=NO_TIMESTAMP)
    assert len(log.segments) == 1
    now = segment_ms + 1
    _append(log, no_timestamp, now)
    assert len(log.segments) == 1, "no roll into an empty segment"
    _append(log, no_timestamp, now)
    assert len(log.segments) == 2, "rolls: time expired since the segment was created"
    for segments in (3, 4):
        now += segment_ms + 1
        _append(log, no_timestamp, now)
        assert len(log.segments) == segments
    stamped = batch(b"test", timestamp=now + segment_ms + 1)
    _append(log, stamped, now)
    assert len(log.segments) == 4, "the segment's first batch has no timestamp: the clock decides"
    now += segment_ms + 1
    _append(log, stamped, now)
    assert len(log.segments) == 5
    now += segment_ms + 1
    _append(log, stamped, now)
    assert len(log.segments) == 5, "timestamps decide, not the clock"
    _append(log, batch(b"test", timestamp=now), now)
    assert len(log.segments) == 6, "a record timestamp past the first batch's by segment.ms rolls"
    now += segment_ms + 1
    _append(log, b"", now)
    assert len(log.segments) == 6, "an empty append never rolls"


def test_scenario_31_size_based_roll() -> None:
    """LogTest.testSizeBasedLogRoll: segment.bytes = 10 x (batch size - 1)."""
    one = batch(b"test")
    log = open_log(MemoryFileSystem(), config=LogConfig(segment_bytes=10 * (len(one) - 1)))
    for _ in range(11):
        _append(log, one)
    assert len(log.segments) == 2


def test_scenario_32_truncate_to() -> None:
    """LogTest.testTruncateTo: 10 one-record batches per segment."""
    one = batch(b"test")
    log = open_log(MemoryFileSystem(), config=LogConfig(segment_bytes=10 * len(one)))
    for _ in range(10):
        _append(log, one)
    assert len(log.segments) == 1
    assert log.log_end_offset == 10
    size = log.size_in_bytes
    assert not log.truncate_to(10, now_ms=0)
    assert not log.truncate_to(11, now_ms=0)
    assert (log.log_end_offset, log.size_in_bytes) == (10, size)
    log.truncate_to(5, now_ms=0)
    assert log.log_end_offset == 5
    assert log.size_in_bytes < size
    log.truncate_to(0, now_ms=0)
    assert (log.log_end_offset, log.size_in_bytes) == (0, 0)
    for _ in range(10):
        _append(log, one)
    assert (log.log_end_offset, log.size_in_bytes) == (10, size)
    log.truncate_fully_and_start_at(log.log_end_offset - 9, now_ms=0)
    assert (log.log_end_offset, log.size_in_bytes) == (1, 0)
    for _ in range(10):
        _append(log, one)
    assert log.log_end_offset > 10
    assert log.size_in_bytes == size
    log.truncate_to(0, now_ms=0)  # below the first segment's base offset
    assert (log.log_end_offset, log.size_in_bytes, log.log_start_offset) == (0, 0, 0)


@pytest.mark.parametrize("seed", range(10))
def test_scenario_33_corrupt_log_recovers_every_record(seed: int) -> None:
    """LogTest.testCorruptLog: garbage after the active segment's log and index, unclean reopen."""
    rng = random.Random(seed)
    fs = MemoryFileSystem()
    config = LogConfig(segment_bytes=1000, index_interval_bytes=1, max_message_bytes=64 * 1024)
    log = open_log(fs, config=config)
    count = 50 + rng.randrange(50)
    for i in range(count):
        _append(log, batch(b"test", timestamp=1000 + i))
    before = decode_all(b"".join(fs.read_file(s.log_path) for s in log.segments))
    active = log.active_segment
    log.close()
    for path in (active.offset_index.path, active.log_path):
        fs.write_file(path, fs.read_file(path) + rng.randbytes(rng.randrange(1, 1025)), fsync=False)
    recovered = open_log(fs, config=config, recovery_point=50)
    assert recovered.log_end_offset == count
    after = decode_all(b"".join(fs.read_file(s.log_path) for s in recovered.segments))
    assert after == before


def test_scenario_33_recovery_rebuilds_the_leader_epoch_cache() -> None:
    """LogTest.testLogRecoversForLeaderEpoch: batch epochs 1, 2, 2, 3."""
    fs = MemoryFileSystem()
    log = open_log(fs)
    for offset, epoch in enumerate([1, 2, 2, 3]):
        log.append_as_follower(batch(b"random", base_offset=offset, leader_epoch=epoch), now_ms=0)
    expected = (EpochEntry(1, 0), EpochEntry(2, 1), EpochEntry(3, 3))
    assert log.leader_epoch_cache.entries == expected
    log.leader_epoch_cache.truncate_from_end(2)
    assert log.leader_epoch_cache.entries != expected
    log.close()
    assert open_log(fs).leader_epoch_cache.entries == expected


def test_scenario_34_delete_old_segments() -> None:
    """LogTest.testDeleteOldSegments: retention.ms 999, records 1000 ms old, 5 records per segment."""
    now = 10_000_000
    one = batch(b"test", timestamp=now - 1000)
    log = open_log(
        MemoryFileSystem(),
        config=LogConfig(segment_bytes=len(one) * 5, segment_index_bytes=1000, retention_ms=999),
    )
    for _ in range(100):
        _append(log, one, now)
    log.leader_epoch_cache.assign(0, 40)
    log.leader_epoch_cache.assign(1, 90)
    segments = len(log.segments)
    assert log.delete_old_segments(now_ms=now, wall_clock_ms=now) == 0
    assert (len(log.segments), log.log_start_offset) == (segments, 0)
    for high_watermark in range(25, 31):
        log.update_high_watermark(high_watermark)
        log.delete_old_segments(now_ms=now, wall_clock_ms=now)
        assert log.log_start_offset <= high_watermark
        for segment in log.segments:
            found = segment.read(segment.base_offset, 2**31 - 1)
            assert found is not None
            last_offset = [b.header.last_offset for b in iterate_batches(found[1])][-1]
            assert last_offset >= high_watermark
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments(now_ms=now, wall_clock_ms=now)
    assert len(log.segments) == 1
    assert log.leader_epoch_cache.entries == (EpochEntry(1, 100),)
    for _ in range(100):
        _append(log, one, now)
    log.delete()
    assert len(log.segments) == 0
    assert log.delete_old_segments(now_ms=now, wall_clock_ms=now) == 0
    assert len(log.leader_epoch_cache.entries) == 0


def _segment(
    fs: MemoryFileSystem, base_offset: int, config: LogConfig | None = None, now: int = 0
) -> LogSegment:
    fs.make_dirs("/seg")
    return LogSegment.create(
        fs, "/seg", base_offset, config or LogConfig(), now_ms=now, wall_clock_ms=0, roll_jitter_ms=0
    )


def _segment_append(segment: LogSegment, data: bytes) -> None:
    header = next(iterate_batches(data)).header
    segment.append(header.last_offset, NO_TIMESTAMP, -1, [data], len(data))


def test_scenario_35_read_from_a_gap_and_after_the_last_offset() -> None:
    """LogSegmentTest.testReadFromGap and testReadAfterLast."""
    segment = _segment(MemoryFileSystem(), 40)
    first = batch(b"hello", b"there", base_offset=50)
    second = batch(b"alpha", b"beta", base_offset=60)
    _segment_append(segment, first)
    assert segment.read(52, 200) is None
    _segment_append(segment, second)
    found = segment.read(55, 200)
    assert found is not None
    assert found[1] == second


def test_scenario_35_truncate_an_empty_reopened_segment() -> None:
    """LogSegmentTest.testTruncateEmptySegment: creation time reset, no roll by time, roll on overflow."""
    fs = MemoryFileSystem()
    segment_ms = 300_000
    config = LogConfig(segment_ms=segment_ms, segment_bytes=2**31 - 1)
    _segment(fs, 0, config).close()
    reopened = LogSegment.open_existing(fs, "/seg", 0, config, now_ms=0, roll_jitter_ms=0)
    reopened.load_indexes()
    assert (reopened.offset_index.size_in_bytes, reopened.time_index.size_in_bytes) == (0, 0)
    now = 500
    reopened.truncate_to(57, now_ms=now)
    assert reopened.time_waited_for_roll(now, NO_TIMESTAMP) == 0
    assert not reopened.offset_index.is_full
    assert not reopened.time_index.is_full
    assert not reopened.should_roll(1024, NO_TIMESTAMP, 100, now)
    now += segment_ms + 1
    assert reopened.time_waited_for_roll(now, NO_TIMESTAMP) == segment_ms + 1
    assert not reopened.should_roll(1024, NO_TIMESTAMP, 100, now), "empty: never rolled by time"
    assert reopened.should_roll(1024, NO_TIMESTAMP, 2**31 - 1 + 200, now), "the offset would not fit"


@pytest.mark.parametrize("seed", range(8))
def test_scenario_36_recovery_with_a_corrupt_message(seed: int) -> None:
    """LogSegmentTest.testRecoveryWithCorruptMessage: garbage from inside record k to the end."""
    rng = random.Random(seed)
    fs = MemoryFileSystem()
    segment = _segment(fs, 0, LogConfig(index_interval_bytes=1))
    for i in range(20):
        _segment_append(segment, batch(str(i).encode(), base_offset=i))
    corrupt_from = rng.randrange(20)
    found = segment.translate_offset(corrupt_from)
    assert found is not None
    position = found.position + rng.randrange(15)
    data = fs.read_file(segment.log_path)
    fs.write_file(segment.log_path, data[:position] + rng.randbytes(len(data) - position), fsync=False)
    segment.close()
    reopened = LogSegment.open_existing(
        fs, "/seg", 0, LogConfig(index_interval_bytes=1), now_ms=0, roll_jitter_ms=0
    )
    reopened.recover(lambda _header: None)
    assert [b.header.last_offset for b in reopened.batches()] == list(range(corrupt_from))


def test_a_truncation_at_the_log_end_drops_an_epoch_started_there() -> None:
    """KAFKA-10706 (after Kafka 2.4): a replica led epoch 5 from its log end offset and appended
    nothing, then followed a leader without epoch 5. Its truncation to its own log end offset
    changes no record but must drop epoch 5, or epoch 5 stays its latest and every
    OffsetsForLeaderEpoch round asks for it again (simulation seed 1632: never back in the ISR)."""
    log = open_log(MemoryFileSystem())
    log.append_as_follower(batch(b"a", b"b", base_offset=0, leader_epoch=3), now_ms=0)
    log.leader_epoch_cache.assign(5, log.log_end_offset)  # became leader at epoch 5
    assert log.leader_epoch_cache.latest_epoch == 5
    assert not log.truncate_to(log.log_end_offset, now_ms=0)
    assert log.leader_epoch_cache.entries == (EpochEntry(3, 0),)
    assert log.log_end_offset == 2
    assert not log.truncate_to(7, now_ms=0)  # past the end: nothing more to drop
    assert log.leader_epoch_cache.entries == (EpochEntry(3, 0),)
