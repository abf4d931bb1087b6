"""Kafka's fetcher and truncation scenarios (docs/scenarios.md §3, items 17–29).

A real ReplicaFetcherActor follows a mock leader that, like Kafka's ``MockFetcherThread``, returns
one batch per fetch; both sides keep real logs (``tests/support/fetcher_driver.py``). The follower's
truncation decisions are made by its real PartitionActor. Offsets and epochs are Kafka's.
"""

from __future__ import annotations

import pytest

from actors.common.errors import ErrorCode
from actors.common.protocol import (
    FetchRequest,
    ListOffsetsRequest,
    OffsetForLeaderEpochResult,
    OffsetsForLeaderEpochRequest,
)
from actors.common.types import TopicPartition
from actors.server.fetcher.replica_fetcher import FetchPhase
from actors.server.replica.messages import (
    AppendAsFollower,
    GetFollowerLogState,
    TruncateOnLeaderEpoch,
    TruncateTo,
    TruncationResult,
)
from runtime.storage.log import Log
from tests.support.fetcher_driver import FetcherDriver, batch, epochs, log_bytes, write

pytestmark = pytest.mark.asyncio

TP = TopicPartition("topic", 0)


def truncations(driver: FetcherDriver) -> list[tuple[object, TruncationResult]]:
    return [
        (message, answer)
        for message, answer in driver.local
        if isinstance(message, (TruncateOnLeaderEpoch, TruncateTo)) and isinstance(answer, TruncationResult)
    ]


def asked_epochs(driver: FetcherDriver) -> list[int]:
    return [
        p.leader_epoch
        for request in driver.sent_to_leader
        if isinstance(request, OffsetsForLeaderEpochRequest)
        for p in request.partitions
    ]


def assert_identical(leader: Log, follower: Log) -> None:
    assert log_bytes(follower) == log_bytes(leader)
    assert (follower.log_start_offset, follower.log_end_offset, follower.high_watermark) == (
        leader.log_start_offset,
        leader.log_end_offset,
        leader.high_watermark,
    )
    assert epochs(follower) == epochs(leader)


# ----------------------------------------------------------------------------- #17


async def test_simple_fetch_copies_the_leader_batch_and_high_watermark() -> None:
    """docs/scenarios.md §3 #17 (testSimpleFetch): follower at epoch 0 and offset 0; the leader has one
    2-record batch and HW 2 → follower LEO 2, HW 2."""
    driver = FetcherDriver()
    leader_log = driver.leader.add_partition(TP, leader_epoch=0)
    write(leader_log, batch(0, 2, 0))
    leader_log.update_high_watermark(2)
    await driver.follower(TP, leader_epoch=0)
    driver.add((TP, 0))
    driver.run()
    follower = driver.log(TP)
    assert (follower.log_end_offset, follower.high_watermark) == (2, 2)
    assert driver.sent(OffsetsForLeaderEpochRequest) == 0  # an empty log has no epoch to ask about
    assert driver.phase(TP) is FetchPhase.FETCHING
    assert driver.fetch_offset(TP) == 2


# ----------------------------------------------------------------------------- #18


async def test_fenced_epoch_in_truncation_fails_the_partition() -> None:
    """docs/scenarios.md §3 #18 (testFencedTruncation): follower epoch 0, leader epoch 1:
    OffsetsForLeaderEpoch is answered FENCED_LEADER_EPOCH; no truncation; the partition is removed and marked
    failed."""
    driver = FetcherDriver()
    write(driver.leader.add_partition(TP, leader_epoch=1), batch(0, 1, 0))
    await driver.follower(TP, leader_epoch=0, seed=lambda log: write(log, batch(0, 1, 0)))
    driver.add((TP, 0))
    driver.run()
    assert driver.sent(OffsetsForLeaderEpochRequest) == 1
    assert driver.failed(TP)
    assert driver.log(TP).log_end_offset == 1
    assert truncations(driver) == []


