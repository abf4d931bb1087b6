"""Storage integrity at start: the active segment's batches are CRC-checked after any shutdown.

A clean shutdown proves the broker wrote and flushed its segments, not that their bytes are still what
it wrote when it starts again (a bad sector, a stray write, a copy gone wrong). Loading therefore
checks the active segment (each partition's last) batch by batch, framing and CRC, after a clean
shutdown too; at the first invalid batch it is cut there as recovery cuts after an unclean one, its
indexes rebuilt, and the replica's log end offset drops to that batch's base offset, from where a
follower fetches the lost tail again. Older segments are not read at a clean start (a full scan of the
log at every start costs too much; docs/log.md §7): damage there surfaces when the batch is read.
Every partition that needed work gets one "Recovered log ..." line; one that needed nothing, none.

All on the in-memory file system, through ``LogManager`` (the clean-shutdown marker and the recovery
point checkpoint as a broker writes them).
"""

from __future__ import annotations

import logging
import random

import pytest

from runtime.storage.config import LogConfig
from runtime.storage.errors import CorruptRecordError
from runtime.storage.fs import MemoryFileSystem
from runtime.storage.log import Log
from runtime.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from runtime.storage.log_recovery import RecoveryKind
from runtime.storage.records import MAGIC_OFFSET, iterate_batches
from runtime.storage.topic_partition import TopicPartition
from tests.unit.storage.helpers import append_values, decode_all, values

LOG_DIR = "/data/kafka-logs"
ORDERS = TopicPartition("orders", 0)
EVENTS = TopicPartition("events", 3)
# Segments of some 9 one-record batches, an index entry every other batch or so.
CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=100)
RECORDS = 44
RECOVERY_LOGGER = "actorlog.storage.recovery"


def _open(fs: MemoryFileSystem) -> LogManager:
    return LogManager.open(fs, LOG_DIR, now_ms=0, rng=random.Random(3), default_config=CONFIG)


def _log(manager: LogManager, tp: TopicPartition = ORDERS) -> Log:
    log = manager.get_log(tp)
    assert log is not None
    return log


def _stopped_cleanly(fs: MemoryFileSystem) -> list[bytes]:
    """Two partitions of RECORDS one-record batches (epoch 0, then 2 from offset 10), stopped cleanly;
    returns ``orders-0``'s batches as written (what the leader and the other follower still hold)."""
    manager = _open(fs)
    for tp in (ORDERS, EVENTS):
        log = manager.get_or_create_log(tp, now_ms=0)
        append_values(log, 10, leader_epoch=0)
        append_values(log, RECORDS - 10, leader_epoch=2)
        log.maybe_increment_high_watermark(RECORDS)
    written = [
        bytes(batch.data)
        for segment in _log(manager).segments
        for batch in iterate_batches(fs.read_file(segment.log_path))
    ]
    manager.close(now_ms=0)
    assert fs.exists(f"{LOG_DIR}/{CLEAN_SHUTDOWN_FILE}")
    return written


def _segment_paths(fs: MemoryFileSystem) -> list[str]:
    directory = f"{LOG_DIR}/{ORDERS}"
    return sorted(f"{directory}/{name}" for name in fs.list_dir(directory) if name.endswith(".log"))


def _flip(fs: MemoryFileSystem, path: str, position: int) -> None:
    data = bytearray(fs.read_file(path))
    data[position] ^= 0xFF
    fs.write_file(path, bytes(data), fsync=True)


def _assert_indexes_consistent(log: Log) -> None:
    """Every index entry points at a batch the segment still holds; every offset can be found."""
    for segment in log.segments:
        next_offset = segment.read_next_offset()
        for relative, position in zip(segment.offset_index.keys, segment.offset_index.values, strict=True):
            assert position < segment.size
            found = segment.translate_offset(segment.base_offset + relative)
            assert found is not None
            assert found.position == position
        for relative in segment.time_index.values:
            assert segment.base_offset + relative < next_offset
    for offset in range(log.log_start_offset, log.log_end_offset):
        records = decode_all(log.read(offset, 1 << 20).records)
        assert records[0].offset <= offset <= records[-1].offset


