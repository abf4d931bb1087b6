"""``actorlog dump-log``: print segment files the way ``kafka-dump-log.sh`` does.

    python -m ops.cli.dump_log --files 00000000000000000000.log [--print-data-log] [--deep-iteration]

* ``.log``: one line per batch (base and last offset, count, producer id/epoch/sequences, leader epoch,
  flags, position, timestamp, size, magic, codec, CRC and whether it is valid); with
  ``--deep-iteration`` one ``|`` line per record, and with ``--print-data-log`` (which implies deep
  iteration) each record's key and payload too.
* ``.index``: ``offset: O position: P`` per entry; ``.timeindex``: ``timestamp: T offset: O``.
* ``leader-epoch-checkpoint`` and the log dir checkpoints: their entries.

An index on disk can lag its segment: a broker keeps the active segment's new index entries in
memory and writes them on flush, roll and shutdown (``runtime/storage/index.py``). When an index's
``.log`` goes on beyond its last entry and the segment was never rolled or closed (its time index
lacks the final entry for the segment's largest timestamp, which roll and close write), a ``Note:``
line says so after the entries; it does not change the exit code.

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
    path: str,
    entry: struct.Struct,
    describe: Callable[[int, int, int], str],
    out: Callable[[str], None],
    *,
    offset_of: Callable[[int, int, int], int],
) -> bool:
    """Print an index's entries; ``offset_of(base, first, second)`` is an entry's absolute offset."""
    fs = OsFileSystem()
    data = fs.read_file(path)
    base_offset = _base_offset_of(path)
    whole = len(data) - len(data) % entry.size
    last_offset: int | None = None
    for first, second in entry.iter_unpack(data[:whole]):
        out(describe(base_offset, first, second))
        last_offset = offset_of(base_offset, first, second)
    ok = True
    if len(data) != whole:
        out(f"Found {len(data) - whole} invalid bytes at the end of {os.path.basename(path)} (a torn entry)")
        ok = False
    note = _unwritten_entries_note(path, last_offset)
    if note is not None:
        out(note)
    return ok


def _unwritten_entries_note(path: str, last_offset: int | None) -> str | None:
    """The ``Note:`` line for an index whose segment goes on beyond ``last_offset`` (its last entry
    on disk, None: none) and was never rolled or closed, else None. Reads the segment's ``.log`` and
    ``.timeindex``; when either is missing or unreadable there is nothing to say."""
    stem = path.rsplit(".", 1)[0]
    log_path, time_index_path = f"{stem}.log", f"{stem}.timeindex"
    fs = OsFileSystem()
    try:
        if not (fs.exists(log_path) and fs.exists(time_index_path)):
            return None
        time_data = fs.read_file(time_index_path)
        last_batch_offset, max_timestamp = _segment_extent(log_path)
    except OSError:
        return None
    if last_batch_offset is None or max_timestamp < 0:
        return None  # an empty segment, or no timestamps to tell a closed one by
    whole = len(time_data) - len(time_data) % _TIME_ENTRY.size
    if whole:
        last_timestamp, _ = _TIME_ENTRY.unpack_from(time_data, whole - _TIME_ENTRY.size)
        if last_timestamp >= max_timestamp:
            return None  # rolled or closed: the final time index entry is there
    if last_offset is not None and last_offset >= last_batch_offset:
        return None
    name, log_name = os.path.basename(path), os.path.basename(log_path)
    held = "no entries on disk" if last_offset is None else f"no entries on disk beyond offset {last_offset}"
    return (
        f"Note: {name} holds {held}, though {log_name} goes on to offset {last_batch_offset} and the "
        "segment was never rolled or closed: probably the active segment of a running broker, which "
        "keeps new index entries in memory until the segment is flushed or rolls or the broker stops."
    )


def _segment_extent(log_path: str) -> tuple[int | None, int]:
    """The last offset of the readable batches of a ``.log`` (None: none) and their largest
    timestamp (-1: none)."""
    handle = OsFileSystem().open_read_only(log_path)
    last_offset: int | None = None
    max_timestamp = -1
    try:
        for batch in read_file_batches(handle):
            last_offset = batch.header.last_offset
            max_timestamp = max(max_timestamp, batch.header.max_timestamp)
    except StorageError:
        pass  # damage is the .log dump's to report; what was readable is enough for a note
    finally:
        handle.close()
    return last_offset, max_timestamp


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
                path,
                _OFFSET_ENTRY,
                lambda base, rel, pos: f"offset: {base + rel} position: {pos}",
                out,
                offset_of=lambda base, rel, _pos: base + rel,
            )
        if name.endswith(".timeindex"):
            return dump_index(
                path,
                _TIME_ENTRY,
                lambda base, ts, rel: f"timestamp: {ts} offset: {base + rel}",
                out,
                offset_of=lambda base, _ts, rel: base + rel,
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
