"""LeaderEpochCache (docs/leader-epochs.md §1, scenario 38)."""

from __future__ import annotations

import pytest

from runtime.storage.checkpoint import EpochEntry, LeaderEpochCheckpointFile
from runtime.storage.fs import MemoryFileSystem
from runtime.storage.leader_epoch import LeaderEpochCache


def _cache(entries: list[tuple[int, int]], log_end_offset: int = 100) -> LeaderEpochCache:
    return LeaderEpochCache(lambda: log_end_offset, entries=[EpochEntry(e, o) for e, o in entries])


def test_scenario_38_end_offset_for_epochs_between_known_ones() -> None:
    cache = _cache([(0, 10), (2, 13), (4, 17)])
    assert cache.end_offset_for(1) == (0, 13)
    assert cache.end_offset_for(2) == (2, 17)
    assert cache.end_offset_for(3) == (2, 17)


def test_scenario_38_assign_drops_conflicting_entries() -> None:
    cache = _cache([(5, 11), (6, 12), (7, 13)])
    cache.assign(7, 12)
    assert cache.entries == (EpochEntry(5, 11), EpochEntry(7, 12))
    assert cache.end_offset_for(5) == (5, 12)
    assert cache.end_offset_for(6) == (5, 12)


def test_scenario_38_epoch_below_the_first_entry() -> None:
    cache = _cache([(5, 11), (6, 12)])
    assert cache.end_offset_for(4) == (4, 11)


def test_scenario_38_latest_epoch_gives_the_log_end_offset_and_above_is_undefined() -> None:
    cache = _cache([(5, 11), (6, 12)], log_end_offset=40)
    assert cache.end_offset_for(6) == (6, 40)
    assert cache.end_offset_for(7) == (-1, -1)
    assert cache.end_offset_for(-1) == (-1, -1)
    assert _cache([]).end_offset_for(3) == (-1, -1)


def test_scenario_38_truncate_from_start_moves_the_last_removed_entry_up() -> None:
    cache = _cache([(2, 6), (3, 8), (4, 11)])
    cache.truncate_from_start(9)
    assert cache.entries == (EpochEntry(3, 9), EpochEntry(4, 11))


def test_reassigning_an_epoch_at_a_larger_offset_is_a_no_op() -> None:
    cache = _cache([(1, 5)])
    assert not cache.assign(1, 9)
    assert cache.entries == (EpochEntry(1, 5),)
    assert cache.assign(1, 3)  # same epoch, earlier start: the new entry wins
    assert cache.entries == (EpochEntry(1, 3),)


def test_truncate_from_end_drops_entries_starting_at_or_after() -> None:
    cache = _cache([(0, 0), (1, 10), (2, 20)])
    cache.truncate_from_end(10)
    assert list(cache.entries) == [EpochEntry(0, 0)]
    cache.clear_and_flush()
    assert len(cache.entries) == 0
    assert cache.latest_epoch is None


def test_negative_epochs_are_programmer_errors() -> None:
    with pytest.raises(ValueError, match="invalid leader epoch entry"):
        _cache([]).assign(-1, 0)


def test_every_change_is_persisted_and_reloaded() -> None:
    fs = MemoryFileSystem()
    fs.make_dirs("/p")
    cache = LeaderEpochCache(lambda: 0, LeaderEpochCheckpointFile(fs, "/p"))
    cache.assign(0, 0)
    cache.assign(3, 50)
    fs.crash()  # every write was fsynced and renamed atomically
    reloaded = LeaderEpochCache(lambda: 0, LeaderEpochCheckpointFile(fs, "/p"))
    assert reloaded.entries == (EpochEntry(0, 0), EpochEntry(3, 50))
    reloaded.truncate_from_end(50)
    assert LeaderEpochCheckpointFile(fs, "/p").read() == [EpochEntry(0, 0)]


def test_epoch_for_offset() -> None:
    cache = _cache([(1, 10), (3, 30)])
    assert [cache.epoch_for_offset(o) for o in (5, 10, 29, 30, 99)] == [None, 1, 1, 3, 3]
