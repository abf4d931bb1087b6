"""Checkpoint files: Kafka's text format, atomic replacement, strict reading."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from runtime.storage.checkpoint import (
    CheckpointWrite,
    EpochEntry,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    write_atomically,
)
from runtime.storage.errors import CorruptCheckpointError
from runtime.storage.fs import MemoryFileSystem
from runtime.storage.os_fs import OsFileSystem
from runtime.storage.topic_partition import TopicPartition


def _fs() -> MemoryFileSystem:
    fs = MemoryFileSystem()
    fs.make_dirs("/dir")
    return fs


def test_offset_checkpoint_text_format() -> None:
    fs = _fs()
    checkpoint = OffsetCheckpointFile(fs, "/dir/replication-offset-checkpoint")
    checkpoint.write({TopicPartition("orders", 1): 42, TopicPartition("a-b", 0): 7})
    assert fs.read_file("/dir/replication-offset-checkpoint") == b"0\n2\na-b 0 7\norders 1 42\n"
    assert checkpoint.read() == {TopicPartition("orders", 1): 42, TopicPartition("a-b", 0): 7}


def test_leader_epoch_checkpoint_text_format() -> None:
    fs = _fs()
    checkpoint = LeaderEpochCheckpointFile(fs, "/dir")
    checkpoint.write([EpochEntry(0, 0), EpochEntry(3, 150)])
    assert fs.read_file("/dir/leader-epoch-checkpoint") == b"0\n2\n0 0\n3 150\n"
    assert checkpoint.read() == [EpochEntry(0, 0), EpochEntry(3, 150)]


def test_a_missing_or_empty_file_is_empty() -> None:
    fs = _fs()
    assert OffsetCheckpointFile(fs, "/dir/nothing").read() == {}
    fs.write_file("/dir/empty", b"", fsync=False)
    assert OffsetCheckpointFile(fs, "/dir/empty").read() == {}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"1\n0\n", "unrecognized version '1'"),
        (b"0\n2\nt 0 5\n", "expected 2 entries .* but found 1"),
        (b"0\n1\nt 0\n", "malformed line 't 0'"),
        (b"0\n1\nt x 5\n", "'x' is not a number"),
        (b"0\nmany\n", "malformed entry count"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_bad_files_are_rejected_with_the_reason(content: bytes, message: str) -> None:
    fs = _fs()
    fs.write_file("/dir/cp", content, fsync=False)
    with pytest.raises(CorruptCheckpointError, match=message):
        OffsetCheckpointFile(fs, "/dir/cp").read()


def test_whitespace_separated_fields_are_accepted() -> None:
    fs = _fs()
    fs.write_file("/dir/cp", b"0\n1\nt\t 3   9\n", fsync=False)
    assert OffsetCheckpointFile(fs, "/dir/cp").read() == {TopicPartition("t", 3): 9}


def test_an_atomic_write_leaves_no_tmp_and_survives_a_crash() -> None:
    fs = _fs()
    write_atomically(fs, "/dir/cp", b"0\n0\n")
    assert fs.list_dir("/dir") == ["cp"]
    fs.crash()
    assert fs.read_file("/dir/cp") == b"0\n0\n"


def test_a_crash_before_the_rename_keeps_the_old_content() -> None:
    fs = _fs()
    write_atomically(fs, "/dir/cp", b"old")
    fs.write_file("/dir/cp.tmp", b"new", fsync=True)  # the write step, then power is lost
    fs.crash()
    assert fs.read_file("/dir/cp") == b"old"
    assert not fs.exists("/dir/cp.tmp")


def test_checkpoint_writes_can_be_prepared_then_run_elsewhere() -> None:
    fs = _fs()
    checkpoint = OffsetCheckpointFile(fs, "/dir/cp")
    offsets = {TopicPartition("t", 0): 1}
    job = checkpoint.prepare(offsets)
    offsets[TopicPartition("t", 0)] = 99  # later changes do not leak into a prepared write
    job.run()
    assert checkpoint.read() == {TopicPartition("t", 0): 1}


def test_a_snapshot_older_than_the_one_written_is_dropped() -> None:
    """One writer per file: the broker's periodic recovery-point checkpoint is prepared on the event
    loop and written in a worker thread; if a truncation checkpointed a lower recovery point in
    between, the older snapshot must not put the higher one back (a restart would then trust data
    written after the truncation without recovering it)."""
    fs = _fs()
    checkpoint = OffsetCheckpointFile(fs, "/dir/recovery-point-offset-checkpoint")
    tp = TopicPartition("t", 0)
    periodic = checkpoint.prepare({tp: 500})
    checkpoint.write({tp: 120})  # the truncation's checkpoint, written at once
    periodic.run()
    assert checkpoint.read() == {tp: 120}
    checkpoint.write({tp: 130})
    assert checkpoint.read() == {tp: 130}


def test_writes_from_many_threads_never_collide_on_the_tmp_file(tmp_path: Path) -> None:
    """The writes of one file share its ``.tmp`` name: they must run one at a time, whichever
    threads run them, and the newest snapshot is what stays."""
    fs = OsFileSystem()
    checkpoint = OffsetCheckpointFile(fs, str(tmp_path / "recovery-point-offset-checkpoint"))
    tp = TopicPartition("t", 0)
    jobs = [checkpoint.prepare({tp: offset}) for offset in range(400)]
    errors: list[OSError] = []

    def run(share: list[CheckpointWrite]) -> None:
        try:
            for job in share:
                job.run()
        except OSError as error:  # a collision on the .tmp file; the assertion below names it
            errors.append(error)

    threads = [threading.Thread(target=run, args=(jobs[start::4],)) for start in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert checkpoint.read() == {tp: 399}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["recovery-point-offset-checkpoint"]
