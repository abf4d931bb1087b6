"""Kafka's partition scenarios (docs/scenarios.md §1 and §2) on one PartitionActor.

Each test drives a real PartitionActor (``tests/support/partition_driver.py``): its log is a real
``Log`` on a memory disk, its ISR writes go to an in-memory ZooKeeper, and time is virtual. The
``MaybeShrinkIsr`` tick that the broker's ``isr-expiration`` task sends is sent by the test, at the
instants Kafka's tests call ``maybeShrinkIsr``. Numbers (offsets, epochs, times) are Kafka's.
"""

from __future__ import annotations

import logging
import random

import pytest

from actors.common.errors import ErrorCode
from actors.server.replica.messages import (
    AppendAsFollower,
    AppendRecords,
    GetFollowerLogState,
    NotifyOnChange,
    PartitionAppendResult,
    PartitionChanged,
    ReadRecords,
    TruncateTo,
)
from actors.server.replica.partition_state import LeaderAndIsr, Role
from runtime.effects import Effect, Pipe, Tell
from runtime.storage.log_manager import LogManager
from tests.support.partition_driver import PartitionDriver, error_of, records, replies_to

pytestmark = pytest.mark.asyncio

L, F, F2 = 0, 1, 2


async def leader_driver(
    *,
    seeded: int,
    isr: tuple[int, ...],
    replicas: tuple[int, ...] = (L, F),
    epoch: int = 5,
    lag_ms: int = 10_000,
    min_insync_replicas: int = 1,
    zk_version: int | None = None,
) -> PartitionDriver:
    """Broker L with ``seeded`` records on disk becomes leader of ``epoch``."""
    driver = await PartitionDriver(
        broker_id=L, replica_lag_time_max_ms=lag_ms, min_insync_replicas=min_insync_replicas
    ).start()
    if seeded:
        driver.seed_log(seeded)
    await driver.become_leader(leader_epoch=epoch, isr=isr, replicas=replicas, zk_version=zk_version)
    return driver


async def znode_at_version_one(driver: PartitionDriver, *, epoch: int, isr: tuple[int, ...]) -> int:
    """The controller wrote the partition state twice: the znode is at version 1."""
    await driver.controller_writes_state(leader=L, leader_epoch=epoch, isr=isr)
    return await driver.controller_writes_state(leader=L, leader_epoch=epoch, isr=isr)


def isr_writes(effects: list[Effect]) -> list[Pipe]:
    return [e for e in effects if isinstance(e, Pipe)]


# --------------------------------------------------------------------------- docs/scenarios.md §1 #1–#3


