"""``actorlog dump-log``: print segment files the way ``kafka-dump-log.sh`` does.

    python -m ops.cli.dump_log --files 00000000000000000000.log [--print-data-log] [--deep-iteration]

* ``.log``: one line per batch (base and last offset, count, producer id/epoch/sequences, leader epoch,
  flags, position, timestamp, size, magic, codec, CRC and whether it is valid); with
  ``--deep-iteration`` one ``|`` line per record, and with ``--print-data-log`` (which implies deep
  iteration) each record's key and payload too.
* ``.index``: ``offset: O position: P`` per entry; ``.timeindex``: ``timestamp: T offset: O``.
* ``leader-epoch-checkpoint`` and the log dir checkpoints: their entries.

Damage is reported, never raised: a CRC mismatch prints ``isvalid: false``; a torn tail prints
``Found N invalid bytes at the end of F``; unparseable framing, unreadable or missing files print an
``Error:`` line. Any of these makes the exit code 1 (0 when every file was whole and valid).
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from collections.abc import Callable

from runtime.storage.checkpoint import read_checkpoint_lines
from runtime.storage.errors import CorruptCheckpointError, StorageError
from runtime.storage.os_fs import OsFileSystem
from runtime.storage.records import RecordBatch
from runtime.storage.segment import read_file_batches

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_CHECKPOINT_FIELDS = {
    "leader-epoch-checkpoint": 2,
    "replication-offset-checkpoint": 3,
    "recovery-point-offset-checkpoint": 3,
    "log-start-offset-checkpoint": 3,
}


def _base_offset_of(path: str) -> int:
    """The base offset a segment file's name gives (``00000000000000000042.log`` -> 42), else 0."""
    stem = os.path.basename(path).split(".")[0]
    return int(stem) if stem.isdigit() else 0


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", errors="backslashreplace")


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def dump_log(path: str, *, deep_iteration: bool, print_data: bool, out: Callable[[str], None]) -> bool:
    """Print one ``.log`` file; return whether it was whole and valid."""
    fs = OsFileSystem()
    handle = fs.open_read_only(path)
    ok = True
    valid_bytes = 0
    try:
        out(f"Starting offset: {_base_offset_of(path)}")
        try:
            for batch in read_file_batches(handle):
                ok = _dump_batch(batch, deep_iteration=deep_iteration, print_data=print_data, out=out) and ok
                valid_bytes = batch.position + batch.size_in_bytes
        except StorageError as error:
            out(f"Error: {error}")
            ok = False
        trailing = handle.size - valid_bytes
        if trailing > 0:
            out(f"Found {trailing} invalid bytes at the end of {os.path.basename(path)}")
            ok = False
    finally:
        handle.close()
    return ok


def _dump_batch(
    batch: RecordBatch, *, deep_iteration: bool, print_data: bool, out: Callable[[str], None]
) -> bool:
    header = batch.header
    valid = batch.is_valid()
    out(
        f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} count: {header.records_count} "
        f"baseSequence: {header.base_sequence} lastSequence: {header.last_sequence} "
        f"producerId: {header.producer_id} producerEpoch: {header.producer_epoch} "
        f"partitionLeaderEpoch: {header.partition_leader_epoch} "
        f"isTransactional: {str(header.is_transactional).lower()} isControl: "
        f"{str(header.is_control_batch).lower()} "
        f"position: {batch.position} {_timestamp_type_name(header.attributes)}: {header.max_timestamp} "
        f"size: {header.size_in_bytes} magic: {header.magic} compresscodec: {header.compression.name} "
        f"crc: {header.crc} isvalid: {str(valid).lower()}"
    )
    if not (deep_iteration or print_data):
        return valid
    try:
        records = batch.records()
    except StorageError as error:
        out(f"Error: records of the batch at position {batch.position} cannot be read: {error}")
        return False
    timestamp_name = _timestamp_type_name(header.attributes)
    for index, record in enumerate(records):
        sequence = header.base_sequence + index if header.base_sequence >= 0 else -1
        timestamp = header.max_timestamp if timestamp_name == "LogAppendTime" else record.timestamp
        line = (
            f"| offset: {record.offset} {timestamp_name}: {timestamp} keysize: {_size(record.key)} "
            f"valuesize: {_size(record.value)} sequence: {sequence} "
            f"headerKeys: [{','.join(h.key for h in record.headers)}]"
        )
        if print_data:
            line += f" key: {_text(record.key)} payload: {_text(record.value)}"
        out(line)
    return valid


def _timestamp_type_name(attributes: int) -> str:
    return "LogAppendTime" if attributes & 0x08 else "CreateTime"


def dump_index(
    path: str, entry: struct.Struct, describe: Callable[[int, int, int], str], out: Callable[[str], None]
) -> bool:
    fs = OsFileSystem()
    data = fs.read_file(path)
    base_offset = _base_offset_of(path)
    whole = len(data) - len(data) % entry.size
    for first, second in entry.iter_unpack(data[:whole]):
        out(describe(base_offset, first, second))
    if len(data) != whole:
        out(f"Found {len(data) - whole} invalid bytes at the end of {os.path.basename(path)} (a torn entry)")
        return False
    return True


def dump_checkpoint(path: str, fields: int, out: Callable[[str], None]) -> bool:
    try:
        entries = read_checkpoint_lines(OsFileSystem(), path, fields)
    except CorruptCheckpointError as error:
        out(f"Error: {error}")
        return False
    for entry in entries:
        out(" ".join(entry))
    return True


def dump_file(path: str, *, deep_iteration: bool, print_data: bool, out: Callable[[str], None]) -> bool:
    out(f"Dumping {path}")
    if os.path.isdir(path):
        out(f"Error: {path} is a directory; pass the segment, index or checkpoint files in it")
        return False
    name = os.path.basename(path)
    try:
        if name.endswith(".log"):
            return dump_log(path, deep_iteration=deep_iteration, print_data=print_data, out=out)
        if name.endswith(".index"):
            return dump_index(
                path, _OFFSET_ENTRY, lambda base, rel, pos: f"offset: {base + rel} position: {pos}", out
            )
        if name.endswith(".timeindex"):
            return dump_index(
                path, _TIME_ENTRY, lambda base, ts, rel: f"timestamp: {ts} offset: {base + rel}", out
            )
        if name in _CHECKPOINT_FIELDS:
            return dump_checkpoint(path, _CHECKPOINT_FIELDS[name], out)
    except OSError as error:
        out(f"Error: cannot read {path}: {error.strerror or error}")
        return False
    out(f"Ignoring unknown file {path}")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="actorlog dump-log", description="Print the content of log segment, index and checkpoint files."
    )
    parser.add_argument("--files", nargs="+", required=True, metavar="FILE", help="files to dump")
    parser.add_argument("--print-data-log", action="store_true", help="print each record's key and payload")
    parser.add_argument("--deep-iteration", action="store_true", help="print every record, not only batches")
    args = parser.parse_args(argv)

    def out(line: str) -> None:
        print(line)

    ok = True
    for path in args.files:
        ok = (
            dump_file(path, deep_iteration=args.deep_iteration, print_data=args.print_data_log, out=out)
            and ok
        )
    sys.stdout.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