async def test_fenced_epoch_in_fetch_fails_the_partition() -> None:
    """docs/scenarios.md §3 #18 (testFencedFetch): fetching at epoch 0 when the leader moves to epoch 1."""
    driver = FetcherDriver()
    leader_log = driver.leader.add_partition(TP, leader_epoch=0)
    write(leader_log, batch(0, 1, 0))
    await driver.follower(TP, leader_epoch=0)
    driver.add((TP, 0))
    driver.run()
    assert driver.log(TP).log_end_offset == 1
    driver.leader.become_leader(TP, 1)
    write(leader_log, batch(1, 1, 1))
    driver.run()
    assert driver.failed(TP)
    assert driver.log(TP).log_end_offset == 1


# ----------------------------------------------------------------------------- #19


async def test_unknown_leader_epoch_in_truncation_is_retried_until_the_leader_catches_up() -> None:
    """docs/scenarios.md §3 #19 (testUnknownLeaderEpochInTruncation): follower epoch 1, leader epoch 0 →
    UNKNOWN_LEADER_EPOCH: the partition stays Truncating, no progress, retried after the back-off;
    once the leader reaches epoch 1 it truncates and fetches normally."""
    driver = FetcherDriver()
    leader_log = driver.leader.add_partition(TP, leader_epoch=0)
    write(leader_log, batch(0, 1, 0), batch(1, 1, 0))
    await driver.follower(TP, leader_epoch=1, seed=lambda log: write(log, batch(0, 1, 0)))
    driver.add((TP, 1))
    driver.run()
    assert driver.phase(TP) is FetchPhase.TRUNCATING
    assert driver.delayed(TP)
    assert driver.log(TP).log_end_offset == 1
    assert truncations(driver) == []
    driver.advance(1_000)  # retried: still unknown
    assert driver.sent(OffsetsForLeaderEpochRequest) == 2
    assert driver.phase(TP) is FetchPhase.TRUNCATING
    driver.leader.become_leader(TP, 1)
    driver.advance(1_000)
    assert driver.sent(OffsetsForLeaderEpochRequest) == 3
    assert driver.phase(TP) is FetchPhase.FETCHING
    assert driver.log(TP).log_end_offset == 2


async def test_unknown_leader_epoch_while_fetching_is_retried_until_the_leader_catches_up() -> None:
    """docs/scenarios.md §3 #19 (testUnknownLeaderEpochWhileFetching): the partition stays Fetching at the
    same offset and is retried."""
    driver = FetcherDriver()
    leader_log = driver.leader.add_partition(TP, leader_epoch=1)
    write(leader_log, batch(0, 1, 0))
    await driver.follower(TP, leader_epoch=1)
    driver.add((TP, 1))
    driver.run()
    assert driver.log(TP).log_end_offset == 1
    driver.leader.leader_epochs[TP] = 0  # the leader "goes back" to an epoch the follower is past
    write(leader_log, batch(1, 1, 1))
    driver.run()
    assert driver.phase(TP) is FetchPhase.FETCHING
    assert driver.fetch_offset(TP) == 1
    assert driver.delayed(TP)
    assert driver.log(TP).log_end_offset == 1
    driver.leader.leader_epochs[TP] = 1
    driver.advance(1_000)
    assert driver.log(TP).log_end_offset == 2


# ----------------------------------------------------------------------------- #20