class TestIsrExpiration:
    """IsrExpirationTest: replica.lag.time.max.ms = 100, leader LEO 20, ISR {L, F}; F was
    initialised at t0 by a fetch at offset 0 when the leader's LEO was 0."""

    LAG = 100

    async def setup(self) -> PartitionDriver:
        driver = await leader_driver(seeded=0, isr=(L, F), epoch=0, lag_ms=self.LAG)
        await driver.follower_fetch(F, 0)
        await driver.produce_reply(records(20))
        assert driver.log.log_end_offset == 20
        return driver

    async def test_stuck_follower_is_out_of_sync_after_150_ms_without_fetches(self) -> None:
        """docs/scenarios.md §1 #1 (testIsrExpirationForStuckFollowers): F fetches 19 at t0, then nothing."""
        driver = await self.setup()
        await driver.follower_fetch(F, 19)
        assert isr_writes(await driver.maybe_shrink_isr()) == []
        await driver.advance(150)
        await driver.maybe_shrink_isr()
        assert driver.state.isr == {L}
        assert (await driver.zk_state())[0].isr == (L,)

    async def test_follower_that_never_fetches_again_is_out_of_sync_after_150_ms(self) -> None:
        """docs/scenarios.md §1 #1 (testIsrExpirationIfNoFetchRequestMade)."""
        driver = await self.setup()
        assert isr_writes(await driver.maybe_shrink_isr()) == []
        await driver.advance(150)
        await driver.maybe_shrink_isr()
        assert driver.state.isr == {L}

    async def test_slow_follower_stays_in_sync_while_it_reaches_the_previous_fetch_leader_end(self) -> None:
        """docs/scenarios.md §1 #2 (testIsrExpirationForSlowFollowers): 18 at t0, 19 at t0+75 (below the
        leader LEO 20 now and at the previous fetch): caught up stays t0, in sync at t0+75, out at t0+150."""
        driver = await self.setup()
        t0 = driver.clock.now_ms()
        await driver.follower_fetch(F, 18)
        await driver.advance(75)
        await driver.follower_fetch(F, 19)
        assert driver.state.remote_replicas[F].last_caught_up_time_ms == t0
        assert isr_writes(await driver.maybe_shrink_isr()) == []
        await driver.advance(75)
        await driver.maybe_shrink_isr()
        assert driver.state.isr == {L}

    async def test_slow_follower_that_fetches_the_leader_end_is_caught_up_now(self) -> None:
        """docs/scenarios.md §1 #2, last step: at t0+150 a fetch at 20 makes caught-up = now: in sync."""
        driver = await self.setup()
        await driver.follower_fetch(F, 18)
        await driver.advance(75)
        await driver.follower_fetch(F, 19)
        await driver.advance(75)
        await driver.follower_fetch(F, 20)
        assert driver.state.remote_replicas[F].last_caught_up_time_ms == driver.clock.now_ms()
        assert isr_writes(await driver.maybe_shrink_isr()) == []
        assert driver.state.isr == {L, F}

    async def test_caught_up_idle_follower_is_never_out_of_sync(self) -> None:
        """docs/scenarios.md §1 #3 (testIsrExpirationForCaughtUpFollowers): F fetched 20 = leader LEO."""
        driver = await self.setup()
        await driver.follower_fetch(F, 20)
        await driver.advance(150)
        assert isr_writes(await driver.maybe_shrink_isr()) == []
        assert driver.state.isr == {L, F}


# ------------------------------------------------------------------------------ docs/scenarios.md §1 #4


async def test_follower_fetch_state_follows_the_two_step_caught_up_rule() -> None:
    """docs/scenarios.md §1 #4 (PartitionTest.testUpdateFollowerFetchState)."""
    driver = await PartitionDriver(broker_id=L).start()
    driver.seed_log(6)
    await driver.advance(1_000)
    t = driver.clock.now_ms()
    await driver.become_leader(leader_epoch=5, isr=(L, F), replicas=(L, F))
    replica = driver.state.remote_replicas[F]
    assert (replica.last_caught_up_time_ms, replica.log_end_offset, replica.log_start_offset) == (t, -1, -1)
    await driver.advance(500)
    await driver.follower_fetch(F, 3)
    assert (replica.last_caught_up_time_ms, replica.log_end_offset, replica.log_start_offset) == (t, 3, 0)
    await driver.advance(500)
    await driver.follower_fetch(F, 6)
    assert (replica.last_caught_up_time_ms, replica.log_end_offset) == (t + 1_000, 6)


# ------------------------------------------------------------------------------ docs/scenarios.md §1 #5