def _recovery_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == RECOVERY_LOGGER]


def _summary(caplog: pytest.LogCaptureFixture, tp: TopicPartition) -> list[logging.LogRecord]:
    return [
        record
        for record in caplog.records
        if record.name == RECOVERY_LOGGER and record.getMessage().startswith(f"Recovered log {tp} ")
    ]


@pytest.mark.parametrize(
    ("damage", "cause"),
    [
        pytest.param(lambda size: size - 3, "a CRC mismatch", id="payload-byte"),
        pytest.param(lambda _size: MAGIC_OFFSET, "a batch that cannot be framed", id="magic"),
    ],
)
def test_a_corrupt_batch_in_the_active_segment_is_cut_after_a_clean_shutdown(
    caplog: pytest.LogCaptureFixture, damage: object, cause: str
) -> None:
    fs = MemoryFileSystem()
    written = _stopped_cleanly(fs)
    active = _segment_paths(fs)[-1]
    batches = list(iterate_batches(fs.read_file(active)))
    assert len(batches) >= 4, "the active segment must hold batches after the damaged one"
    victim = batches[1]  # the second batch: one stays before it, the rest are cut with it
    assert callable(damage)
    _flip(fs, active, victim.position + damage(victim.size_in_bytes))
    cut_bytes = fs.file_size(active) - victim.position

    with caplog.at_level(logging.INFO, logger=RECOVERY_LOGGER):
        manager = _open(fs)
    orders = _log(manager)

    # The log ends where the corrupt batch began; the batches after it are gone too.
    lost_from = victim.header.base_offset
    assert orders.log_end_offset == lost_from
    assert fs.file_size(active) == victim.position
    assert values(orders) == [b"v%d" % i for i in range(lost_from)]
    assert orders.recovery_point == lost_from
    assert orders.high_watermark == lost_from
    assert orders.missing_flushed_offsets == (lost_from, RECORDS)
    _assert_indexes_consistent(orders)
    cut = next(a for a in manager.recovery_report.actions if a.kind is RecoveryKind.BYTES_TRUNCATED)
    assert (cut.path, cut.truncated_bytes, cut.cut_from_offset) == (active, cut_bytes, lost_from)

    # One summary line for the damaged partition, saying what was done with the numbers; nothing for
    # the intact one.
    (summary,) = _summary(caplog, ORDERS)
    assert summary.levelno == logging.WARNING
    message = summary.getMessage()
    assert message.startswith(f"Recovered log {ORDERS} (clean shutdown: yes): ")
    assert "rebuilt offset and time indexes of 1 segment(s)" in message
    assert (
        f"truncated {cut_bytes} bytes ({len(batches) - 1} batches) at offset {lost_from} after {cause}"
        in message
    )
    assert f"offsets {lost_from}..{RECORDS - 1} were flushed but are gone from this replica" in message
    assert message.endswith(f"log end offset {lost_from}, recovery point {lost_from}")
    assert not _summary(caplog, EVENTS)
    assert values(_log(manager, EVENTS)) == [b"v%d" % i for i in range(RECORDS)]

    # The replica fetches the lost tail again, as any follower that truncated.
    for batch in written[lost_from:]:
        orders.append_as_follower(batch, now_ms=0)
    assert values(orders) == [b"v%d" % i for i in range(RECORDS)]
    _assert_indexes_consistent(orders)

    # The cut was made durable: the next clean start finds nothing to do.
    manager.close(now_ms=0)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=RECOVERY_LOGGER):
        manager = _open(fs)
    assert _recovery_lines(caplog) == []
    assert _log(manager).log_end_offset == RECORDS