async def test_multi_round_truncation_converges_on_the_leader_lineage() -> None:
    """docs/scenarios.md §3 #20 (testTruncation, KIP-279): follower offsets 0,1,2 in epochs 0,2,4 (current
    epoch 5); leader offsets 0,1,2 in epochs 1,3,5, HW 2. Ask 4 → (3, 2): the follower's epoch ≤ 3 is 2,
    ending at 2 → truncate to 2, again. Ask 2 → (1, 1): epoch 0 ends at 1 → truncate to 1, again. Ask 0 → (0,
    0): same epoch → truncate to min(1, 0, 1) = 0, done. Fetching then makes the logs identical."""
    driver = FetcherDriver()
    leader_log = driver.leader.add_partition(TP, leader_epoch=5)
    write(leader_log, batch(0, 1, 1, tag=b"L"), batch(1, 1, 3, tag=b"L"), batch(2, 1, 5, tag=b"L"))
    leader_log.update_high_watermark(2)
    await driver.follower(
        TP, leader_epoch=5, seed=lambda log: write(log, batch(0, 1, 0), batch(1, 1, 2), batch(2, 1, 4))
    )
    driver.add((TP, 5))
    driver.run()
    assert asked_epochs(driver) == [4, 2, 0]
    assert driver.epoch_answers() == [[(TP, 3, 2)], [(TP, 1, 1)], [(TP, 0, 0)]]
    assert [(answer.fetch_offset, answer.complete) for _, answer in truncations(driver)] == [
        (2, False),
        (1, False),
        (0, True),
    ]
    assert_identical(leader_log, driver.log(TP))
    assert driver.log(TP).high_watermark == 2


# ----------------------------------------------------------------------------- #21


async def test_follower_without_epochs_truncates_to_its_high_watermark() -> None:
    """docs/scenarios.md §3 #21 (testTruncateToHighWatermarkIfLeaderEpochInfoNotAvailable): 3 records, HW 2,
    no epoch cache → truncate to 2 without an epoch request; fetch offset 2, ready for fetch."""
    driver = FetcherDriver()
    write(driver.leader.add_partition(TP, leader_epoch=0), batch(0, 3, -1))

    def seed(log: Log) -> None:
        write(log, batch(0, 3, -1))
        log.update_high_watermark(2)

    await driver.follower(TP, leader_epoch=0, seed=seed)
    assert epochs(driver.log(TP)) == []
    driver.add((TP, 0))
    driver.run(max_leader_requests=0)
    assert driver.sent(OffsetsForLeaderEpochRequest) == 0
    assert driver.log(TP).log_end_offset == 2
    assert (driver.phase(TP), driver.fetch_offset(TP), driver.delayed(TP)) == (FetchPhase.FETCHING, 2, False)


# ----------------------------------------------------------------------------- #22


async def test_re_adding_a_partition_at_the_same_epoch_skips_truncation() -> None:
    """docs/scenarios.md §3 #22 (testTruncationSkippedIfNoEpochChange): after one truncation and one fetch
    (LEO 1), the partition is re-added at the same epoch: no new truncation, fetching continues (LEO 2)."""
    driver = FetcherDriver()
    leader_log = driver.leader.add_partition(TP, leader_epoch=5)
    write(leader_log, batch(0, 1, 1), batch(1, 1, 3), batch(2, 1, 5))
    await driver.follower(TP, leader_epoch=5)
    driver.add((TP, 5))
    driver.run(max_leader_requests=1)
    assert driver.log(TP).log_end_offset == 1
    exchanges = len(driver.local)
    driver.add((TP, 5))
    driver.run(max_leader_requests=1)
    assert driver.log(TP).log_end_offset == 2
    assert truncations(driver)[1:] == []
    assert all(not isinstance(m, (TruncateOnLeaderEpoch, TruncateTo)) for m, _ in driver.local[exchanges:])
    assert driver.sent(OffsetsForLeaderEpochRequest) == 0


# -------------------------------------------------------------------------- #23, #24