async def test_shrink_writes_the_cached_zk_version_and_the_high_watermark_jumps() -> None:
    """docs/scenarios.md §1 #5 (PartitionTest.testMaybeShrinkIsr): L (10 records) leads epoch 5 with ISR {L,F}
    and zkVersion 1; HW 0 (F's LEO unknown). At once: nothing. After 10001 ms: the write (L, epoch 5, isr [L],
    expected version 1) succeeds with version 2: ISR {L}, HW 10."""
    driver = await PartitionDriver(broker_id=L).start()
    driver.seed_log(10)
    zk_version = await znode_at_version_one(driver, epoch=5, isr=(L, F))
    assert zk_version == 1
    await driver.become_leader(leader_epoch=5, isr=(L, F), replicas=(L, F), zk_version=zk_version)
    assert driver.log.high_watermark == 0
    assert isr_writes(await driver.maybe_shrink_isr()) == []
    await driver.advance(10_001)
    driver.hold_pipes = True
    [write] = isr_writes(await driver.maybe_shrink_isr())
    assert write.on_success(2).proposal == LeaderAndIsr(
        leader=L, leader_epoch=5, isr=(L,), controller_epoch=1, zk_version=1
    )
    assert driver.log.high_watermark == 0  # not before ZooKeeper accepted the shrink
    await driver.release_pipes()
    state, version = await driver.zk_state()
    assert (state.leader, state.leader_epoch, state.isr, state.controller_epoch, version) == (
        L,
        5,
        (L,),
        1,
        2,
    )
    assert driver.state.isr == {L}
    assert driver.state.zk_version == 2
    assert driver.log.high_watermark == 10
    assert driver.statistics().isr_shrinks_total == 1


async def test_shrink_that_zookeeper_refuses_changes_nothing() -> None:
    """docs/scenarios.md §1 #5 (PartitionTest.testIsrNotShrunkIfUpdateFails): the controller changed the znode
    (a new leader) after the LeaderAndIsr: the write on version 1 fails, ISR {L,F}, HW 0."""
    driver = await PartitionDriver(broker_id=L).start()
    driver.seed_log(10)
    zk_version = await znode_at_version_one(driver, epoch=5, isr=(L, F))
    await driver.become_leader(leader_epoch=5, isr=(L, F), replicas=(L, F), zk_version=zk_version)
    await driver.controller_writes_state(leader=F, leader_epoch=6, isr=(F,))
    await driver.advance(10_001)
    await driver.maybe_shrink_isr()
    assert driver.state.isr == {L, F}
    assert driver.state.zk_version == 1
    assert driver.log.high_watermark == 0
    assert (await driver.zk_state())[0].leader == F
    stats = driver.statistics()
    assert (stats.isr_shrinks_total, stats.failed_isr_updates_total) == (0, 1)


# -------------------------------------------------------------------------- docs/scenarios.md §1 #6, #7


async def test_no_shrink_if_the_previous_fetch_had_caught_up() -> None:
    """docs/scenarios.md §1 #6 (testShouldNotShrinkIsrIfPreviousFetchIsCaughtUp): at +5000 F fetches 5 (HW 5);
    L appends 5 (LEO 15); at +10001 F fetches 10 ≥ the leader LEO seen at its previous fetch, so it was caught
    up at +5000; HW 10; no shrink."""
    driver = await leader_driver(seeded=10, isr=(L, F))
    start = driver.clock.now_ms()
    await driver.advance(5_000)
    await driver.follower_fetch(F, 5)
    assert driver.log.high_watermark == 5
    await driver.produce_reply(records(5))
    assert driver.log.log_end_offset == 15
    await driver.advance(5_001)
    await driver.follower_fetch(F, 10)
    assert driver.state.remote_replicas[F].last_caught_up_time_ms == start + 5_000
    assert driver.log.high_watermark == 10
    assert isr_writes(await driver.maybe_shrink_isr()) == []
    assert driver.state.isr == {L, F}


async def test_no_shrink_if_the_follower_caught_up_to_the_log_end() -> None:
    """docs/scenarios.md §1 #7 (testShouldNotShrinkIsrIfFollowerCaughtUpToLogEnd): F fetches 10 = leader LEO
    (HW 10), then silence for 10001 ms."""
    driver = await leader_driver(seeded=10, isr=(L, F))
    await driver.follower_fetch(F, 10)
    assert driver.log.high_watermark == 10
    await driver.advance(10_001)
    assert isr_writes(await driver.maybe_shrink_isr()) == []
    assert driver.state.isr == {L, F}


# ------------------------------------------------------------------------------ docs/scenarios.md §1 #8


