"""The sparse offset index (``.index``) and time index (``.timeindex``) of one segment.

File formats are Kafka's (docs/log.md §2), big-endian:

* offset index entry, 8 bytes: relative offset int32 (``offset - base_offset``) + position int32;
* time index entry, 12 bytes: timestamp int64 + relative offset int32.

Rules kept here (Kafka's ``OffsetIndex``/``TimeIndex``):

* offset index entries are strictly increasing in offset; appending a non-larger offset raises
  ``InvalidOffsetError``; an index holds at most ``segment.index.bytes // entry size`` entries and
  appending to a full index is a programmer error (the log rolls first, ``is_full``);
* a time index entry is added only if its timestamp is strictly larger than the last one (equal is
  ignored, smaller raises) and its offset is not smaller;
* ``lookup(target)`` gives the largest entry at or below the target, or ``(base_offset, 0)``; the
  time index's ``lookup(target_timestamp)`` the entry with the largest timestamp at or below it, or
  ``(NO_TIMESTAMP, base_offset)`` (Kafka's ``TimeIndex.lookup``);
* ``truncate_to(offset)`` keeps entries strictly below ``offset``.

Deliberate difference from Kafka: files are not preallocated and memory-mapped. Entries live in
memory (two int lists, searched with ``bisect``) and are appended to the file in groups by
``write_pending()``, which the segment calls on flush, roll and close, or when many are pending. The
file therefore always holds exactly whole entries plus possibly a torn last one after a crash, and a
lost entry is never a durability problem: indexes are derived data that recovery rebuilds for every
segment above the recovery point, and segments below it had their entries written before their fsync.
"""

from __future__ import annotations

import bisect
import struct
from typing import Final

from runtime.storage.errors import CorruptIndexError, InvalidOffsetError
from runtime.storage.fs import FileHandle, FileSystem
from runtime.storage.records import NO_TIMESTAMP

__all__ = ["PENDING_WRITE_THRESHOLD", "OffsetIndex", "OffsetPosition", "TimeIndex", "TimestampOffset"]

INT32_MAX: Final = 2_147_483_647
PENDING_WRITE_THRESHOLD: Final = 512  # entries buffered before they are written without a flush


class OffsetPosition(tuple[int, int]):
    """``(offset, position)``: an absolute offset and a byte position in the ``.log`` file."""

    __slots__ = ()

    def __new__(cls, offset: int, position: int) -> OffsetPosition:
        return super().__new__(cls, (offset, position))

    @property
    def offset(self) -> int:
        return self[0]

    @property
    def position(self) -> int:
        return self[1]


class TimestampOffset(tuple[int, int]):
    """``(timestamp, offset)``: a time index entry with an absolute offset."""

    __slots__ = ()

    def __new__(cls, timestamp: int, offset: int) -> TimestampOffset:
        return super().__new__(cls, (timestamp, offset))

    @property
    def timestamp(self) -> int:
        return self[0]

    @property
    def offset(self) -> int:
        return self[1]


class _IndexFile:
    """Entries as two parallel lists plus the bookkeeping to append them to a file lazily."""

    entry_struct: struct.Struct

    def __init__(self, fs: FileSystem, path: str, base_offset: int, max_index_size: int) -> None:
        self.fs = fs
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_index_size // self.entry_struct.size
        # The entries, as parallel lists (offset index: relative offsets and positions; time index:
        # timestamps and relative offsets). Public for the segment's append path; read-only elsewhere.
        self.keys: list[int] = []
        self.values: list[int] = []
        self.written = 0  # entries already in the file
        self._handle: FileHandle | None = None

    @property
    def entries(self) -> int:
        return len(self.keys)

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def is_full(self) -> bool:
        return len(self.keys) >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        return len(self.keys) * self.entry_struct.size

    def _load_pairs(self) -> list[tuple[int, int]]:
        data = self.fs.read_file(self.path)
        size = self.entry_struct.size
        if len(data) % size:
            raise CorruptIndexError(
                f"index file {self.path} is {len(data)} bytes, not a multiple of the {size}-byte entry size"
            )
        pairs = [(int(a), int(b)) for a, b in self.entry_struct.iter_unpack(data)]
        self.written = len(pairs)
        return pairs

    def _append(self, key: int, value: int) -> None:
        self.keys.append(key)
        self.values.append(value)
        if len(self.keys) - self.written >= PENDING_WRITE_THRESHOLD:
            self.write_pending()

    def write_pending(self) -> None:
        """Hand the entries not yet in the file to the OS."""
        if self.written == len(self.keys):
            return
        written = self.written
        count = len(self.keys) - written
        # Keys and values interleaved, packed by one struct call (a format struct caches, since
        # count is nearly always PENDING_WRITE_THRESHOLD): less than half the cost per entry of
        # packing each entry on its own.
        fields: list[int] = [0] * (2 * count)
        fields[0::2] = self.keys[written:]
        fields[1::2] = self.values[written:]
        chunk = struct.pack(">" + self.entry_struct.format[1:] * count, *fields)
        self._file().write(chunk)
        self.written = len(self.keys)

    def _file(self) -> FileHandle:
        if self._handle is None:
            self._handle = self.fs.open(self.path)
        return self._handle

    def _truncate_entries(self, keep: int) -> None:
        del self.keys[keep:]
        del self.values[keep:]
        if keep < self.written:
            self._file().truncate(keep * self.entry_struct.size)
            self.written = keep

    def reset(self) -> None:
        """Drop every entry (recovery rebuilds from scratch). The file exists afterwards, empty: a
        missing index is recreated, so the segment's later fsyncs find all three files."""
        self.keys.clear()
        self.values.clear()
        self.written = 0
        self._file().truncate(0)

    def close(self) -> None:
        self.write_pending()
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def rename_to(self, path: str) -> None:
        self.close()
        if self.fs.exists(self.path):
            self.fs.rename(self.path, path)
        self.path = path


