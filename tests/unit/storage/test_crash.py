"""Crash tests: damaged files and power losses always recover to a valid prefix of what was written.

* Cuts and bit flips: a log is written (several segments, real files and memory files), one of its
  segment files is cut at a random byte or has random bits flipped, and the log is reopened after an
  unclean shutdown with recovery point 0 (everything is re-validated).
* Power losses: appends, flushes and truncations interleave at random, then ``MemoryFileSystem.crash``
  drops what was not fsynced (keeping a random torn prefix of unsynced appends), and the log is reopened
  with the recovery point it had reached.

After recovery, the records must be a prefix of the ones written, everything below the recovery point
must still be there, and every read from any offset must return whole, CRC-valid batches holding it.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from runtime.storage.config import LogConfig
from runtime.storage.fs import FileSystem, MemoryFileSystem
from runtime.storage.log import Log
from runtime.storage.os_fs import OsFileSystem
from runtime.storage.records import iterate_batches
from tests.unit.storage.helpers import BASE_TIME_MS, batch, open_log, read_all

CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=200)


def _write(log: Log, rng: random.Random, count: int) -> list[tuple[int, bytes | None]]:
    written: list[tuple[int, bytes | None]] = []
    for _ in range(count):
        values = [rng.randbytes(rng.randrange(0, 120)) for _ in range(rng.randrange(1, 5))]
        info = log.append_as_leader(batch(*values), rng.randrange(3), now_ms=0, wall_clock_ms=BASE_TIME_MS)
        written.extend(zip(range(info.first_offset, info.last_offset + 1), values, strict=True))
    return written


def _check_valid_prefix(log: Log, written: list[tuple[int, bytes | None]], rng: random.Random) -> None:
    recovered = read_all(log)
    assert recovered == written[: len(recovered)], "recovery must keep a prefix of what was written"
    assert log.log_end_offset == (recovered[-1][0] + 1 if recovered else log.log_start_offset)
    for _ in range(20):
        if log.log_end_offset == log.log_start_offset:
            break
        offset = rng.randrange(log.log_start_offset, log.log_end_offset)
        result = log.read(offset, rng.randrange(1, 5000))
        batches = list(iterate_batches(result.records))
        assert batches, f"a read at {offset} returned no whole batch"
        for read_batch in batches:
            read_batch.ensure_valid()
        assert batches[0].header.base_offset <= offset <= batches[0].header.last_offset


def _file_system(kind: str, tmp_path: Path) -> tuple[FileSystem, str]:
    if kind == "memory":
        return MemoryFileSystem(), "/logs/t-0"
    return OsFileSystem(), str(tmp_path / "t-0")


def _segment_files(fs: FileSystem, directory: str) -> list[str]:
    return [
        f"{directory}/{name}"
        for name in fs.list_dir(directory)
        if name.endswith((".log", ".index", ".timeindex"))
    ]


@pytest.mark.parametrize("kind", ["memory", "os"])
@pytest.mark.parametrize("seed", range(12))
def test_a_file_cut_at_a_random_byte_recovers_to_a_valid_prefix(kind: str, seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    fs, directory = _file_system(kind, tmp_path)
    log = open_log(fs, directory, CONFIG)
    written = _write(log, rng, 60)
    log.close(flush=rng.random() < 0.5)
    victim = rng.choice(_segment_files(fs, directory))
    data = fs.read_file(victim)
    fs.write_file(victim, data[: rng.randrange(len(data) + 1)], fsync=True)
    recovered = open_log(fs, directory, CONFIG, recovery_point=0)
    _check_valid_prefix(recovered, written, rng)
    if victim.endswith(".log"):
        assert recovered.log_end_offset <= written[-1][0] + 1
    else:
        assert read_all(recovered) == written, "a damaged index is rebuilt, no record is lost"


@pytest.mark.parametrize("kind", ["memory", "os"])
@pytest.mark.parametrize("seed", range(12))
def test_flipped_bits_recover_to_a_valid_prefix(kind: str, seed: int, tmp_path: Path) -> None:
    rng = random.Random(1000 + seed)
    fs, directory = _file_system(kind, tmp_path)
    log = open_log(fs, directory, CONFIG)
    written = _write(log, rng, 60)
    log.close(flush=True)
    victim = rng.choice(_segment_files(fs, directory))
    data = bytearray(fs.read_file(victim))
    if not data:
        pytest.skip("the chosen file is empty")
    for _ in range(rng.randrange(1, 4)):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    fs.write_file(victim, bytes(data), fsync=True)
    recovered = open_log(fs, directory, CONFIG, recovery_point=0)
    _check_valid_prefix(recovered, written, rng)


@pytest.mark.parametrize("seed", range(25))
def test_power_losses_keep_everything_below_the_recovery_point(seed: int) -> None:
    rng = random.Random(5000 + seed)
    fs = MemoryFileSystem()
    log = open_log(fs, config=CONFIG)
    written: list[tuple[int, bytes | None]] = []
    for _ in range(rng.randrange(3, 8)):
        written.extend(_write(log, rng, rng.randrange(1, 25)))
        action = rng.random()
        if action < 0.4:
            log.flush(now_ms=0)
        elif action < 0.55 and log.log_end_offset > 0:
            # Truncate at a batch boundary, as replication does.
            boundaries = [b.header.base_offset for b in iterate_batches(log.read(0, 1 << 30).records)]
            target = rng.choice(boundaries)
            log.truncate_to(target, now_ms=0)
            written = [(o, v) for o, v in written if o < target]
    durable = [(o, v) for o, v in written if o < log.recovery_point]
    recovery_point = log.recovery_point
    fs.crash(lambda _path, durable_length, visible_length: rng.randrange(durable_length, visible_length + 1))
    recovered = open_log(fs, config=CONFIG, recovery_point=recovery_point)
    _check_valid_prefix(recovered, written, rng)
    assert read_all(recovered)[: len(durable)] == durable, "fsynced records must survive a power loss"


def test_a_later_segment_written_back_before_an_earlier_one_is_not_kept_across_the_hole() -> None:
    fs = MemoryFileSystem()
    one = batch(b"x" * 50)
    log = open_log(fs, config=LogConfig(segment_bytes=len(one) * 3))
    for _ in range(3):
        log.append_as_leader(one, 0, now_ms=0, wall_clock_ms=BASE_TIME_MS)
    log.flush(now_ms=0)
    for _ in range(4):  # offsets 3-5 fill segment 3, offset 6 opens segment 6
        log.append_as_leader(one, 0, now_ms=0, wall_clock_ms=BASE_TIME_MS)
    log.begin_flush().run()  # every file durable (names included), then more unsynced appends
    log.append_as_leader(one, 0, now_ms=0, wall_clock_ms=BASE_TIME_MS)  # offset 7 in segment 6
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    second = log.segments[1]
    with_tail = fs.read_file(second.log_path)
    fs.write_file(second.log_path, with_tail[: len(one)], fsync=True)  # segment 3 lost offsets 4-5
    fs.crash(lambda _path, _durable, visible: visible)  # segment 6 kept everything it had
    recovered = open_log(fs, config=LogConfig(segment_bytes=len(one) * 3), recovery_point=3)
    assert [offset for offset, _ in read_all(recovered)] == [0, 1, 2, 3]
    assert [s.base_offset for s in recovered.segments] == [0, 3]