async def test_follower_joins_the_isr_once_it_reaches_the_high_watermark() -> None:
    """docs/scenarios.md §1 #8 (PartitionTest.testIsrExpansion): L (10 records) leads epoch 5 with ISR {L}
    (epoch start 10, HW 10). F fetches 3: not added. F fetches 10: (L, 5, [L,F], version 1)."""
    driver = await PartitionDriver(broker_id=L).start()
    driver.seed_log(10)
    zk_version = await znode_at_version_one(driver, epoch=5, isr=(L,))
    await driver.become_leader(leader_epoch=5, isr=(L,), replicas=(L, F), zk_version=zk_version)
    assert (driver.state.leader_epoch_start_offset, driver.log.high_watermark) == (10, 10)
    assert isr_writes((await driver.ask(_read(F, 3)))[1]) == []
    assert driver.state.isr == {L}
    driver.hold_pipes = True
    _, effects = await driver.ask(_read(F, 10))
    [write] = isr_writes(effects)
    assert write.on_success(2).proposal == LeaderAndIsr(
        leader=L, leader_epoch=5, isr=(L, F), controller_epoch=1, zk_version=1
    )
    await driver.release_pipes()
    assert driver.state.isr == {L, F}
    assert (await driver.zk_state())[0].isr == (L, F)
    assert driver.statistics().isr_expands_total == 1


async def test_follower_stays_out_when_the_expansion_write_fails() -> None:
    """docs/scenarios.md §1 #8 (testIsrNotExpandedIfUpdateFails): ISR stays {L}, F's LEO is recorded as 10."""
    driver = await PartitionDriver(broker_id=L).start()
    driver.seed_log(10)
    zk_version = await znode_at_version_one(driver, epoch=5, isr=(L,))
    await driver.become_leader(leader_epoch=5, isr=(L,), replicas=(L, F), zk_version=zk_version)
    await driver.controller_writes_state(leader=L, leader_epoch=6, isr=(L,))
    await driver.follower_fetch(F, 10)
    assert driver.state.isr == {L}
    assert driver.state.remote_replicas[F].log_end_offset == 10
    assert driver.statistics().failed_isr_updates_total == 1


# ------------------------------------------------------------------------------ docs/scenarios.md §1 #9


async def test_follower_joins_the_isr_only_after_reaching_the_current_epoch_start() -> None:
    """docs/scenarios.md §1 #9 (testFollowerDoesNotJoinISRUntilCaughtUpToOffsetWithinCurrentLeaderEpoch): AR
    {L,F1,F2}, ISR {L,F2}, epoch 8; L appends 2 + 3 (LEO 5); F2 fetches 0 then 1 (HW 1). L becomes
    follower (epoch 9), leader again (epoch 10, epoch start 5) and appends 2 (LEO 7). F1 fetches 0
    then 1 (≥ HW 1 but < 5): not added; F1 fetches 5: added, ISR {L,F1,F2}."""
    f1, f2 = F, F2
    replicas = (L, f1, f2)
    driver = await leader_driver(seeded=0, isr=(L, f2), replicas=replicas, epoch=8)
    await driver.produce_reply(records(2))
    await driver.produce_reply(records(3))
    assert driver.log.log_end_offset == 5
    await driver.follower_fetch(f2, 0)
    await driver.follower_fetch(f2, 1)
    assert driver.log.high_watermark == 1
    await driver.become_follower(leader=f2, leader_epoch=9, isr=(L, f2), replicas=replicas)
    await driver.become_leader(leader_epoch=10, isr=(L, f2), replicas=replicas)
    assert driver.state.leader_epoch_start_offset == 5
    await driver.produce_reply(records(2))
    assert driver.log.log_end_offset == 7
    await driver.follower_fetch(f1, 0)
    await driver.follower_fetch(f1, 1)
    assert driver.state.isr == {L, f2}
    await driver.follower_fetch(f1, 5)
    assert driver.state.isr == {L, f1, f2}
    assert (await driver.zk_state())[0].isr == (L, f1, f2)


