"""The consumer's SubscriptionState: fetched records become ConsumerRecords, are handed out in
``max.poll.records`` chunks with positions moving past them, and partitions take turns."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.clients.consumer.config import OffsetResetStrategy
from actors.clients.consumer.state import ConsumerRecord, SubscriptionState
from actors.common.errors import ErrorCode
from actors.common.protocol import FetchPartitionResponse
from actors.common.types import TopicPartition
from runtime.storage.record_builder import SimpleRecord, build_batch
from runtime.storage.records import RecordHeader, TimestampType

A = TopicPartition("t", 0)
B = TopicPartition("t", 1)
C = TopicPartition("t", 2)


def _fetched(tp: TopicPartition, records: bytes) -> FetchPartitionResponse:
    return FetchPartitionResponse(
        topic=tp.topic, partition=tp.partition, error_code=ErrorCode.NONE, high_watermark=99, records=records
    )


def _values(tp: TopicPartition, first: int, count: int) -> bytes:
    return build_batch(
        [SimpleRecord(f"{tp.partition}:{first + i}".encode(), timestamp=5) for i in range(count)],
        base_offset=first,
        partition_leader_epoch=3,
    )


def _state(*tps: TopicPartition) -> SubscriptionState:
    state = SubscriptionState(OffsetResetStrategy.EARLIEST)
    state.assign(tps)
    for tp in tps:
        state.seek(tp, 0)
    return state


def test_fetched_records_become_consumer_records_from_the_fetch_offset_on() -> None:
    state = _state(A)
    state.seek(A, 2)
    data = build_batch(
        [
            SimpleRecord(b"a", b"k", timestamp=7),
            SimpleRecord(None, None, (RecordHeader("h", b"x"), RecordHeader("n", None)), 8),
            SimpleRecord(b"c", timestamp=9),
        ],
        base_offset=1,
        partition_leader_epoch=4,
    )
    assert not state.apply_fetch(A, 2, _fetched(A, data), check_crcs=True)
    records, error = state.take(10)
    assert error is None
    assert records == [
        ConsumerRecord("t", 0, 2, 8, TimestampType.CREATE_TIME, None, None, (("h", b"x"), ("n", None)), 4),
        ConsumerRecord("t", 0, 3, 9, TimestampType.CREATE_TIME, None, b"c", (), 4),
    ]
    assert records[1].value == b"c"
    assert records[1].leader_epoch == 4
    assert state.position(A) == 4


def test_log_append_time_batches_give_every_record_the_batch_max_timestamp() -> None:
    state = _state(A)
    data = build_batch(
        [SimpleRecord(b"a", timestamp=1), SimpleRecord(b"b", timestamp=2)],
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        log_append_time=1234,
    )
    state.apply_fetch(A, 0, _fetched(A, data), check_crcs=True)
    records, _ = state.take(10)
    assert [(r.timestamp, r.timestamp_type) for r in records] == [(1234, TimestampType.LOG_APPEND_TIME)] * 2


def test_a_corrupt_batch_is_an_error_for_the_next_poll() -> None:
    state = _state(A)
    data = bytearray(_values(A, 0, 3))
    data[-2] ^= 0x01
    state.apply_fetch(A, 0, _fetched(A, bytes(data)), check_crcs=True)
    records, error = state.take(10)
    assert records == []
    assert error is not None
    assert error.error_code is ErrorCode.CORRUPT_MESSAGE
    assert state.position(A) == 0


def test_records_are_handed_out_in_chunks_and_positions_follow() -> None:
    state = _state(A)
    state.apply_fetch(A, 0, _fetched(A, _values(A, 0, 7)), check_crcs=True)
    first, _ = state.take(3)
    assert [r.offset for r in first] == [0, 1, 2]
    assert state.position(A) == 3
    second, _ = state.take(3)
    third, _ = state.take(3)
    assert [r.offset for r in second + third] == [3, 4, 5, 6]
    assert state.position(A) == 7
    assert not state.has_buffered()


def test_the_next_fetch_goes_out_while_one_fetch_is_buffered_never_two() -> None:
    state = _state(A)
    state.apply_fetch(A, 0, _fetched(A, _values(A, 0, 4)), check_crcs=True)
    assert state.fetchable() == [A]
    assert state.fetch_offset(A) == 4  # after the buffered records
    assert state.position(A) == 0
    state.apply_fetch(A, 4, _fetched(A, _values(A, 4, 4)), check_crcs=True)
    assert state.fetchable() == []  # two fetches buffered
    taken, _ = state.take(3)
    assert [r.offset for r in taken] == [0, 1, 2]
    assert state.fetchable() == []
    taken, _ = state.take(3)
    assert [r.offset for r in taken] == [3]  # the first fetch's last record: a poll ends there
    assert state.fetchable() == [A]
    assert state.fetch_offset(A) == 8
    taken, _ = state.take(10)
    assert [r.offset for r in taken] == [4, 5, 6, 7]
    assert state.position(A) == 8


def test_a_fetch_ahead_from_before_a_seek_is_dropped() -> None:
    state = _state(A)
    state.apply_fetch(A, 0, _fetched(A, _values(A, 0, 4)), check_crcs=True)
    state.seek(A, 2)
    state.apply_fetch(A, 4, _fetched(A, _values(A, 4, 4)), check_crcs=True)  # sent before the seek
    assert not state.has_buffered()
    assert state.fetch_offset(A) == 2


def test_an_error_on_a_fetch_ahead_waits_for_the_buffered_records() -> None:
    state = _state(A)
    state.apply_fetch(A, 0, _fetched(A, _values(A, 0, 2)), check_crcs=True)
    out_of_range = FetchPartitionResponse(
        topic=A.topic, partition=A.partition, error_code=ErrorCode.OFFSET_OUT_OF_RANGE
    )
    assert not state.apply_fetch(A, 2, out_of_range, check_crcs=True)
    assert state.fetchable() == []  # not again ahead: from the position, once they are out
    taken, error = state.take(10)
    assert [r.offset for r in taken] == [0, 1]
    assert error is None
    assert state.fetchable() == [A]
    assert state.fetch_offset(A) == 2
    state.apply_fetch(A, 2, out_of_range, check_crcs=True)  # now it resets (earliest)
    assert state.position(A) is None
    assert state.needs_reset() == {A: OffsetResetStrategy.EARLIEST}


def test_fetches_are_handed_out_in_turn() -> None:
    state = _state(A, B, C)
    for tp in (A, B, C):
        state.apply_fetch(tp, 0, _fetched(tp, _values(tp, 0, 2)), check_crcs=True)
    # A's next fetch comes back before anything was handed out: it is taken after B's and C's.
    state.apply_fetch(A, 2, _fetched(A, _values(A, 2, 2)), check_crcs=True)
    order = []
    while state.has_buffered():
        chunk, _ = state.take(10)
        order.append([(r.partition, r.offset) for r in chunk])
    assert order == [[(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)], [(0, 2), (0, 3)]]
    assert [state.position(tp) for tp in (A, B, C)] == [4, 2, 2]


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from("fffdddttttsx"), st.integers(0, 1), st.integers(1, 8)),
        min_size=30,
        max_size=120,
    )
)
def test_any_interleaving_hands_out_each_partitions_records_in_order_without_gaps(
    steps: list[tuple[str, int, int]],
) -> None:
    """Fetches sent and answered in any order (the leader answering from its log of 40 records),
    takes, seeks and stale answers: every partition's records come out at consecutive offsets from
    its position, which then sits right after the last one handed out."""
    tps = (A, B)
    state = _state(*tps)
    in_flight: dict[TopicPartition, int] = {}
    expected = dict.fromkeys(tps, 0)  # the offset the next record handed out must have
    for action, which, size in steps:
        tp = tps[which]
        if action == "f":  # a fetch of every fetchable partition not in one already
            for wanted in state.fetchable():
                if wanted not in in_flight:
                    offset = state.fetch_offset(wanted)
                    assert offset is not None
                    in_flight[wanted] = offset
        elif action == "d" and tp in in_flight:  # the leader answers: up to `size` records
            offset = in_flight.pop(tp)
            count = min(size, 40 - offset)
            records = _values(tp, offset, count) if count > 0 else b""
            state.apply_fetch(tp, offset, _fetched(tp, records), check_crcs=True)
        elif action == "t":
            taken, error = state.take(size)
            assert error is None
            for record in taken:
                key = TopicPartition(record.topic, record.partition)
                assert record.offset == expected[key]
                assert record.value == f"{record.partition}:{record.offset}".encode()
                expected[key] = record.offset + 1
            for key in tps:
                assert state.position(key) == expected[key]
        elif action == "s":
            state.seek(tp, size * 3)
            expected[tp] = size * 3
        elif action == "x" and tp in in_flight:  # an answer from before a seek, or repeated
            state.apply_fetch(tp, in_flight[tp] + 1, _fetched(tp, _values(tp, 0, 2)), check_crcs=True)
