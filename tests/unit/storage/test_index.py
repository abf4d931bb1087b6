"""Offset and time indexes (docs/log.md §2, scenario 37)."""

from __future__ import annotations

import pytest

from runtime.storage.errors import CorruptIndexError, InvalidOffsetError
from runtime.storage.fs import MemoryFileSystem
from runtime.storage.index import OffsetIndex, TimeIndex


def _offset_index(base_offset: int = 0, max_size: int = 1024) -> OffsetIndex:
    fs = MemoryFileSystem()
    fs.make_dirs("/d")
    return OffsetIndex.create(fs, "/d/x.index", base_offset, max_size)


def test_scenario_37_offset_index_truncate() -> None:
    """OffsetIndexTest.truncate: entries (i -> i) for 1..9."""
    index = _offset_index()
    for i in range(1, 10):
        index.append(i, i)
    index.truncate_to(12)
    assert index.last_offset == 9
    index.truncate_to(10)
    assert index.last_offset == 9
    index.append(10, 10)
    index.truncate_to(9)
    assert index.last_offset == 8
    index.truncate_to(5)
    assert index.last_offset == 4
    assert index.entries == 4
    index.truncate_to(0)
    assert index.entries == 0


def test_scenario_37_lookup_extreme_cases() -> None:
    """OffsetIndexTest.lookupExtremeCases: the largest entry <= target, else (base, 0)."""
    index = _offset_index(base_offset=45)
    assert index.lookup(45) == (45, 0)
    assert index.lookup(10) == (45, 0)
    for offset, position in [(47, 100), (50, 200), (60, 300)]:
        index.append(offset, position)
    assert index.lookup(46) == (45, 0)
    assert index.lookup(47) == (47, 100)
    assert index.lookup(49) == (47, 100)
    assert index.lookup(55) == (50, 200)
    assert index.lookup(10**12) == (60, 300)


def test_offsets_must_strictly_increase_and_be_relative() -> None:
    index = _offset_index(base_offset=100)
    index.append(101, 10)
    with pytest.raises(InvalidOffsetError, match=r"append offset 101 .* last offset is 101"):
        index.append(101, 20)
    with pytest.raises(InvalidOffsetError, match="not relative to base offset 100"):
        index.append(100 + 2**31, 30)


def test_a_full_index_refuses_appends() -> None:
    index = _offset_index(max_size=24)
    assert index.max_entries == 3
    for i in range(3):
        index.append(i, i)
    assert index.is_full
    with pytest.raises(AssertionError, match="full index"):
        index.append(3, 3)


def test_time_index_keeps_only_strictly_larger_timestamps() -> None:
    fs = MemoryFileSystem()
    fs.make_dirs("/d")
    index = TimeIndex.create(fs, "/d/x.timeindex", 10, 1200)
    index.maybe_append(-1, 10)
    assert index.entries == 0
    index.maybe_append(100, 12)
    index.maybe_append(100, 13)
    assert index.entries == 1
    index.maybe_append(150, 13)
    assert index.last_entry == (150, 13)
    with pytest.raises(InvalidOffsetError, match="timestamp 120"):
        index.maybe_append(120, 20)
    with pytest.raises(InvalidOffsetError, match="offset 11"):
        index.maybe_append(200, 11)
    index.truncate_to(13)
    assert index.last_entry == (100, 12)


def test_entries_reach_the_file_in_kafkas_format_and_load_back() -> None:
    fs = MemoryFileSystem()
    fs.make_dirs("/d")
    index = OffsetIndex.create(fs, "/d/x.index", 1000, 4096)
    index.append(1003, 10)
    index.append(1010, 500)
    assert fs.read_file("/d/x.index") == b""  # entries are written in groups, not per append
    index.write_pending()
    assert fs.read_file("/d/x.index") == bytes.fromhex("00000003 0000000a 0000000a 000001f4")
    loaded = OffsetIndex.load(fs, "/d/x.index", 1000, 4096, log_size=1000)
    assert [loaded.entry(0), loaded.entry(1)] == [(1003, 10), (1010, 500)]
    index.truncate_to(1010)
    assert fs.read_file("/d/x.index") == bytes.fromhex("00000003 0000000a")


def test_a_torn_or_disordered_index_fails_its_sanity_check() -> None:
    fs = MemoryFileSystem()
    fs.make_dirs("/d")
    fs.write_file("/d/a.index", bytes.fromhex("00000003 0000000a 0000"), fsync=False)
    with pytest.raises(CorruptIndexError, match="not a multiple of the 8-byte entry size"):
        OffsetIndex.load(fs, "/d/a.index", 0, 4096, log_size=100)
    fs.write_file("/d/b.index", bytes.fromhex("00000005 0000000a 00000003 00000014"), fsync=False)
    with pytest.raises(CorruptIndexError, match="entry"):
        OffsetIndex.load(fs, "/d/b.index", 0, 4096, log_size=100)
    fs.write_file("/d/c.index", bytes.fromhex("00000005 000000ff"), fsync=False)
    with pytest.raises(CorruptIndexError, match="in a 100-byte log"):
        OffsetIndex.load(fs, "/d/c.index", 0, 4096, log_size=100)