# ----------------------------------------------------------------------------- docs/scenarios.md §2 #10


async def test_new_leader_answers_offsets_for_its_epoch_before_writing_in_it() -> None:
    """docs/scenarios.md §2 #10 (PartitionTest.testMakeLeaderUpdatesEpochCache): 4 records in epochs 0 and 5;
    after makeLeader(epoch 8) OffsetsForLeaderEpoch(8) answers (8, 4)."""
    driver = await PartitionDriver(broker_id=L).start()
    driver.log.append_as_leader(records(2), 0, now_ms=0, wall_clock_ms=0)
    driver.log.append_as_leader(records(2), 5, now_ms=0, wall_clock_ms=0)
    await driver.become_leader(leader_epoch=8, isr=(L, F), replicas=(L, F))
    answer = await driver.offsets_for_leader_epoch(8, current_leader_epoch=8)
    assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (ErrorCode.NONE, 8, 4)
    assert [(e.epoch, e.start_offset) for e in driver.log.leader_epoch_cache.entries] == [
        (0, 0),
        (5, 2),
        (8, 4),
    ]


# ----------------------------------------------------------------------------- docs/scenarios.md §2 #12


async def test_follower_append_below_the_log_start_restarts_an_empty_log_at_the_batch() -> None:
    """docs/scenarios.md §2 #12 (testAppendRecordsAsFollowerBelowLogStartOffset): an empty follower log
    starting at 5. A batch at 3 is refused; a batch 4–6 restarts the log at 4 (LEO 7); batches at 7 and 8
    append; a batch at 3 is then refused (the log is no longer empty)."""
    driver = await PartitionDriver(broker_id=F).start()
    await driver.become_follower(leader=L, leader_epoch=1, isr=(L, F), replicas=(L, F))
    driver.log.truncate_fully_and_start_at(5, now_ms=0)
    assert (driver.log.log_start_offset, driver.log.log_end_offset) == (5, 5)
    refused = await driver.append_as_follower(records(1, epoch=1, base_offset=3))
    assert refused.error_code is not ErrorCode.NONE
    assert (driver.log.log_start_offset, driver.log.log_end_offset) == (5, 5)
    accepted = await driver.append_as_follower(records(3, epoch=1, base_offset=4))
    assert accepted.error_code is ErrorCode.NONE
    assert (driver.log.log_start_offset, driver.log.log_end_offset) == (4, 7)
    for base in (7, 8):
        appended = await driver.append_as_follower(records(1, epoch=1, base_offset=base))
        assert appended.error_code is ErrorCode.NONE
    assert driver.log.log_end_offset == 9
    late = await driver.append_as_follower(records(1, epoch=1, base_offset=3))
    assert late.error_code is not ErrorCode.NONE
    assert (driver.log.log_start_offset, driver.log.log_end_offset) == (4, 9)


# ----------------------------------------------------------------------------- docs/scenarios.md §2 #14


async def test_parked_acks_all_produce_answers_not_leader_when_the_partition_becomes_follower() -> None:
    """docs/scenarios.md §2 #14 (testClearPurgatoryOnBecomingFollower), on the partition."""
    driver = await leader_driver(seeded=0, isr=(L, F), epoch=0)
    requester, effects = await driver.produce(records(1), acks=-1)
    assert replies_to(requester, effects) == []
    assert driver.statistics().delayed_produces == 1
    effects = await driver.become_follower(leader=F, leader_epoch=1, isr=(F,), replicas=(L, F))
    [answer] = replies_to(requester, effects)
    assert answer.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert driver.statistics().delayed_produces == 0


# ----------------------------------------------------------------------------- docs/scenarios.md §2 #15