async def test_leader_log_wiped_truncates_the_follower_to_the_leader_end() -> None:
    """docs/scenarios.md §3 #23 (testFollowerFetchOutOfRangeHigh): follower caught up to 3; the leader's log
    is wiped (LEO 0) without an epoch change → OFFSET_OUT_OF_RANGE; the leader's latest offset 0 is below the
    follower's LEO 3 → the follower truncates to 0 (LEO, start, HW all 0)."""
    driver = FetcherDriver()
    leader_log = driver.leader.add_partition(TP, leader_epoch=0)
    write(leader_log, batch(0, 3, 0))
    leader_log.update_high_watermark(3)
    await driver.follower(TP, leader_epoch=0)
    driver.add((TP, 0))
    driver.run()
    assert (driver.log(TP).log_end_offset, driver.log(TP).high_watermark) == (3, 3)
    leader_log.truncate_fully_and_start_at(0, now_ms=0)
    driver.leader.last_sent_high_watermark.clear()
    driver.run()
    follower = driver.log(TP)
    assert driver.sent(ListOffsetsRequest) == 1  # LATEST only: 0 < 3
    assert (follower.log_end_offset, follower.log_start_offset, follower.high_watermark) == (0, 0, 0)
    assert (driver.phase(TP), driver.fetch_offset(TP)) == (FetchPhase.FETCHING, 0)


async def test_follower_behind_the_leader_log_start_restarts_at_it() -> None:
    """docs/scenarios.md §3 #24 (testFollowerFetchOutOfRangeLow): the follower holds offset 0 only; the
    leader's log starts at 2 → out of range; leader LEO ≥ follower LEO and earliest 2 > follower LEO 1 →
    truncateFullyAndStartAt(2) (empty, start 2, Fetching), then it converges with the leader."""
    driver = FetcherDriver()
    leader_log = driver.leader.add_partition(TP, leader_epoch=0)
    write(leader_log, batch(0, 2, 0), batch(2, 1, 0), batch(3, 1, 0))
    leader_log.update_high_watermark(4)
    leader_log.maybe_increment_log_start_offset(2)
    await driver.follower(TP, leader_epoch=0, seed=lambda log: write(log, batch(0, 1, 0)))
    driver.add((TP, 0))
    driver.run(max_leader_requests=3)  # the epoch request, the fetch, ListOffsets LATEST
    driver.run(max_leader_requests=1)  # ListOffsets EARLIEST
    follower = driver.log(TP)
    assert driver.sent(ListOffsetsRequest) == 2
    assert (follower.log_start_offset, follower.log_end_offset) == (2, 2)
    assert (driver.phase(TP), driver.fetch_offset(TP)) == (FetchPhase.FETCHING, 2)
    driver.run()
    assert (follower.log_start_offset, follower.log_end_offset, follower.high_watermark) == (2, 4, 4)
    assert log_bytes(follower) == log_bytes(leader_log)


# ----------------------------------------------------------------------------- #25


async def out_of_range_follower() -> tuple[FetcherDriver, Log]:
    """A follower with offset 0 whose leader's log starts at 2 (the fetch at 1 is out of range)."""
    driver = FetcherDriver()
    leader_log = driver.leader.add_partition(TP, leader_epoch=0)
    write(leader_log, batch(0, 2, 0), batch(2, 2, 0))
    leader_log.update_high_watermark(4)
    leader_log.maybe_increment_log_start_offset(2)
    await driver.follower(TP, leader_epoch=0, seed=lambda log: write(log, batch(0, 1, 0)))
    return driver, leader_log


async def test_fenced_earliest_offset_lookup_fails_the_partition() -> None:
    """docs/scenarios.md §3 #25 (testFencedOffsetResetAfterOutOfRange)."""
    driver, _ = await out_of_range_follower()

    def fence_earliest(request: object) -> None:
        if isinstance(request, ListOffsetsRequest) and request.partitions[0].timestamp == -2:
            driver.leader.script(ListOffsetsRequest, TP, ErrorCode.FENCED_LEADER_EPOCH)

    driver.before_leader_answers = fence_earliest
    driver.add((TP, 0))
    driver.run()
    assert driver.sent(ListOffsetsRequest) == 2
    assert driver.failed(TP)
    assert driver.log(TP).log_end_offset == 1


