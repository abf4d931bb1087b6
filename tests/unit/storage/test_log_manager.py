"""LogManager: one log dir, its checkpoint files and the clean-shutdown marker (memory and real files)."""

from __future__ import annotations

import random

from runtime.storage.config import LogConfig
from runtime.storage.fs import FileSystem, MemoryFileSystem
from runtime.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager, parse_partition_directory
from runtime.storage.topic_partition import TopicPartition
from tests.unit.storage.helpers import append_values, values

ORDERS = TopicPartition("orders", 0)
EVENTS = TopicPartition("user-events", 12)


def _open(fs: FileSystem, directory: str, **kwargs: object) -> LogManager:
    return LogManager.open(fs, directory, now_ms=0, rng=random.Random(3), **kwargs)  # type: ignore[arg-type]


def test_partition_directories_are_named_topic_dash_partition() -> None:
    assert parse_partition_directory("user-events-12") == EVENTS
    assert parse_partition_directory("orders") is None
    assert parse_partition_directory("orders-x") is None
    assert str(EVENTS) == "user-events-12"


def test_a_clean_shutdown_writes_checkpoints_and_the_marker(log_dir: tuple[FileSystem, str]) -> None:
    fs, directory = log_dir
    manager = _open(fs, directory)
    assert not manager.had_clean_shutdown
    orders = manager.get_or_create_log(ORDERS, now_ms=0)
    events = manager.get_or_create_log(EVENTS, now_ms=0)
    append_values(orders, 5)
    append_values(events, 3)
    orders.maybe_increment_high_watermark(4)
    events.maybe_increment_high_watermark(3)
    manager.close(now_ms=10)
    assert fs.exists(f"{directory}/{CLEAN_SHUTDOWN_FILE}")
    assert (
        fs.read_file(f"{directory}/replication-offset-checkpoint") == b"0\n2\norders 0 4\nuser-events 12 3\n"
    )
    assert (
        fs.read_file(f"{directory}/recovery-point-offset-checkpoint")
        == b"0\n2\norders 0 5\nuser-events 12 3\n"
    )
    assert fs.read_file(f"{directory}/log-start-offset-checkpoint") == b"0\n0\n"

    reopened = _open(fs, directory)
    assert reopened.had_clean_shutdown
    assert not fs.exists(f"{directory}/{CLEAN_SHUTDOWN_FILE}")  # consumed at startup
    assert set(reopened.logs) == {ORDERS, EVENTS}
    loaded = reopened.get_log(ORDERS)
    assert loaded is not None
    assert (loaded.high_watermark, loaded.log_end_offset, loaded.recovery_point) == (4, 5, 5)
    assert values(loaded) == [b"v%d" % i for i in range(5)]


def test_an_unclean_start_recovers_from_the_checkpointed_recovery_points(
    log_dir: tuple[FileSystem, str],
) -> None:
    fs, directory = log_dir
    manager = _open(fs, directory)
    log = manager.get_or_create_log(ORDERS, LogConfig(segment_bytes=300), now_ms=0)
    append_values(log, 10)
    log.flush(now_ms=0)
    manager.checkpoint_recovery_points()
    append_values(log, 5)
    log.maybe_increment_high_watermark(12)
    manager.checkpoint_high_watermarks()
    # The process dies here: no close, no marker.
    reopened = _open(fs, directory, topic_configs={"orders": LogConfig(segment_bytes=300)})
    assert not reopened.had_clean_shutdown
    recovered = reopened.get_log(ORDERS)
    assert recovered is not None
    assert recovered.recovery_point == 10
    assert recovered.high_watermark == 12
    assert values(recovered) == [b"v%d" % i for i in range(15)]


def test_log_start_offsets_above_the_first_segment_are_checkpointed(log_dir: tuple[FileSystem, str]) -> None:
    fs, directory = log_dir
    manager = _open(fs, directory)
    log = manager.get_or_create_log(ORDERS, now_ms=0)
    append_values(log, 10)
    log.maybe_increment_high_watermark(10)
    log.maybe_increment_log_start_offset(6)
    manager.checkpoint_log_start_offsets()
    assert fs.read_file(f"{directory}/log-start-offset-checkpoint") == b"0\n1\norders 0 6\n"
    manager.close(now_ms=0)
    reopened = _open(fs, directory).get_log(ORDERS)
    assert reopened is not None
    assert reopened.log_start_offset == 6


def test_truncation_checkpoints_the_recovery_points(log_dir: tuple[FileSystem, str]) -> None:
    fs, directory = log_dir
    manager = _open(fs, directory)
    log = manager.get_or_create_log(ORDERS, now_ms=0)
    append_values(log, 8)
    log.flush(now_ms=0)
    manager.checkpoint_recovery_points()
    assert manager.truncate_to(ORDERS, 3, now_ms=0)
    assert fs.read_file(f"{directory}/recovery-point-offset-checkpoint") == b"0\n1\norders 0 3\n"