async def test_above_the_high_watermark_followers_get_data_and_consumers_nothing() -> None:
    """docs/scenarios.md §2 #15 (testFetchBeyondHighWatermarkReturnEmptyResponse): HW 0, LEO 3."""
    driver = await leader_driver(seeded=0, isr=(L, F), epoch=0)
    await driver.produce_reply(records(3))
    assert (driver.log.log_end_offset, driver.log.high_watermark) == (3, 0)
    consumer = await driver.consumer_fetch(0)
    assert (consumer.response.error_code, consumer.response.records) == (ErrorCode.NONE, b"")
    assert consumer.response.high_watermark == 0
    follower = await driver.follower_fetch(F, 0)
    assert follower.response.error_code is ErrorCode.NONE
    assert follower.response.records != b""


async def test_follower_fetch_refused_for_a_stale_epoch_does_not_move_the_follower() -> None:
    """docs/scenarios.md §2 #15 (testFollowerStateNotUpdatedIfLogReadFails): a follower fetch fenced on its
    leader epoch leaves the follower's recorded LEO and log start offset as they were."""
    driver = await leader_driver(seeded=10, isr=(L, F), epoch=5)
    await driver.follower_fetch(F, 3, log_start_offset=0, current_leader_epoch=5)
    replica = driver.state.remote_replicas[F]
    before = (replica.log_end_offset, replica.log_start_offset, replica.last_caught_up_time_ms)
    assert before[:2] == (3, 0)
    await driver.advance(1_000)
    fenced = await driver.follower_fetch(F, 10, log_start_offset=2, current_leader_epoch=4)
    assert fenced.response.error_code is ErrorCode.FENCED_LEADER_EPOCH
    assert (replica.log_end_offset, replica.log_start_offset, replica.last_caught_up_time_ms) == before
    assert driver.log.high_watermark == 3


# ----------------------------------------------------------------------------- docs/scenarios.md §2 #16


async def test_acks_all_below_min_isr_is_refused_before_the_append() -> None:
    """docs/scenarios.md §2 #16: ISR {L}, min.insync.replicas 2 → NOT_ENOUGH_REPLICAS, nothing appended."""
    driver = await leader_driver(seeded=0, isr=(L,), epoch=0, min_insync_replicas=2)
    result = await driver.ask_reply(_append(records(1), acks=-1))
    assert result.error_code is ErrorCode.NOT_ENOUGH_REPLICAS
    assert driver.log.log_end_offset == 0


async def test_acks_all_completed_by_a_shrink_below_min_isr_is_not_enough_replicas_after_append() -> None:
    """docs/scenarios.md §2 #16: ISR {L,F}, append, the ISR shrinks to {L} before F fetches: the HW reaches
    the required offset, the answer is NOT_ENOUGH_REPLICAS_AFTER_APPEND and the data stays."""
    driver = await leader_driver(seeded=0, isr=(L, F), epoch=0, min_insync_replicas=2)
    requester, effects = await driver.produce(records(1), acks=-1)
    assert replies_to(requester, effects) == []
    await driver.advance(10_001)
    effects = await driver.maybe_shrink_isr()
    [answer] = replies_to(requester, effects)
    assert isinstance(answer, PartitionAppendResult)
    assert (answer.error_code, answer.base_offset) == (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, 0)
    assert (driver.log.log_end_offset, driver.log.high_watermark) == (1, 1)


async def test_acks_all_times_out_when_neither_the_high_watermark_nor_the_isr_moves() -> None:
    """docs/scenarios.md §2 #16: no HW advance and no shrink within the ack timeout → REQUEST_TIMED_OUT, at
    the timeout and not before; the ``ExpiresPerSec`` count moves."""
    driver = await leader_driver(seeded=0, isr=(L, F), epoch=0, min_insync_replicas=2)
    requester, _ = await driver.produce(records(1), acks=-1, timeout_ms=1_500)
    assert replies_to(requester, await driver.advance(1_499)) == []
    [answer] = replies_to(requester, await driver.advance(1))
    assert answer.error_code is ErrorCode.REQUEST_TIMED_OUT
    stats = driver.statistics()
    assert (stats.delayed_produces, stats.delayed_produce_expires_total) == (0, 1)
    assert driver.log.log_end_offset == 1