async def test_unknown_leader_epoch_in_the_latest_offset_lookup_is_retried() -> None:
    """docs/scenarios.md §3 #25 (testRetryAfterUnknownLeaderEpochInLatestOffsetFetch): backed off and retried
    until the reset completes."""
    driver, leader_log = await out_of_range_follower()
    driver.leader.script(ListOffsetsRequest, TP, ErrorCode.UNKNOWN_LEADER_EPOCH)
    driver.add((TP, 0))
    driver.run()
    assert driver.sent(ListOffsetsRequest) == 1
    assert driver.phase(TP) is FetchPhase.RESETTING
    assert driver.delayed(TP)
    assert driver.log(TP).log_end_offset == 1
    driver.advance(1_000)
    follower = driver.log(TP)
    assert driver.sent(ListOffsetsRequest) == 3  # LATEST again, then EARLIEST
    assert (follower.log_start_offset, follower.log_end_offset) == (2, 4)
    assert log_bytes(follower) == log_bytes(leader_log)


async def test_corrupt_fetched_batch_delays_the_partition_and_the_next_fetch_succeeds() -> None:
    """docs/scenarios.md §3 #25 (testCorruptMessage): delayed, not failed."""
    driver = FetcherDriver()
    leader_log = driver.leader.add_partition(TP, leader_epoch=0)
    write(leader_log, batch(0, 2, 0))
    await driver.follower(TP, leader_epoch=0)
    driver.leader.corrupt_next_fetch.add(TP)
    driver.add((TP, 0))
    driver.run()
    assert driver.log(TP).log_end_offset == 0
    assert not driver.failed(TP)
    assert (driver.phase(TP), driver.delayed(TP)) == (FetchPhase.FETCHING, True)
    driver.advance(1_000)
    assert driver.log(TP).log_end_offset == 2
    assert log_bytes(driver.log(TP)) == log_bytes(leader_log)


# ----------------------------------------------------------------------------- #26


T1P0, T2P1 = TopicPartition("t1", 0), TopicPartition("t2", 1)


def follower_at_epoch_5_with_leo_200(log: Log) -> None:
    """Epochs (1, 0), (3, 60), (5, 120); LEO 200."""
    write(log, batch(0, 60, 1), batch(60, 60, 3), batch(120, 80, 5))


async def test_truncates_to_the_end_offset_the_leader_gives_for_the_follower_epoch() -> None:
    """docs/scenarios.md §3 #26 (shouldTruncateToOffsetSpecifiedInEpochOffsetResponse): follower epoch 5, LEO
    200; the leader answers (5, 156) and (5, 172) → truncate to 156 and 172."""
    driver = FetcherDriver()
    for tp, end in ((T1P0, 156), (T2P1, 172)):
        leader_log = driver.leader.add_partition(tp, leader_epoch=5)
        write(leader_log, batch(0, 60, 1), batch(60, 60, 3), batch(120, end - 120, 5))
        await driver.follower(tp, leader_epoch=5, seed=follower_at_epoch_5_with_leo_200)
    driver.add((T1P0, 5), (T2P1, 5))
    driver.run(max_leader_requests=1)
    assert driver.sent(OffsetsForLeaderEpochRequest) == 1
    assert (driver.log(T1P0).log_end_offset, driver.log(T2P1).log_end_offset) == (156, 172)
    assert (driver.fetch_offset(T1P0), driver.fetch_offset(T2P1)) == (156, 172)


# ----------------------------------------------------------------------------- #27