def test_deleting_a_log_removes_its_directory_and_checkpoint_entries(log_dir: tuple[FileSystem, str]) -> None:
    fs, directory = log_dir
    manager = _open(fs, directory)
    append_values(manager.get_or_create_log(ORDERS, now_ms=0), 3)
    manager.get_or_create_log(EVENTS, now_ms=0)
    manager.delete_log(ORDERS)
    assert manager.get_log(ORDERS) is None
    assert fs.list_dir(directory) == sorted(
        [
            "meta.properties",
            "recovery-point-offset-checkpoint",
            "log-start-offset-checkpoint",
            "replication-offset-checkpoint",
            "user-events-12",
        ]
    )
    assert manager.read_high_watermark_checkpoint() == {EVENTS: 0}


def test_interrupted_deletions_are_finished_at_startup(log_dir: tuple[FileSystem, str]) -> None:
    fs, directory = log_dir
    fs.make_dirs(f"{directory}/orders-0.0123abcd-delete")
    fs.write_file(f"{directory}/orders-0.0123abcd-delete/00000000000000000000.log", b"x", fsync=False)
    fs.make_dirs(f"{directory}/not a partition")
    manager = _open(fs, directory)
    assert manager.logs == {}
    assert fs.list_dir(directory) == ["meta.properties", "not a partition"]


def test_retention_over_every_log(log_dir: tuple[FileSystem, str]) -> None:
    fs, directory = log_dir
    manager = _open(fs, directory, default_config=LogConfig(segment_bytes=200, retention_ms=0))
    log = manager.get_or_create_log(ORDERS, now_ms=0)
    append_values(log, 10)
    log.maybe_increment_high_watermark(10)
    segments_before = len(log.segments)
    assert segments_before > 2
    deleted = manager.delete_old_segments(now_ms=0, wall_clock_ms=2_000_000_000_000)
    assert deleted == segments_before
    assert [(s.base_offset, s.size) for s in log.segments] == [(10, 0)]
    assert log.log_start_offset == 10


def test_an_unclean_start_is_one_on_a_used_dir_and_lasts_until_a_controller_sees_it(
    log_dir: tuple[FileSystem, str],
) -> None:
    """A new dir has nothing to lose. A used dir opened without the clean-shutdown marker is an
    unclean start, and a clean stop before a controller has seen the process hands that on."""
    fs, directory = log_dir
    first = _open(fs, directory)
    assert (first.first_use, first.unclean_start) == (True, False)
    assert fs.read_file(f"{directory}/meta.properties") == b"version=0\n"
    append_values(first.get_or_create_log(ORDERS, now_ms=0), 3)
    unclean = _open(fs, directory)  # the first process died: no close, no marker
    assert unclean.unclean_start
    unclean.close(now_ms=0)  # stopped cleanly before any controller saw it
    inherited = _open(fs, directory)
    assert inherited.unclean_start
    inherited.mark_seen()
    inherited.close(now_ms=0)
    assert not _open(fs, directory).unclean_start


class _DirectorySyncs(MemoryFileSystem):
    """Records the directories synced."""

    def __init__(self) -> None:
        super().__init__()
        self.synced_dirs: list[str] = []

    def fsync_dir(self, path: str) -> None:
        super().fsync_dir(path)
        self.synced_dirs.append(path)


def test_creating_a_log_syncs_no_directory_and_a_power_loss_before_a_flush_takes_nothing_durable() -> None:
    # Issue 19: a LeaderAndIsr creating thousands of logs synced the log dir and each new partition
    # directory, two directory fsyncs per partition; Kafka syncs none (docs/log.md §8).
    fs = _DirectorySyncs()
    manager = _open(fs, "/data")
    fs.synced_dirs.clear()
    orders = manager.get_or_create_log(ORDERS, now_ms=0)
    events = manager.get_or_create_log(EVENTS, now_ms=0)
    assert fs.synced_dirs == []
    append_values(orders, 3)
    append_values(events, 2)
    # The first flush syncs the new partition directory with the files; a checkpoint in the log dir
    # syncs the log dir, new partition directories included.
    fs.synced_dirs.clear()
    events.flush(now_ms=1)
    assert fs.synced_dirs == ["/data/user-events-12"]
    manager.checkpoint_recovery_points()
    assert fs.synced_dirs[-1] == "/data"
    fs.crash()
    reopened = _open(fs, "/data")
    assert reopened.unclean_start
    lost, kept = reopened.get_log(ORDERS), reopened.get_log(EVENTS)
    # Never flushed: its files were never durable, and it loads empty, as a replica that never had it.
    assert lost is not None
    assert (lost.log_end_offset, values(lost)) == (0, [])
    assert kept is not None
    assert values(kept) == [b"v0", b"v1"]
