"""Loading a log dir whose files were damaged while the broker was stopped (memory and real files).

Each case is one an operator hit: a stray copy of a segment, a garbage ``leader-epoch-checkpoint``, a
log start offset checkpoint beyond the log end, a torn segment, a missing segment, damaged log dir
checkpoints. Loading must start, keep every record the files still hold in one contiguous log, move
what does not fit aside (``.stray``) instead of truncating it, affect only the damaged partition, and
log and count every action it took.
"""

from __future__ import annotations

import logging
import random

import pytest

from runtime.storage.config import LogConfig
from runtime.storage.fs import FileSystem
from runtime.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from runtime.storage.log_recovery import RecoveryKind
from runtime.storage.topic_partition import TopicPartition
from tests.unit.storage.helpers import append_values, values

ORDERS = TopicPartition("orders", 0)
EVENTS = TopicPartition("events", 3)
CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=100)
RECORDS = 40


def _open(fs: FileSystem, directory: str) -> LogManager:
    return LogManager.open(fs, directory, now_ms=0, rng=random.Random(3), default_config=CONFIG)


def _stopped_with_two_partitions(fs: FileSystem, directory: str, *, clean: bool = True) -> list[int]:
    """Two partitions of RECORDS records each (epochs 0, then 2 from offset 10), stopped; returns
    the segment base offsets of ``orders-0``."""
    manager = _open(fs, directory)
    for tp in (ORDERS, EVENTS):
        log = manager.get_or_create_log(tp, now_ms=0)
        append_values(log, 10, leader_epoch=0)
        append_values(log, RECORDS - 10, leader_epoch=2)
        log.maybe_increment_high_watermark(RECORDS)
    bases = [segment.base_offset for segment in manager.get_log(ORDERS).segments]  # type: ignore[union-attr]
    assert len(bases) >= 4
    if clean:
        manager.close(now_ms=0)
    else:
        manager.checkpoint_recovery_points()
        manager.checkpoint_high_watermarks()
    return bases


def _segment(directory: str, base: int, suffix: str = ".log") -> str:
    return f"{directory}/{ORDERS}/{base:020d}{suffix}"


def _all_values() -> list[bytes]:
    return [b"v%d" % i for i in range(RECORDS)]


def _kinds(manager: LogManager) -> list[RecoveryKind]:
    return [action.kind for action in manager.recovery_report.actions]


def test_a_stray_copy_of_a_segment_is_moved_aside_not_truncated(log_dir: tuple[FileSystem, str]) -> None:
    fs, directory = log_dir
    _stopped_with_two_partitions(fs, directory)
    original = fs.read_file(_segment(directory, 0))
    fs.write_file(_segment(directory, 5), original, fsync=True)  # offsets 0.. under the name 5
    for _ in range(2):  # and the second start sees the same log
        manager = _open(fs, directory)
        orders = manager.get_log(ORDERS)
        assert orders is not None
        assert values(orders) == _all_values()
        assert (orders.log_start_offset, orders.log_end_offset) == (0, RECORDS)
        manager.close(now_ms=0)
    assert not fs.exists(_segment(directory, 5))
    assert fs.read_file(_segment(directory, 5) + ".stray") == original  # its bytes kept whole


