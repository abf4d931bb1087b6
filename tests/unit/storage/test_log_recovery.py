"""Loading a log: clean and unclean starts, torn tails, lost indexes, leftovers."""

from __future__ import annotations

from runtime.storage.config import LogConfig
from runtime.storage.fs import MemoryFileSystem
from runtime.storage.log import Log
from tests.unit.storage.helpers import append_values, batch, open_log, values

CONFIG = LogConfig(segment_bytes=500, index_interval_bytes=100)


def _populated(fs: MemoryFileSystem, count: int = 30) -> Log:
    log = open_log(fs, config=CONFIG)
    append_values(log, count)
    return log


def test_a_clean_shutdown_skips_recovery_of_older_segments_and_keeps_the_indexes() -> None:
    fs = MemoryFileSystem()
    log = _populated(fs)
    log.close(flush=True)
    older_log_path = log.segments[0].log_path
    # Damage a byte in the middle of an older segment: a clean start does not look at it (only the
    # active segment is CRC-checked, tests/unit/test_storage_integrity.py).
    data = bytearray(fs.read_file(older_log_path))
    data[70] ^= 0xFF
    fs.write_file(older_log_path, bytes(data), fsync=True)
    reopened = open_log(fs, config=CONFIG, clean_shutdown=True, recovery_point=30)
    assert reopened.log_end_offset == 30
    assert reopened.recovery_point == 30
    unclean = open_log(fs, config=CONFIG, recovery_point=0)
    assert unclean.log_end_offset < 30  # the damaged batch and everything after it are cut


def test_an_unclean_start_cuts_a_torn_tail_and_moves_later_segments_aside() -> None:
    fs = MemoryFileSystem()
    log = _populated(fs)
    segments = log.segments
    assert len(segments) >= 3
    middle = segments[1]
    expected = segments[2].base_offset - 1  # the last batch of the middle segment is torn
    data = fs.read_file(middle.log_path)
    fs.write_file(middle.log_path, data[: len(data) - 10], fsync=True)  # a torn last batch
    recovered = open_log(fs, config=CONFIG, recovery_point=middle.base_offset)
    assert len(recovered.segments) == 2
    assert recovered.log_end_offset == expected
    assert values(recovered) == [b"v%d" % i for i in range(expected)]
    assert recovered.recovery_point == middle.base_offset  # the recovered tail is not known durable
    later = segments[2].log_path
    assert not fs.exists(later)
    assert fs.exists(later + ".stray")


def test_missing_or_corrupt_indexes_are_rebuilt_even_after_a_clean_shutdown() -> None:
    fs = MemoryFileSystem()
    log = _populated(fs)
    first, second = log.segments[0], log.segments[1]
    entries = first.offset_index.entries
    assert entries > 0
    log.close(flush=True)
    fs.delete_file(first.offset_index.path)
    fs.write_file(second.offset_index.path, b"\x00\x00\x00", fsync=True)
    reopened = open_log(fs, config=CONFIG, clean_shutdown=True, recovery_point=30)
    assert reopened.segments[0].offset_index.entries == entries
    assert values(reopened) == [b"v%d" % i for i in range(30)]


def test_leftovers_from_a_crash_are_removed() -> None:
    fs = MemoryFileSystem()
    log = _populated(fs)
    log.close(flush=True)
    directory = log.directory
    for name in (
        "00000000000000000000.log.deleted",
        "leader-epoch-checkpoint.tmp",
        "00000000000000099999.index",
    ):
        fs.write_file(f"{directory}/{name}", b"junk", fsync=True)
    open_log(fs, config=CONFIG)
    names = fs.list_dir(directory)
    assert not any(n.endswith((".deleted", ".tmp")) for n in names)
    assert "00000000000000099999.index" not in names


def test_a_log_start_offset_beyond_a_log_nothing_cut_is_ignored() -> None:
    # Only a cut (a power loss) can leave the log below its start offset; without one the
    # checkpoint entry contradicts the files, and records are not deleted on its word.
    fs = MemoryFileSystem()
    log = _populated(fs, 5)
    log.close(flush=True)
    reopened = open_log(fs, config=CONFIG, log_start_offset=50, high_watermark=60)
    assert values(reopened) == [b"v%d" % i for i in range(5)]
    assert (reopened.log_start_offset, reopened.log_end_offset, reopened.high_watermark) == (0, 5, 5)


def test_the_high_watermark_is_clamped_on_load() -> None:
    fs = MemoryFileSystem()
    _populated(fs, 10).close(flush=True)
    assert open_log(fs, config=CONFIG, high_watermark=99).high_watermark == 10
    assert open_log(fs, config=CONFIG, high_watermark=4).high_watermark == 4


def test_the_epoch_cache_is_trimmed_to_the_recovered_log() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs, config=CONFIG)
    for offset, epoch in enumerate([0, 0, 1, 2]):
        log.append_as_follower(batch(b"x", base_offset=offset, leader_epoch=epoch), now_ms=0)
    data = fs.read_file(log.active_segment.log_path)
    fs.write_file(log.active_segment.log_path, data[: len(data) - 1], fsync=True)
    recovered = open_log(fs, config=CONFIG)
    assert recovered.log_end_offset == 3
    assert [(e.epoch, e.start_offset) for e in recovered.leader_epoch_cache.entries] == [(0, 0), (1, 2)]


def test_reopening_keeps_appending_where_it_stopped() -> None:
    fs = MemoryFileSystem()
    log = _populated(fs, 12)
    log.close(flush=True)
    reopened = open_log(fs, config=CONFIG, clean_shutdown=True, recovery_point=12)
    append_values(reopened, 8)
    reopened.close(flush=True)
    final = open_log(fs, config=CONFIG)
    assert values(final) == [b"v%d" % i for i in range(20)]
