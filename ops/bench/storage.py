"""Storage benchmark: the Log versus raw ``os.write``/``os.pread`` of the same bytes, side by side.

    python -m ops.bench.storage [--megabytes 256] [--record-bytes 1024] [--batch-bytes 16384]
                                [--read-bytes 1048576] [--repeat 3] [--dir DIR]

Workload (issue 3): records of ``--record-bytes`` in batches of at most ``--batch-bytes`` (v2,
uncompressed), ``--megabytes`` in total, on real files (``OsFileSystem``) in a temporary directory.

* append, raw: ``os.write`` of each batch's bytes to an ``O_APPEND`` file;
* append, leader: ``Log.append_as_leader`` of each producer batch (CRC and header validation,
  offset assignment and epoch stamping in place, write, sparse indexing; records are not walked
  under the default ``records.validation = batch``);
* append, follower: ``Log.append_as_follower`` of each leader-stamped batch (CRC check, write);
* append, follower with fetch-size appends: the same batches, ``--read-bytes`` of them per append, as a
  replica fetcher appends a fetch response;
* read, raw: sequential ``os.pread`` of ``--read-bytes`` chunks of the raw file;
* read, log: sequential ``Log.read(offset, --read-bytes)`` from offset 0, the next offset taken from
  the last complete batch of each result, as a fetcher does.

No fsync anywhere (Kafka's default: the page cache). Each figure is the best of ``--repeat`` runs;
the ratio is ours / raw (target >= 0.5 for append and read). Raw appends write the same batches
one ``os.write`` each.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from runtime.storage.config import LogConfig
from runtime.storage.log import Log
from runtime.storage.os_fs import OsFileSystem
from runtime.storage.record_builder import RecordBatchBuilder, SimpleRecord, build_batch
from runtime.storage.records import complete_batches_extent, iterate_batches, read_header


@dataclass(frozen=True, slots=True)
class Figure:
    name: str
    megabytes_per_second: float


def make_batches(total_bytes: int, record_bytes: int, batch_bytes: int) -> list[bytes]:
    rng = random.Random(7)
    payload = rng.randbytes(record_bytes)
    batches: list[bytes] = []
    produced = 0
    timestamp = 1_700_000_000_000
    while produced < total_bytes:
        builder = RecordBatchBuilder(write_limit=batch_bytes)
        while builder.has_room_for(None, payload):
            builder.append(SimpleRecord(payload, timestamp=timestamp))
            timestamp += 1
        batch = builder.build()
        batches.append(batch)
        produced += len(batch)
    return batches


def leader_stamped(batches: list[bytes]) -> list[bytes]:
    stamped: list[bytes] = []
    offset = 0
    for batch in batches:
        header = read_header(batch, 0)
        records = next(iterate_batches(batch)).records()
        stamped.append(
            build_batch(
                [SimpleRecord(r.value, r.key, r.headers, r.timestamp) for r in records],
                base_offset=offset,
                partition_leader_epoch=0,
            )
        )
        offset += header.records_count
    return stamped


def timed(total_bytes: int, run: Callable[[], None]) -> float:
    start = time.perf_counter()
    run()
    elapsed = time.perf_counter() - start
    return total_bytes / elapsed / 1e6


def bench(directory: str, batches: list[bytes], stamped: list[bytes], read_bytes: int) -> list[Figure]:
    total = sum(len(batch) for batch in batches)
    raw_path = os.path.join(directory, "raw.dat")
    fs = OsFileSystem()
    config = LogConfig(segment_bytes=1 << 30)

    def raw_append() -> None:
        fd = os.open(raw_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        try:
            for batch in batches:
                os.write(fd, batch)
        finally:
            os.close(fd)

    def raw_read() -> None:
        fd = os.open(raw_path, os.O_RDONLY)
        try:
            position = 0
            while chunk := os.pread(fd, read_bytes, position):
                position += len(chunk)
        finally:
            os.close(fd)

    def open_log(name: str) -> Log:
        path = os.path.join(directory, name)
        shutil.rmtree(path, ignore_errors=True)
        return Log.open(fs, path, config, now_ms=0, rng=random.Random(1))

    leader_log: list[Log] = []

    def leader_append() -> None:
        log = open_log("leader-0")
        for batch in batches:
            log.append_as_leader(batch, 0, now_ms=0, wall_clock_ms=1_700_000_000_000)
        leader_log.append(log)

    def follower_append() -> None:
        log = open_log("follower-0")
        for batch in stamped:
            log.append_as_follower(batch, now_ms=0)
        log.close()

    fetches: list[bytes] = []
    chunk: list[bytes] = []
    for stamped_batch in stamped:
        chunk.append(stamped_batch)
        if sum(len(b) for b in chunk) >= read_bytes:
            fetches.append(b"".join(chunk))
            chunk = []
    if chunk:
        fetches.append(b"".join(chunk))

    def follower_fetch_append() -> None:
        log = open_log("follower-1")
        for fetched in fetches:
            log.append_as_follower(fetched, now_ms=0)
        log.close()

    def log_read() -> None:
        log = leader_log[-1]
        offset = 0
        end = log.log_end_offset
        while offset < end:
            result = log.read(offset, read_bytes)
            _, next_offset = complete_batches_extent(result.records)
            offset = next_offset

    figures = [
        Figure("append raw os.write", timed(total, raw_append)),
        Figure("append Log.append_as_leader", timed(total, leader_append)),
        Figure("append Log.append_as_follower", timed(total, follower_append)),
        Figure("append follower, fetch-size appends", timed(total, follower_fetch_append)),
        Figure("read raw os.pread", timed(total, raw_read)),
        Figure("read Log.read", timed(total, log_read)),
    ]
    leader_log[-1].close()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--megabytes", type=int, default=256, help="bytes appended per run, in MB")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--batch-bytes", type=int, default=16384)
    parser.add_argument("--read-bytes", type=int, default=1 << 20, help="max bytes per read (fetch size)")
    parser.add_argument("--repeat", type=int, default=3, help="runs; the best of each figure is kept")
    parser.add_argument("--dir", default=None, help="directory for the files (default: a temporary one)")
    args = parser.parse_args(argv)

    batches = make_batches(args.megabytes * 1_000_000, args.record_bytes, args.batch_bytes)
    stamped = leader_stamped(batches)
    total = sum(len(batch) for batch in batches)
    records_per_batch = read_header(batches[0], 0).records_count
    print(
        f"{len(batches)} batches of {len(batches[0])} bytes ({records_per_batch} records of "
        f"{args.record_bytes} bytes), "
        f"{total / 1e6:.0f} MB per run, reads of {args.read_bytes} bytes, best of {args.repeat}"
    )
    best: dict[str, float] = {}
    for _ in range(args.repeat):
        directory = tempfile.mkdtemp(prefix="actorlog-bench-", dir=args.dir)
        try:
            for figure in bench(directory, batches, stamped, args.read_bytes):
                best[figure.name] = max(best.get(figure.name, 0.0), figure.megabytes_per_second)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    raw_append = best["append raw os.write"]
    raw_read = best["read raw os.pread"]
    print(f"{'measurement':<40} {'MB/s':>8} {'ratio':>7}")
    for name, value in best.items():
        baseline = raw_append if name.startswith("append") else raw_read
        print(f"{name:<40} {value:>8.0f} {value / baseline:>7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