def test_a_garbage_leader_epoch_checkpoint_is_rebuilt_from_the_batches(
    log_dir: tuple[FileSystem, str], caplog: pytest.LogCaptureFixture
) -> None:
    fs, directory = log_dir
    _stopped_with_two_partitions(fs, directory)
    fs.write_file(f"{directory}/{ORDERS}/leader-epoch-checkpoint", b"not a checkpoint\n\x00\xff", fsync=True)
    with caplog.at_level(logging.WARNING, logger="actorlog.storage.recovery"):
        manager = _open(fs, directory)
    orders, events = manager.get_log(ORDERS), manager.get_log(EVENTS)
    assert orders is not None
    assert events is not None
    assert [(e.epoch, e.start_offset) for e in orders.leader_epoch_cache.entries] == [(0, 0), (2, 10)]
    assert [(e.epoch, e.start_offset) for e in events.leader_epoch_cache.entries] == [(0, 0), (2, 10)]
    assert values(orders) == _all_values()
    assert values(events) == _all_values()
    assert _kinds(manager) == [RecoveryKind.CHECKPOINT_REBUILT]
    assert fs.read_file(f"{directory}/{ORDERS}/leader-epoch-checkpoint") == b"0\n2\n0 0\n2 10\n"
    assert any("orders-0" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


def test_a_log_start_offset_beyond_the_log_end_deletes_nothing(log_dir: tuple[FileSystem, str]) -> None:
    fs, directory = log_dir
    bases = _stopped_with_two_partitions(fs, directory)
    fs.write_file(f"{directory}/log-start-offset-checkpoint", b"0\n1\norders 0 1000000\n", fsync=True)
    manager = _open(fs, directory)
    orders = manager.get_log(ORDERS)
    assert orders is not None
    assert [s.base_offset for s in orders.segments] == bases
    assert values(orders) == _all_values()
    assert orders.log_start_offset == 0
    assert _kinds(manager) == [RecoveryKind.CHECKPOINT_REBUILT]
    assert "1000000 is beyond the log end offset 40" in manager.recovery_report.actions[0].detail


def test_a_torn_segment_is_cut_loudly_and_later_segments_are_kept_aside(
    log_dir: tuple[FileSystem, str], caplog: pytest.LogCaptureFixture
) -> None:
    fs, directory = log_dir
    bases = _stopped_with_two_partitions(fs, directory, clean=False)
    torn = _segment(directory, bases[1])
    data = fs.read_file(torn)[: fs.file_size(torn) // 2]
    fs.write_file(torn, data, fsync=True)
    with caplog.at_level(logging.WARNING, logger="actorlog.storage.recovery"):
        manager = _open(fs, directory)
    orders = manager.get_log(ORDERS)
    assert orders is not None
    end = orders.log_end_offset
    assert bases[1] < end < bases[2]
    assert values(orders) == _all_values()[:end]
    report = manager.recovery_report
    cut = next(a for a in report.actions if a.kind is RecoveryKind.BYTES_TRUNCATED)
    assert cut.path == torn
    assert cut.truncated_bytes == len(data) - fs.file_size(torn)
    assert f"the log now ends at offset {end}" in cut.detail
    assert report.cut_from_offset(str(ORDERS)) == end
    for base in bases[2:]:
        assert fs.exists(_segment(directory, base) + ".stray")
    assert report.cut_from_offset(str(EVENTS)) is None  # the other partition lost nothing
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"bytes {fs.file_size(torn)}..{len(data) - 1}" in w and "orders-0" in w for w in warnings)


def test_a_missing_middle_segment_moves_the_later_ones_aside(log_dir: tuple[FileSystem, str]) -> None:
    fs, directory = log_dir
    bases = _stopped_with_two_partitions(fs, directory)
    for suffix in (".log", ".index", ".timeindex"):
        fs.delete_file(_segment(directory, bases[1], suffix))
    manager = _open(fs, directory)
    orders = manager.get_log(ORDERS)
    assert orders is not None
    # Before: a clean start kept the later segments and claimed offsets it did not hold.
    assert orders.log_end_offset == bases[1]
    assert values(orders) == _all_values()[: bases[1]]
    assert manager.recovery_report.cut_from_offset(str(ORDERS)) == bases[1]
    assert RecoveryKind.RECORDS_MISSING in _kinds(manager)


def test_a_missing_first_segment_empties_the_log_for_a_full_refetch(log_dir: tuple[FileSystem, str]) -> None:
    fs, directory = log_dir
    bases = _stopped_with_two_partitions(fs, directory)
    for suffix in (".log", ".index", ".timeindex"):
        fs.delete_file(_segment(directory, 0, suffix))
    manager = _open(fs, directory)
    orders = manager.get_log(ORDERS)
    assert orders is not None
    # Before: the log started at the second segment and claimed to be whole.
    assert (orders.log_start_offset, orders.log_end_offset) == (0, 0)
    assert all(fs.exists(_segment(directory, base) + ".stray") for base in bases[1:])
    assert manager.recovery_report.cut_from_offset(str(ORDERS)) == 0


def test_retention_keeps_the_head_check_quiet(log_dir: tuple[FileSystem, str]) -> None:
    # Segments that retention removed are not a missing head: the log start offset (and its leader
    # epoch checkpoint) moved up before the files went.
    fs, directory = log_dir
    bases = _stopped_with_two_partitions(fs, directory, clean=False)
    manager = _open(fs, directory)
    orders = manager.get_log(ORDERS)
    assert orders is not None
    orders.maybe_increment_log_start_offset(bases[2])
    orders.delete_old_segments(now_ms=0, wall_clock_ms=0)
    manager.close(now_ms=0)
    manager = _open(fs, directory)
    orders = manager.get_log(ORDERS)
    assert orders is not None
    assert (orders.log_start_offset, orders.log_end_offset) == (bases[2], RECORDS)
    assert manager.recovery_report.actions == []


@pytest.mark.parametrize(
    "name",
    ["recovery-point-offset-checkpoint", "replication-offset-checkpoint", "log-start-offset-checkpoint"],
)
def test_a_garbage_log_dir_checkpoint_stops_nothing(log_dir: tuple[FileSystem, str], name: str) -> None:
    fs, directory = log_dir
    _stopped_with_two_partitions(fs, directory)
    fs.write_file(f"{directory}/{name}", b"\x00garbage\nmore\n", fsync=True)
    manager = _open(fs, directory)
    for tp in (ORDERS, EVENTS):
        log = manager.get_log(tp)
        assert log is not None
        assert values(log) == _all_values()
    kinds = _kinds(manager)
    assert kinds[0] is RecoveryKind.CHECKPOINT_REBUILT
    if name == "recovery-point-offset-checkpoint":
        # No recovery point is known: every segment is re-validated, the marker notwithstanding.
        assert RecoveryKind.SEGMENT_RECOVERED in kinds
    manager.close(now_ms=0)
    assert fs.exists(f"{directory}/{CLEAN_SHUTDOWN_FILE}")
    assert not fs.read_file(f"{directory}/{name}").startswith(b"\x00")  # rewritten from the logs


def test_a_missing_time_index_is_recreated_so_later_fsyncs_work(log_dir: tuple[FileSystem, str]) -> None:
    fs, directory = log_dir
    _stopped_with_two_partitions(fs, directory)
    manager = _open(fs, directory)
    orders = manager.get_log(ORDERS)
    assert orders is not None
    orders.roll(now_ms=0)  # an empty active segment: recovery finds no timestamp to index
    active = orders.active_segment.base_offset
    manager.close(now_ms=0)
    fs.delete_file(_segment(directory, active, ".timeindex"))
    manager = _open(fs, directory)
    orders = manager.get_log(ORDERS)
    assert orders is not None
    append_values(orders, 1)
    orders.flush(now_ms=0)  # fsyncs the active segment's three files
    assert fs.exists(_segment(directory, active, ".timeindex"))
