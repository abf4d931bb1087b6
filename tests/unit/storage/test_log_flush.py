"""Flush as a two-step job (off the event loop) and what a crash keeps."""

from __future__ import annotations

import asyncio

from runtime.storage.config import LogConfig
from runtime.storage.fs import MemoryFileSystem
from tests.unit.storage.helpers import append_values, open_log, values


def test_a_flush_job_fsyncs_the_unflushed_segments_then_moves_the_recovery_point() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs, config=LogConfig(segment_bytes=400))
    append_values(log, 12)
    assert len(log.segments) > 2
    job = log.begin_flush()
    assert log.recovery_point == 0  # nothing moves until the job completed
    assert set(job.paths) == {p for s in log.segments for p in s.file_paths()}
    assert job.directory == log.directory  # new segment files: their names must be durable too
    job.run()
    log.complete_flush(job, now_ms=5)
    assert (log.recovery_point, log.last_flush_ms) == (12, 5)
    assert fs.unsynced_bytes() == 0


def test_an_empty_job_is_cheap_and_jobs_are_idempotent() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    append_values(log, 3)
    log.flush(now_ms=0)
    job = log.begin_flush()
    assert job.is_empty
    append_values(log, 2)
    job = log.begin_flush(4)
    job.run()
    job.run()
    log.complete_flush(job, now_ms=0)
    log.complete_flush(job, now_ms=0)
    assert log.recovery_point == 4
    later = log.begin_flush()
    assert len(later.paths) == 3  # only the active segment's files


def test_a_job_that_raced_with_a_truncation_does_not_move_the_recovery_point() -> None:
    log = open_log(MemoryFileSystem())
    append_values(log, 10)
    job = log.begin_flush()
    log.truncate_to(4, now_ms=0)
    job.run()
    log.complete_flush(job, now_ms=0)
    assert log.recovery_point == 0
    log.flush(now_ms=0)
    assert log.recovery_point == 4


def test_a_flush_job_runs_in_a_worker_thread() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    append_values(log, 5)

    async def flush_off_the_loop() -> None:
        job = log.begin_flush()
        await asyncio.to_thread(job.run)
        log.complete_flush(job, now_ms=1)

    asyncio.run(flush_off_the_loop())
    assert log.recovery_point == 5
    fs.crash()
    assert values(open_log(fs)) == [b"v%d" % i for i in range(5)]


def test_a_crash_keeps_exactly_what_was_flushed() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs, config=LogConfig(segment_bytes=300))
    append_values(log, 6)
    log.flush(now_ms=0)
    append_values(log, 6)  # written to the OS, not fsynced
    fs.crash()
    recovered = open_log(fs, recovery_point=6)
    assert values(recovered) == [b"v%d" % i for i in range(6)]


def test_a_process_crash_keeps_everything_written_to_the_os() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    append_values(log, 7)
    # No close, no flush: the process dies; the OS (the memory FS) still has every byte.
    assert values(open_log(fs)) == [b"v%d" % i for i in range(7)]


def test_the_flush_ms_rule() -> None:
    log = open_log(MemoryFileSystem(), config=LogConfig(flush_ms=1000), now_ms=0)
    assert not log.flush_due(5000)  # nothing to flush
    append_values(log, 1)
    assert not log.flush_due(999)
    assert log.flush_due(1000)
    log.flush(now_ms=1000)
    assert not log.flush_due(1999)
