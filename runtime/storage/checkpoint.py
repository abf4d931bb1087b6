"""Kafka's checkpoint files: plain text, versioned, written atomically.

Format (docs/log.md §10)::

    0\n                  version
    <count>\n
    <entry>\n            repeated <count> times, fields separated by whitespace

Files: ``replication-offset-checkpoint`` (high watermarks), ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint`` (one per log dir, entries ``<topic> <partition> <offset>``) and
``leader-epoch-checkpoint`` (one per partition directory, entries ``<epoch> <start offset>``).

Rules kept here:

* A write goes to ``<file>.tmp``, is fsynced, renamed over the target and the directory is fsynced,
  so a reader sees the old or the new file, never a mixture, even after a power loss.
* ``CheckpointWrite`` captures the bytes on the caller's thread (the event loop) and does the blocking
  part in ``run()``, so periodic checkpoints can run in ``asyncio.to_thread``.
* One writer per file: every write of an ``OffsetCheckpointFile`` goes through its ``prepare``, and
  the writes run one at a time (a lock: they share the ``.tmp`` name) in the order their snapshots
  were taken; a snapshot older than the one already written is dropped. A periodic write in a
  worker thread can therefore never put back a recovery point that a truncation on the event loop
  has lowered since.
* Reading is strict: a wrong version, a count that does not match, or a malformed line raises
  ``CorruptCheckpointError`` naming the file and the line. An empty or missing file is empty.
"""

from __future__ import annotations

import itertools
import posixpath
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from runtime.storage.errors import CorruptCheckpointError
from runtime.storage.fs import FileSystem
from runtime.storage.topic_partition import TopicPartition

__all__ = [
    "CHECKPOINT_VERSION",
    "LEADER_EPOCH_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "CheckpointWrite",
    "EpochEntry",
    "LeaderEpochCheckpointFile",
    "OffsetCheckpointFile",
    "read_checkpoint_lines",
    "write_atomically",
]

CHECKPOINT_VERSION: Final = 0
REPLICATION_OFFSET_CHECKPOINT: Final = "replication-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT: Final = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT: Final = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT: Final = "leader-epoch-checkpoint"


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """A leader epoch and the first offset written in it."""

    epoch: int
    start_offset: int


class _WriteOrder:
    """The order of one file's writes: snapshots are numbered when taken; ``run`` writes under the
    lock and only a snapshot newer than the last one written."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sequences = itertools.count(1)
        self.written = 0


@dataclass(frozen=True, slots=True)
class CheckpointWrite:
    """The bytes of one checkpoint and where they go; ``run()`` performs the blocking write (and
    skips it when a newer snapshot of the same file is already written)."""

    fs: FileSystem
    path: str
    data: bytes
    order: _WriteOrder | None = None
    sequence: int = 0

    def run(self) -> None:
        order = self.order
        if order is None:
            write_atomically(self.fs, self.path, self.data)
            return
        with order.lock:
            if self.sequence <= order.written:
                return
            write_atomically(self.fs, self.path, self.data)
            order.written = self.sequence


def write_atomically(fs: FileSystem, path: str, data: bytes) -> None:
    """tmp file + fsync + rename + directory fsync."""
    temporary = path + ".tmp"
    fs.write_file(temporary, data, fsync=True)
    fs.rename(temporary, path)
    fs.fsync_dir(posixpath.dirname(path) or "/")


def format_checkpoint(lines: Iterable[str]) -> bytes:
    entries = list(lines)
    return "".join(
        [f"{CHECKPOINT_VERSION}\n", f"{len(entries)}\n", *(f"{line}\n" for line in entries)]
    ).encode()


def read_checkpoint_lines(fs: FileSystem, path: str, fields: int) -> list[list[str]]:
    """The entries of a checkpoint file, each split on whitespace into exactly ``fields`` parts."""
    try:
        raw = fs.read_file(path)
    except FileNotFoundError:
        return []
    try:
        lines = raw.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        raise CorruptCheckpointError(f"checkpoint file {path} is not UTF-8 text") from None
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return []
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CorruptCheckpointError(f"unrecognized version {lines[0]!r} of the checkpoint file {path}")
    if len(lines) < 2:
        # ``format_checkpoint`` always writes the count: a version alone is a cut file.
        raise CorruptCheckpointError(f"checkpoint file {path} ends after its version line")
    try:
        expected = int(lines[1].strip())
    except ValueError:
        raise CorruptCheckpointError(f"checkpoint file {path}: malformed entry count {lines[1]!r}") from None
    entries: list[list[str]] = []
    for line in lines[2:]:
        parts = line.split()
        if len(parts) != fields:
            raise CorruptCheckpointError(f"checkpoint file {path}: malformed line {line!r}")
        entries.append(parts)
    if len(entries) != expected:
        raise CorruptCheckpointError(
            f"expected {expected} entries in checkpoint file {path}, but found {len(entries)}"
        )
    return entries


def _int(path: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise CorruptCheckpointError(f"checkpoint file {path}: {text!r} is not a number") from None


class OffsetCheckpointFile:
    """A per-log-dir ``<topic> <partition> <offset>`` checkpoint."""

    def __init__(self, fs: FileSystem, path: str) -> None:
        self.fs = fs
        self.path = path
        self._order = _WriteOrder()

    def read(self) -> dict[TopicPartition, int]:
        return {
            TopicPartition(topic, _int(self.path, partition)): _int(self.path, offset)
            for topic, partition, offset in read_checkpoint_lines(self.fs, self.path, 3)
        }

    def prepare(self, offsets: Mapping[TopicPartition, int]) -> CheckpointWrite:
        lines = (f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items()))
        return CheckpointWrite(
            self.fs, self.path, format_checkpoint(lines), self._order, next(self._order.sequences)
        )

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        self.prepare(offsets).run()


class LeaderEpochCheckpointFile:
    """A partition's ``leader-epoch-checkpoint``: ``<epoch> <start offset>`` lines."""

    def __init__(self, fs: FileSystem, directory: str) -> None:
        self.fs = fs
        self.path = posixpath.join(directory, LEADER_EPOCH_CHECKPOINT)

    def read(self) -> list[EpochEntry]:
        return [
            EpochEntry(_int(self.path, epoch), _int(self.path, offset))
            for epoch, offset in read_checkpoint_lines(self.fs, self.path, 2)
        ]

    def write(self, entries: Iterable[EpochEntry]) -> None:
        write_atomically(
            self.fs, self.path, format_checkpoint(f"{e.epoch} {e.start_offset}" for e in entries)
        )