# ------------------------------------------------------------ consumer offsets out of range


async def test_consumer_fetch_outside_the_log_is_offset_out_of_range() -> None:
    """docs/replication.md §4.2: a consumer fetch below the log start offset or above the LEO →
    OFFSET_OUT_OF_RANGE; at the HW or between HW and LEO → no records, no error."""
    driver = await PartitionDriver(broker_id=L).start()
    driver.log.truncate_fully_and_start_at(5, now_ms=0)
    await driver.become_leader(leader_epoch=0, isr=(L, F), replicas=(L, F))
    await driver.produce_reply(records(3))
    assert (driver.log.log_start_offset, driver.log.high_watermark, driver.log.log_end_offset) == (5, 5, 8)
    assert error_of(await driver.consumer_fetch(4)) is ErrorCode.OFFSET_OUT_OF_RANGE
    assert error_of(await driver.consumer_fetch(9)) is ErrorCode.OFFSET_OUT_OF_RANGE
    for offset in (5, 7, 8):
        read = await driver.consumer_fetch(offset)
        assert (read.response.error_code, read.response.records) == (ErrorCode.NONE, b"")


# ------------------------------------------------------------------------------- KIP-320


@pytest.mark.parametrize(
    ("current_leader_epoch", "expected"),
    [(4, ErrorCode.FENCED_LEADER_EPOCH), (6, ErrorCode.UNKNOWN_LEADER_EPOCH), (5, ErrorCode.NONE)],
)
async def test_offsets_for_leader_epoch_is_fenced_on_the_current_leader_epoch(
    current_leader_epoch: int, expected: ErrorCode
) -> None:
    """KIP-320 (docs/leader-epochs.md §4): lower → FENCED_LEADER_EPOCH, higher → UNKNOWN_LEADER_EPOCH."""
    driver = await leader_driver(seeded=4, isr=(L, F), epoch=5)
    answer = await driver.offsets_for_leader_epoch(0, current_leader_epoch=current_leader_epoch)
    assert answer.error_code is expected
    if expected is ErrorCode.NONE:
        assert (answer.leader_epoch, answer.end_offset) == (0, 4)
    else:
        assert (answer.leader_epoch, answer.end_offset) == (-1, -1)


@pytest.mark.parametrize(
    ("current_leader_epoch", "expected"),
    [(4, ErrorCode.FENCED_LEADER_EPOCH), (6, ErrorCode.UNKNOWN_LEADER_EPOCH), (-1, ErrorCode.NONE)],
)
async def test_fetch_is_fenced_on_the_current_leader_epoch(
    current_leader_epoch: int, expected: ErrorCode
) -> None:
    """KIP-320: Fetch carries the sender's leader epoch; -1 opts out."""
    driver = await leader_driver(seeded=4, isr=(L,), epoch=5)
    consumer = await driver.consumer_fetch(0, current_leader_epoch=current_leader_epoch)
    follower = await driver.follower_fetch(F, 0, current_leader_epoch=current_leader_epoch)
    assert consumer.response.error_code is expected
    assert follower.response.error_code is expected
    if expected is not ErrorCode.NONE:
        assert consumer.response.records == follower.response.records == b""
        assert driver.state.remote_replicas[F].log_end_offset == -1