async def test_second_epoch_request_when_the_leader_answers_an_epoch_the_follower_lacks() -> None:
    """docs/scenarios.md §3 #27 (shouldFetchLeaderEpochSecondTimeIfLeaderRepliesWithEpochNotKnownToFollower):
    follower latest epoch 5, LEO 200, its end for epoch ≤ 4 is (3, 120). The leader answers
    (4, 155)/(4, 143) → truncate to 120, no fetch yet (1 epoch request, 0 fetches). Next answers
    (3, 101)/(3, 102) → truncate to 101/102, fetching starts (2 epoch requests, 1 fetch) and no
    further epoch request follows."""
    driver = FetcherDriver()
    for tp, end_of_3, end_of_4 in ((T1P0, 101, 155), (T2P1, 102, 143)):
        # Epoch 3's leader wrote two batches; the current leader (epoch 7) copied only the first
        # before it led epoch 4, the follower both before it led epoch 5.
        leader_log = driver.leader.add_partition(tp, leader_epoch=7)
        write(
            leader_log,
            batch(0, 60, 1),
            batch(60, end_of_3 - 60, 3),
            batch(end_of_3, end_of_4 - end_of_3, 4, tag=b"L"),
        )
        driver.leader.become_leader(tp, 7)

        def seed(log: Log, end_of_3: int = end_of_3) -> None:
            write(log, batch(0, 60, 1), batch(60, end_of_3 - 60, 3), batch(end_of_3, 120 - end_of_3, 3))
            write(log, batch(120, 80, 5))

        await driver.follower(tp, leader_epoch=7, seed=seed)
        assert epochs(driver.log(tp)) == [(1, 0), (3, 60), (5, 120)]
        assert driver.log(tp).end_offset_for_epoch(4) == (3, 120)
    driver.add((T1P0, 7), (T2P1, 7))
    driver.run(max_leader_requests=1)
    assert driver.epoch_answers() == [[(T1P0, 4, 155), (T2P1, 4, 143)]]
    assert (driver.log(T1P0).log_end_offset, driver.log(T2P1).log_end_offset) == (120, 120)
    assert (driver.sent(OffsetsForLeaderEpochRequest), driver.sent(FetchRequest)) == (2, 0)  # 2nd in flight
    assert driver.leader.count(OffsetsForLeaderEpochRequest) == 1
    driver.run(max_leader_requests=1)
    assert driver.epoch_answers()[1] == [(T1P0, 3, 101), (T2P1, 3, 102)]
    assert (driver.log(T1P0).log_end_offset, driver.log(T2P1).log_end_offset) == (101, 102)
    assert (driver.sent(OffsetsForLeaderEpochRequest), driver.sent(FetchRequest)) == (2, 1)
    driver.run()
    assert driver.sent(OffsetsForLeaderEpochRequest) == 2
    for tp in (T1P0, T2P1):
        assert log_bytes(driver.log(tp)) == log_bytes(driver.leader.log(tp))


# ----------------------------------------------------------------------------- #28


@pytest.mark.parametrize(("tp", "end_offset"), [(T1P0, 155), (T2P1, 143)])
async def test_version_zero_answer_truncates_to_the_leader_end_offset_in_one_round(
    tp: TopicPartition, end_offset: int
) -> None:
    """docs/scenarios.md §3 #28 (shouldUseLeaderEndOffsetIfInterBrokerVersionBelow20): an answer without an
    epoch (API v0) → truncate to min(leader end offset, LEO) in one round."""
    driver = FetcherDriver()
    write(driver.leader.add_partition(tp, leader_epoch=5), batch(0, end_offset, 5))
    await driver.follower(tp, leader_epoch=5, seed=follower_at_epoch_5_with_leo_200)
    driver.leader.script(
        OffsetsForLeaderEpochRequest,
        tp,
        OffsetForLeaderEpochResult(
            topic=tp.topic,
            partition=tp.partition,
            error_code=ErrorCode.NONE,
            leader_epoch=-1,
            end_offset=end_offset,
        ),
    )
    driver.add((tp, 5))
    driver.run(max_leader_requests=1)
    assert driver.log(tp).log_end_offset == end_offset
    assert (driver.phase(tp), driver.fetch_offset(tp)) == (FetchPhase.FETCHING, end_offset)
    assert driver.sent(OffsetsForLeaderEpochRequest) == 1