class OffsetIndex(_IndexFile):
    entry_struct = struct.Struct(">ii")

    @classmethod
    def create(cls, fs: FileSystem, path: str, base_offset: int, max_index_size: int) -> OffsetIndex:
        index = cls(fs, path, base_offset, max_index_size)
        fs.write_file(path, b"", fsync=False)
        return index

    @classmethod
    def load(
        cls, fs: FileSystem, path: str, base_offset: int, max_index_size: int, log_size: int
    ) -> OffsetIndex:
        """Read and sanity-check an existing index; ``CorruptIndexError`` means "rebuild it"."""
        index = cls(fs, path, base_offset, max_index_size)
        previous_offset = -1
        previous_position = -1
        for relative_offset, position in index._load_pairs():
            if relative_offset <= previous_offset or position <= previous_position or position >= log_size:
                raise CorruptIndexError(
                    f"index file {path}: entry ({base_offset + relative_offset}, {position}) follows "
                    f"({base_offset + previous_offset}, {previous_position}) in a {log_size}-byte log"
                )
            index.keys.append(relative_offset)
            index.values.append(position)
            previous_offset, previous_position = relative_offset, position
        return index

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.keys[-1] if self.keys else self.base_offset

    def entry(self, n: int) -> OffsetPosition:
        return OffsetPosition(self.base_offset + self.keys[n], self.values[n])

    def append(self, offset: int, position: int) -> None:
        keys = self.keys
        relative = offset - self.base_offset
        if keys and relative <= keys[-1]:
            raise InvalidOffsetError(
                f"attempt to append offset {offset} to index {self.path} whose last offset is "
                f"{self.last_offset}"
            )
        if len(keys) >= self.max_entries:
            raise AssertionError(
                f"attempt to append to a full index {self.path} ({self.max_entries} entries)"
            )
        if relative < 0 or relative > INT32_MAX:
            raise InvalidOffsetError(f"offset {offset} is not relative to base offset {self.base_offset}")
        keys.append(relative)
        self.values.append(position)
        if len(keys) - self.written >= PENDING_WRITE_THRESHOLD:
            self.write_pending()

    def lookup(self, target_offset: int) -> OffsetPosition:
        """Largest entry with offset <= target, or ``(base_offset, 0)``."""
        slot = bisect.bisect_right(self.keys, target_offset - self.base_offset) - 1
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self.keys[slot], self.values[slot])

    def truncate_to(self, offset: int) -> None:
        """Remove entries at or above ``offset``."""
        self._truncate_entries(bisect.bisect_left(self.keys, offset - self.base_offset))


class TimeIndex(_IndexFile):
    entry_struct = struct.Struct(">qi")

    @classmethod
    def create(cls, fs: FileSystem, path: str, base_offset: int, max_index_size: int) -> TimeIndex:
        index = cls(fs, path, base_offset, max_index_size)
        fs.write_file(path, b"", fsync=False)
        return index

    @classmethod
    def load(cls, fs: FileSystem, path: str, base_offset: int, max_index_size: int) -> TimeIndex:
        index = cls(fs, path, base_offset, max_index_size)
        previous_timestamp = NO_TIMESTAMP
        previous_offset = -1
        for timestamp, relative_offset in index._load_pairs():
            if timestamp <= previous_timestamp or relative_offset < previous_offset or relative_offset < 0:
                raise CorruptIndexError(
                    f"time index file {path}: entry ({timestamp}, {base_offset + relative_offset}) follows "
                    f"({previous_timestamp}, {base_offset + previous_offset})"
                )
            index.keys.append(timestamp)
            index.values.append(relative_offset)
            previous_timestamp, previous_offset = timestamp, relative_offset
        return index

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(NO_TIMESTAMP, base_offset)`` when empty (Kafka's ``lastEntry``)."""
        if not self.keys:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self.keys[-1], self.base_offset + self.values[-1])

    def entry(self, n: int) -> TimestampOffset:
        return TimestampOffset(self.keys[n], self.base_offset + self.values[n])

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        keys = self.keys
        if keys:
            last_timestamp = keys[-1]
            last_offset = self.base_offset + self.values[-1]
            if offset < last_offset:
                raise InvalidOffsetError(
                    f"attempt to append offset {offset} to time index {self.path} whose last "
                    f"offset is {last_offset}"
                )
            if timestamp < last_timestamp:
                raise InvalidOffsetError(
                    f"attempt to append timestamp {timestamp} to time index {self.path} whose last "
                    f"is {last_timestamp}"
                )
            if timestamp == last_timestamp:
                return
        elif timestamp <= NO_TIMESTAMP:
            return
        if not skip_full_check and len(keys) >= self.max_entries:
            raise AssertionError(f"attempt to append to a full time index {self.path}")
        keys.append(timestamp)
        self.values.append(offset - self.base_offset)
        if len(keys) - self.written >= PENDING_WRITE_THRESHOLD:
            self.write_pending()

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= ``target_timestamp``, or ``(NO_TIMESTAMP,
        base_offset)`` when every entry is later (or there is none): no record before that entry's
        offset has a timestamp above the entry's, so a search for the first timestamp >= target may
        start there (Kafka's ``TimeIndex.lookup``)."""
        slot = bisect.bisect_right(self.keys, target_timestamp) - 1
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self.keys[slot], self.base_offset + self.values[slot])

    def truncate_to(self, offset: int) -> None:
        """Remove entries whose offset is at or above ``offset``."""
        self._truncate_entries(bisect.bisect_left(self.values, offset - self.base_offset))