async def test_deposed_leader_fences_a_fetch_with_its_old_epoch() -> None:
    """KIP-320: a client that still believes in epoch 5 asks the former leader, now a follower of
    epoch 6: the stale epoch is reported as FENCED_LEADER_EPOCH (the epoch is checked before the
    leadership, as Kafka's ``Partition.localLogWithEpochOrException`` does)."""
    driver = await leader_driver(seeded=4, isr=(L, F), epoch=5)
    await driver.become_follower(leader=F, leader_epoch=6, isr=(F,), replicas=(L, F))
    assert driver.state.role is Role.FOLLOWER
    assert error_of(await driver.consumer_fetch(0, current_leader_epoch=5)) is ErrorCode.FENCED_LEADER_EPOCH
    assert (await driver.offsets_for_leader_epoch(0, current_leader_epoch=5)).error_code is (
        ErrorCode.FENCED_LEADER_EPOCH
    )
    assert (
        error_of(await driver.consumer_fetch(0, current_leader_epoch=6)) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    )
    assert error_of(await driver.consumer_fetch(0)) is ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_each_role_refuses_the_other_roles_messages_as_kafka_does() -> None:
    """The role table: a leader refuses the fetcher's requests (NOT_LEADER_OR_FOLLOWER, the log
    untouched); a follower refuses produce, answers a broker waiting for a change at once and
    ignores the ISR tick; a partition not yet told its role refuses both sides. A follower's own
    requests are fenced on their leader epoch."""
    leader = await leader_driver(seeded=4, isr=(L, F), epoch=5)
    assert (await leader.ask_reply(GetFollowerLogState(5))).error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (await leader.ask_reply(TruncateTo(5, 0))).error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    refused = await leader.ask_reply(AppendAsFollower(5, 4, records(2, base_offset=4), 0, 0))
    assert (refused.error_code, leader.log.log_end_offset) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, 4)

    follower = await PartitionDriver(broker_id=F).start()
    follower.seed_log(4)
    await follower.become_follower(leader=L, leader_epoch=5, isr=(L, F), replicas=(L, F))
    assert (await follower.produce_reply(records(1))).error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    told = await follower.tell(NotifyOnChange(seen_log_end_offset=4, seen_high_watermark=0))
    assert [e.message for e in told if isinstance(e, Tell)] == [PartitionChanged(follower.tp)]
    assert await follower.maybe_shrink_isr() == []
    for epoch, expected in [(4, ErrorCode.FENCED_LEADER_EPOCH), (6, ErrorCode.UNKNOWN_LEADER_EPOCH)]:
        assert (await follower.ask_reply(GetFollowerLogState(epoch))).error_code is expected
    state = await follower.ask_reply(GetFollowerLogState(5))
    assert (state.error_code, state.log_end_offset) == (ErrorCode.NONE, 4)

    offline = await PartitionDriver(broker_id=F2).start()
    assert (await offline.ask_reply(GetFollowerLogState(0))).error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert error_of(await offline.consumer_fetch(0)) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (await offline.produce_reply(records(1))).error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER


# ------------------------------------------------------------------------------- helpers


def _read(replica_id: int, offset: int) -> ReadRecords:
    return ReadRecords(
        replica_id=replica_id,
        fetch_offset=offset,
        follower_log_start_offset=0,
        max_bytes=1 << 20,
        current_leader_epoch=-1,
        min_one_message=True,
        update_follower_state=True,
    )


def _append(data: bytes, *, acks: int) -> AppendRecords:
    return AppendRecords(data, acks, 30_000)


async def test_a_leader_missing_flushed_records_since_its_start_says_so_loudly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Loading found flushed records gone from this replica's files (a segment deleted while the
    broker was stopped); if it becomes leader before fetching them back, it logs an ERROR naming them."""
    driver = await PartitionDriver().start()
    driver.seed_log(5)
    driver.log.roll(now_ms=0)
    driver.seed_log(5)
    second = driver.log.active_segment.base_offset
    driver.log_manager.close(now_ms=0)
    for path in driver.fs.list_dir(f"/data/{driver.tp}"):
        if path.startswith(f"{second:020d}"):
            driver.fs.delete_file(f"/data/{driver.tp}/{path}")
    driver.log_manager = LogManager.open(driver.fs, "/data", now_ms=0, rng=random.Random(1))
    driver.actor.log_manager = driver.log_manager
    assert driver.log.missing_flushed_offsets == (5, 10)
    with caplog.at_level(logging.ERROR):
        await driver.become_leader(leader_epoch=1, isr=(0,), replicas=(0,))
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any(f"Partition {driver.tp} becomes leader without offsets 5..9" in e for e in errors), errors