async def test_undefined_leader_answer_truncates_to_the_high_watermark() -> None:
    """docs/scenarios.md §3 #28 (shouldTruncateToInitialFetchOffsetIfLeaderReturnsUndefinedOffset): (-1, -1)
    with the follower's HW (its initial fetch offset) at 100 → truncate to 100."""
    driver = FetcherDriver()
    write(driver.leader.add_partition(TP, leader_epoch=5), batch(0, 100, 5))

    def seed(log: Log) -> None:
        follower_at_epoch_5_with_leo_200(log)
        log.update_high_watermark(100)

    await driver.follower(TP, leader_epoch=5, seed=seed)
    driver.leader.script(
        OffsetsForLeaderEpochRequest,
        TP,
        OffsetForLeaderEpochResult(topic=TP.topic, partition=TP.partition, error_code=ErrorCode.NONE),
    )
    driver.add((TP, 5))
    driver.run(max_leader_requests=1)
    assert driver.log(TP).log_end_offset == 100
    assert (driver.phase(TP), driver.fetch_offset(TP)) == (FetchPhase.FETCHING, 100)


# ----------------------------------------------------------------------------- #29


async def test_partition_removed_during_the_epoch_request_is_not_truncated() -> None:
    """docs/scenarios.md §3 #29 (shouldFilterPartitionsMadeLeaderDuringLeaderEpochRequest): two partitions
    truncating; one is removed (it became leader) while OffsetsForLeaderEpoch is in flight → only
    the other is truncated, to 49."""
    driver = FetcherDriver()
    for tp in (T1P0, T2P1):
        write(driver.leader.add_partition(tp, leader_epoch=5), batch(0, 49, 5))
        await driver.follower(tp, leader_epoch=5, seed=lambda log: write(log, batch(0, 100, 5)))

    def became_leader(request: object) -> None:
        if isinstance(request, OffsetsForLeaderEpochRequest) and T1P0 in driver.fetcher.partitions:
            assert {p.tp for p in request.partitions} == {T1P0, T2P1}
            driver.remove(T1P0)

    driver.before_leader_answers = became_leader
    driver.add((T1P0, 5), (T2P1, 5))
    driver.run(max_leader_requests=1)
    assert driver.log(T1P0).log_end_offset == 100
    assert driver.log(T2P1).log_end_offset == 49
    assert T1P0 not in driver.fetcher.partitions
    assert T1P0 not in driver.fetcher.failed
    assert [m.__class__ for m, _ in truncations(driver)] == [TruncateOnLeaderEpoch]


# ------------------------------------------------------------------ stale local answers


@pytest.mark.parametrize("stale", [GetFollowerLogState, TruncateOnLeaderEpoch, AppendAsFollower])
async def test_local_answer_for_an_older_epoch_does_not_fail_the_partition_re_added_at_a_newer_one(
    stale: type,
) -> None:
    """docs/replication.md §6.3 (only answers for partitions still present *at the epoch the request was built
    for* apply): a LeaderAndIsr (epoch 6) reaches the broker while the fetcher's local request for epoch 5 is
    on its way to the partition. The partition, now at epoch 6, refuses the stale request with
    FENCED_LEADER_EPOCH; the fetcher must drop that answer, not fail the partition it re-added at epoch 6, and
    go on truncating and fetching in epoch 6."""
    driver = FetcherDriver()
    leader_log = driver.leader.add_partition(TP, leader_epoch=5)
    write(leader_log, batch(0, 2, 5), batch(2, 2, 5))
    await driver.follower(TP, leader_epoch=5, seed=lambda log: write(log, batch(0, 2, 5)))

    def leader_and_isr_meanwhile(request: object) -> None:
        if isinstance(request, stale) and getattr(request, "leader_epoch", None) == 5:
            driver.leader.become_leader(TP, 6)
            driver.new_epoch(TP, 6)

    driver.before_local_answers = leader_and_isr_meanwhile
    driver.add((TP, 5))
    driver.run()
    assert next(answer.error_code for message, answer in driver.local if isinstance(message, stale)) is (
        ErrorCode.FENCED_LEADER_EPOCH
    )
    assert not driver.failed(TP)
    assert driver.fetcher.partitions[TP].leader_epoch == 6
    assert driver.phase(TP) is FetchPhase.FETCHING
    assert log_bytes(driver.log(TP)) == log_bytes(leader_log)


