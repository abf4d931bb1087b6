"""Idempotent producer state (docs/producer.md §5), alone and through Log appends."""

from __future__ import annotations

import pytest

from runtime.storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError, UnknownProducerIdError
from runtime.storage.fs import MemoryFileSystem
from runtime.storage.producer_state import ProducerStateManager
from runtime.storage.records import BatchHeader, read_header
from tests.unit.storage.helpers import BASE_TIME_MS, batch, open_log, read_all


def _header(
    sequence: int, count: int = 1, *, epoch: int = 0, producer_id: int = 7, base_offset: int = 0
) -> BatchHeader:
    data = batch(
        *[b"x"] * count,
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
    )
    return read_header(data, 0)


def _apply(manager: ProducerStateManager, header: BatchHeader) -> None:
    manager.apply(manager.prepare([header], from_client=True), header.next_offset)


def test_sequences_must_follow_on() -> None:
    manager = ProducerStateManager()
    _apply(manager, _header(0, 3))
    _apply(manager, _header(3, 2, base_offset=3))
    with pytest.raises(OutOfOrderSequenceError, match="first sequence 6, expected 5 \\(last sequence 4\\)"):
        manager.prepare([_header(6)], from_client=True)


def test_a_new_producer_must_start_at_sequence_zero() -> None:
    with pytest.raises(UnknownProducerIdError, match=r"no state for this producer .* first sequence 4"):
        ProducerStateManager().prepare([_header(4)], from_client=True)


def test_a_bumped_epoch_must_restart_at_zero() -> None:
    manager = ProducerStateManager()
    _apply(manager, _header(0, epoch=1))
    with pytest.raises(OutOfOrderSequenceError, match="first sequence 1 for new epoch 2, expected 0"):
        manager.prepare([_header(1, epoch=2)], from_client=True)
    _apply(manager, _header(0, epoch=2))
    assert manager.last_entry(7) is not None
    assert manager.last_entry(7).producer_epoch == 2  # type: ignore[union-attr]


def test_an_older_epoch_is_fenced_for_clients_but_accepted_from_replication() -> None:
    manager = ProducerStateManager()
    _apply(manager, _header(0, epoch=5))
    with pytest.raises(InvalidProducerEpochError, match="epoch 4 is older than the current epoch 5"):
        manager.prepare([_header(1, epoch=4)], from_client=True)
    manager.apply(manager.prepare([_header(9, epoch=4)], from_client=False), 10)


def test_sequence_wraps_after_int_max() -> None:
    manager = ProducerStateManager()
    manager.update(_header(2_147_483_646, 2))
    _apply(manager, _header(0, base_offset=2))


def test_duplicates_are_found_among_the_last_five_batches() -> None:
    manager = ProducerStateManager()
    for i in range(6):
        _apply(manager, _header(i * 2, 2, base_offset=i * 2))
    assert manager.find_duplicate(_header(0, 2)) is None  # evicted: only five are kept
    duplicate = manager.find_duplicate(_header(4, 2))
    assert duplicate is not None
    assert (duplicate.first_offset, duplicate.last_offset) == (4, 5)
    assert manager.find_duplicate(_header(4, 2, epoch=1)) is None


def test_a_failed_validation_leaves_the_state_untouched() -> None:
    manager = ProducerStateManager()
    _apply(manager, _header(0))
    with pytest.raises(OutOfOrderSequenceError):
        manager.prepare([_header(1, base_offset=1), _header(5, base_offset=2)], from_client=True)
    _apply(manager, _header(1, base_offset=1))


def _produce(log_sequence: int, *values: bytes, epoch: int = 0) -> bytes:
    return batch(*values, producer_id=42, producer_epoch=epoch, base_sequence=log_sequence)


def test_a_retried_batch_is_a_duplicate_and_nothing_is_written() -> None:
    log = open_log(MemoryFileSystem())
    first = log.append_as_leader(_produce(0, b"a", b"b"), 0, now_ms=0, wall_clock_ms=BASE_TIME_MS)
    log.append_as_leader(_produce(2, b"c"), 0, now_ms=0, wall_clock_ms=BASE_TIME_MS)
    size = log.size_in_bytes
    retried = log.append_as_leader(_produce(0, b"a", b"b"), 0, now_ms=0, wall_clock_ms=BASE_TIME_MS)
    assert retried.duplicate
    assert (retried.first_offset, retried.last_offset) == (first.first_offset, first.last_offset) == (0, 1)
    assert log.size_in_bytes == size
    assert log.log_end_offset == 3
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(_produce(5, b"d"), 0, now_ms=0, wall_clock_ms=BASE_TIME_MS)
    assert [v for _o, v in read_all(log)] == [b"a", b"b", b"c"]


def test_producer_state_survives_restart_and_truncation() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    for sequence in range(5):
        log.append_as_leader(_produce(sequence, b"x"), 0, now_ms=0, wall_clock_ms=BASE_TIME_MS)
    log.roll(now_ms=0)
    log.append_as_leader(_produce(5, b"y"), 0, now_ms=0, wall_clock_ms=BASE_TIME_MS)
    log.close()
    reopened = open_log(fs, clean_shutdown=False)
    assert reopened.append_as_leader(_produce(5, b"y"), 0, now_ms=0, wall_clock_ms=BASE_TIME_MS).duplicate
    reopened.truncate_to(3, now_ms=0)
    # After truncation the producer's last sequence is 2: sequence 3 is next, 5 is a gap.
    with pytest.raises(OutOfOrderSequenceError, match="expected 3"):
        reopened.append_as_leader(_produce(5, b"z"), 0, now_ms=0, wall_clock_ms=BASE_TIME_MS)
    assert not reopened.append_as_leader(_produce(3, b"z"), 0, now_ms=0, wall_clock_ms=BASE_TIME_MS).duplicate


def test_followers_rebuild_the_same_state_from_replicated_batches() -> None:
    leader = open_log(MemoryFileSystem(), "/l/t-0")
    follower = open_log(MemoryFileSystem(), "/f/t-0")
    for sequence in range(3):
        leader.append_as_leader(_produce(sequence, b"v"), 2, now_ms=0, wall_clock_ms=BASE_TIME_MS)
    follower.append_as_follower(leader.read(0, 1 << 20).records, now_ms=0)
    assert follower.producer_state.producers == leader.producer_state.producers


def test_a_prepared_append_leaves_the_state_alone_until_applied() -> None:
    """prepare works on copies of the entries: an append that fails later (on disk, say) must not
    have advanced the producer's sequence, and a snapshot must not move with later appends."""
    manager = ProducerStateManager()
    _apply(manager, _header(0, 3))
    manager.take_snapshot(3)
    prepared = manager.prepare([_header(3, 2, base_offset=3), _header(5, 1, base_offset=5)], from_client=True)
    assert manager.producers[7].last_sequence == 2
    assert prepared.updated[7].last_sequence == 5
    manager.apply(prepared, 6)
    assert manager.producers[7].last_sequence == 5
    assert manager.restore_latest_snapshot(3) == 3
    assert (manager.producers[7].last_sequence, len(manager.producers[7].batches)) == (2, 1)