def test_the_clean_and_the_unclean_start_cut_a_corrupt_active_segment_at_the_same_batch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ends: dict[bool, int] = {}
    for clean in (True, False):
        fs = MemoryFileSystem()
        _stopped_cleanly(fs)
        active = _segment_paths(fs)[-1]
        victim = list(iterate_batches(fs.read_file(active)))[2]
        _flip(fs, active, victim.position + victim.size_in_bytes - 3)
        if not clean:
            fs.delete_file(f"{LOG_DIR}/{CLEAN_SHUTDOWN_FILE}")
        caplog.clear()
        with caplog.at_level(logging.INFO, logger=RECOVERY_LOGGER):
            manager = _open(fs)
        ends[clean] = _log(manager).log_end_offset
        assert ends[clean] == victim.header.base_offset
        (summary,) = _summary(caplog, ORDERS)
        assert f"(clean shutdown: {'yes' if clean else 'no'})" in summary.getMessage()
    assert ends[True] == ends[False]


def test_an_intact_log_after_a_clean_shutdown_is_kept_whole_and_logs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fs = MemoryFileSystem()
    _stopped_cleanly(fs)
    directory = f"{LOG_DIR}/{ORDERS}"
    files = {name: fs.read_file(f"{directory}/{name}") for name in fs.list_dir(directory)}
    with caplog.at_level(logging.DEBUG, logger=RECOVERY_LOGGER):
        manager = _open(fs)
    assert _recovery_lines(caplog) == []
    assert manager.recovery_report.actions == []
    orders = _log(manager)
    assert (orders.log_start_offset, orders.log_end_offset, orders.recovery_point) == (0, RECORDS, RECORDS)
    assert values(orders) == [b"v%d" % i for i in range(RECORDS)]
    assert orders.missing_flushed_offsets is None
    # Checking read the active segment and wrote nothing: every file is as the shutdown left it.
    assert {name: fs.read_file(f"{directory}/{name}") for name in fs.list_dir(directory)} == files


def test_a_corrupt_older_segment_is_not_read_at_a_clean_start(caplog: pytest.LogCaptureFixture) -> None:
    """The documented limit (docs/log.md §7): at a clean start only the active segment is checked.
    Damage below it stays in the log and surfaces when the batch is read (a follower's or a
    consumer's CRC check), as in Kafka; the start neither reads nor logs it."""
    fs = MemoryFileSystem()
    _stopped_cleanly(fs)
    paths = _segment_paths(fs)
    assert len(paths) >= 3
    older = paths[-2]
    victim = list(iterate_batches(fs.read_file(older)))[1]
    _flip(fs, older, victim.position + victim.size_in_bytes - 3)
    with caplog.at_level(logging.INFO, logger=RECOVERY_LOGGER):
        manager = _open(fs)
    assert _recovery_lines(caplog) == []
    orders = _log(manager)
    assert orders.log_end_offset == RECORDS
    assert _segment_paths(fs) == paths
    with pytest.raises(CorruptRecordError, match="stored CRC"):
        decode_all(orders.read(victim.header.base_offset, 1 << 20).records)


def test_a_clean_start_that_cut_flushed_records_is_an_unclean_start() -> None:
    """Regression: the clean-shutdown marker said nothing was lost, but the check of the active
    segment cut flushed records. The registration must say ``unclean_start`` (docs/controller.md §2):
    a controller finding this broker in an ISR written before it restarted treats it as bounced
    instead of trusting it with records it no longer has. An intact clean start says nothing, and
    the flag outlives a clean stop that no controller saw, as any unclean start does."""
    fs = MemoryFileSystem()
    _stopped_cleanly(fs)
    intact = _open(fs)
    assert not intact.unclean_start
    intact.close(now_ms=0)

    active = _segment_paths(fs)[-1]
    victim = list(iterate_batches(fs.read_file(active)))[1]
    _flip(fs, active, victim.position + victim.size_in_bytes - 3)
    manager = _open(fs)
    assert _log(manager).missing_flushed_offsets is not None
    assert manager.unclean_start

    manager.close(now_ms=0)  # stopped cleanly before any controller saw it
    assert _open(fs).unclean_start