async def test_high_watermark_truncation_is_not_applied_to_a_partition_re_added_meanwhile() -> None:
    """docs/replication.md §6.3 step 2 (results for partitions whose leader epoch changed since the request
    was built are ignored), for a partition without epochs truncating to its HW in the same round as one that
    asked OffsetsForLeaderEpoch: re-added at epoch 6 while that request is in flight, it starts over in epoch
    6 (reads its log state again) instead of taking the epoch-5 decision."""
    driver = FetcherDriver()
    write(driver.leader.add_partition(T1P0, leader_epoch=5), batch(0, 2, 5))
    await driver.follower(T1P0, leader_epoch=5, seed=lambda log: write(log, batch(0, 2, 5)))
    write(driver.leader.add_partition(T2P1, leader_epoch=5), batch(0, 2, -1))
    await driver.follower(T2P1, leader_epoch=5, seed=lambda log: write(log, batch(0, 2, -1)))

    def leader_and_isr_meanwhile(request: object) -> None:
        if (
            isinstance(request, OffsetsForLeaderEpochRequest)
            and driver.fetcher.partitions[T2P1].leader_epoch == 5
        ):
            driver.leader.become_leader(T2P1, 6)
            driver.new_epoch(T2P1, 6)

    driver.before_leader_answers = leader_and_isr_meanwhile
    driver.add((T1P0, 5), (T2P1, 5))
    driver.run()
    asked = [(type(m).__name__, m.leader_epoch) for m in driver.local_requests[T2P1]]
    assert asked[:3] == [("GetFollowerLogState", 5), ("GetFollowerLogState", 6), ("TruncateTo", 6)]
    assert not driver.failed(T2P1)
    assert driver.phase(T2P1) is FetchPhase.FETCHING


# ------------------------------------------------------------------------- idle answers


async def test_an_empty_answer_repeating_what_the_partition_applied_is_not_handed_to_it() -> None:
    """replica_fetcher.py, "idle answers": while one partition gets a batch per fetch, the other's
    empty answers carry the HW and log start offset it already applied at the same offset, so it is
    not asked to append them; once replica.high.watermark.checkpoint.interval.ms has passed, such
    an answer is applied again (a partition that lost its state is brought back while idle)."""
    driver = FetcherDriver()
    busy, idle = TP, TopicPartition("topic", 1)
    for tp in (busy, idle):
        leader_log = driver.leader.add_partition(tp, leader_epoch=0)
        write(leader_log, batch(0, 1, 0))
        leader_log.update_high_watermark(1)
        await driver.follower(tp, leader_epoch=0)
    driver.add((busy, 0), (idle, 0))
    driver.run()
    assert (driver.log(idle).log_end_offset, driver.log(idle).high_watermark) == (1, 1)

    def appends(tp: TopicPartition) -> int:
        return sum(isinstance(m, AppendAsFollower) for m in driver.local_requests.get(tp, []))

    applied = appends(idle)
    leader_busy = driver.leader.log(busy)
    for offset in range(1, 4):
        write(leader_busy, batch(offset, 1, 0))
        leader_busy.update_high_watermark(offset + 1)
        driver.run()
    assert (driver.log(busy).log_end_offset, driver.log(busy).high_watermark) == (4, 4)
    assert driver.sent(FetchRequest) >= 4
    assert appends(idle) == applied

    driver.advance(driver.config.replica_high_watermark_checkpoint_interval_ms)
    write(leader_busy, batch(4, 1, 0))
    leader_busy.update_high_watermark(5)
    driver.run()
    assert driver.log(busy).log_end_offset == 5
    assert appends(idle) == applied + 1
    assert (driver.log(idle).log_end_offset, driver.log(idle).high_watermark) == (1, 1)
