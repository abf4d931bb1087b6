"""ListOffsets by timestamp at the partition leader (docs/log.md §11, Kafka 2.4's
``Partition.fetchOffsetForTimestamp``), on one PartitionActor with a real log and virtual time:
the high watermark bounds what a consumer is told, a follower is bounded by the log end offset,
KIP-320 fencing comes first, and the leader epoch is the found record's."""

from __future__ import annotations

import pytest

from actors.common.errors import ErrorCode
from actors.common.protocol import (
    CONSUMER_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartitionResponse,
)
from actors.server.replica.messages import FetchOffsetForTimestamp
from runtime.storage.record_builder import SimpleRecord, build_batch
from tests.support.partition_driver import PartitionDriver

pytestmark = pytest.mark.asyncio

L, F = 0, 1
T = 1_700_000_000_000
EPOCH = 5


def stamped(*timestamps: int, epoch: int = -1) -> bytes:
    return build_batch(
        [SimpleRecord(b"v%d" % i, timestamp=ts) for i, ts in enumerate(timestamps)],
        partition_leader_epoch=epoch,
    )


async def list_offset(
    driver: PartitionDriver,
    timestamp: int,
    *,
    replica_id: int = CONSUMER_REPLICA_ID,
    current_leader_epoch: int = -1,
) -> ListOffsetsPartitionResponse:
    reply = await driver.ask_reply(FetchOffsetForTimestamp(replica_id, timestamp, current_leader_epoch))
    assert isinstance(reply, ListOffsetsPartitionResponse)
    return reply


def answer(response: ListOffsetsPartitionResponse) -> tuple[ErrorCode, int, int, int]:
    return response.error_code, response.timestamp, response.offset, response.leader_epoch


NO_OFFSET = (ErrorCode.NONE, -1, -1, -1)


async def leader_with_records() -> PartitionDriver:
    """Leader of epoch 5 for ISR {L, F}: offsets 0-4 with out-of-order CreateTime timestamps, HW 0."""
    driver = await PartitionDriver(broker_id=L).start()
    await driver.become_leader(leader_epoch=EPOCH, isr=(L, F), replicas=(L, F))
    await driver.produce_reply(stamped(T + 100, T + 50, T + 300))  # offsets 0-2
    await driver.produce_reply(stamped(T + 200, T + 400))  # offsets 3-4
    assert driver.log.log_end_offset == 5
    assert driver.log.high_watermark == 0
    return driver


async def test_a_consumer_is_told_offsets_below_the_high_watermark_only() -> None:
    driver = await leader_with_records()
    assert answer(await list_offset(driver, T + 250)) == NO_OFFSET  # offset 2 is above the HW
    await driver.follower_fetch(F, 2)
    assert driver.log.high_watermark == 2
    assert answer(await list_offset(driver, T + 250)) == NO_OFFSET  # offset 2 == HW: still not
    assert answer(await list_offset(driver, T + 60)) == (ErrorCode.NONE, T + 100, 0, EPOCH)
    await driver.follower_fetch(F, 3)
    assert answer(await list_offset(driver, T + 250)) == (ErrorCode.NONE, T + 300, 2, EPOCH)
    assert answer(await list_offset(driver, T + 350)) == NO_OFFSET  # offset 4 is above the HW
    await driver.follower_fetch(F, 5)
    assert answer(await list_offset(driver, T + 350)) == (ErrorCode.NONE, T + 400, 4, EPOCH)
    assert answer(await list_offset(driver, T + 401)) == NO_OFFSET  # no record has it


async def test_a_follower_is_told_offsets_below_the_log_end_offset() -> None:
    driver = await leader_with_records()
    assert answer(await list_offset(driver, T + 350, replica_id=F)) == (ErrorCode.NONE, T + 400, 4, EPOCH)
    assert answer(await list_offset(driver, T + 401, replica_id=F)) == NO_OFFSET


async def test_the_leader_epoch_is_that_of_the_record_s_batch() -> None:
    driver = await PartitionDriver(broker_id=L).start()
    driver.log.append_as_leader(stamped(T), 2, now_ms=0, wall_clock_ms=T)  # offset 0, epoch 2
    await driver.become_leader(leader_epoch=EPOCH, isr=(L,), replicas=(L, F))
    await driver.produce_reply(stamped(T + 10))  # offset 1, epoch 5; ISR {L}: HW 2 at once
    assert driver.log.high_watermark == 2
    cache = driver.log.leader_epoch_cache
    assert answer(await list_offset(driver, T)) == (ErrorCode.NONE, T, 0, 2)
    assert cache.epoch_for_offset(0) == 2
    assert answer(await list_offset(driver, T + 5)) == (ErrorCode.NONE, T + 10, 1, EPOCH)
    assert cache.epoch_for_offset(1) == EPOCH


async def test_earliest_carries_the_first_cached_epoch_and_latest_the_current_one() -> None:
    driver = await PartitionDriver(broker_id=L).start()
    driver.log.append_as_leader(stamped(T), 2, now_ms=0, wall_clock_ms=T)
    await driver.become_leader(leader_epoch=EPOCH, isr=(L,), replicas=(L, F))
    await driver.produce_reply(stamped(T + 10))
    assert answer(await list_offset(driver, EARLIEST_TIMESTAMP)) == (ErrorCode.NONE, -1, 0, 2)
    assert answer(await list_offset(driver, LATEST_TIMESTAMP)) == (ErrorCode.NONE, -1, 2, EPOCH)
    assert answer(await list_offset(driver, -3)) == (ErrorCode.INVALID_REQUEST, -1, -1, -1)


async def test_a_new_leader_below_its_epoch_start_says_offset_not_available_to_consumers() -> None:
    """Kafka 2.4: a timestamp whose offset is not below the HW, or that has none, is
    OFFSET_NOT_AVAILABLE while the leader's HW lags its epoch start; an offset below the HW is
    answered all the same."""
    driver = await PartitionDriver(broker_id=L).start()
    driver.log.append_as_leader(stamped(T, T + 10, T + 20), 2, now_ms=0, wall_clock_ms=T)
    driver.log.maybe_increment_high_watermark(1)  # the old leader's HW reached 1
    await driver.become_leader(leader_epoch=EPOCH, isr=(L, F), replicas=(L, F))
    assert driver.state.leader_epoch_start_offset == 3
    assert answer(await list_offset(driver, T)) == (ErrorCode.NONE, T, 0, 2)
    assert answer(await list_offset(driver, T + 5)) == (ErrorCode.OFFSET_NOT_AVAILABLE, -1, -1, -1)
    assert answer(await list_offset(driver, T + 99)) == (ErrorCode.OFFSET_NOT_AVAILABLE, -1, -1, -1)
    assert answer(await list_offset(driver, T + 5, replica_id=F)) == (ErrorCode.NONE, T + 10, 1, 2)
    await driver.follower_fetch(F, 3)  # the HW reaches the epoch start
    assert answer(await list_offset(driver, T + 5)) == (ErrorCode.NONE, T + 10, 1, 2)
    assert answer(await list_offset(driver, T + 99)) == NO_OFFSET


async def test_the_current_leader_epoch_is_checked_before_the_lookup() -> None:
    driver = await leader_with_records()
    await driver.follower_fetch(F, 5)
    fenced = await list_offset(driver, T, current_leader_epoch=EPOCH - 1)
    assert answer(fenced) == (ErrorCode.FENCED_LEADER_EPOCH, -1, -1, -1)
    unknown = await list_offset(driver, T, current_leader_epoch=EPOCH + 1)
    assert answer(unknown) == (ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1, -1)
    current = await list_offset(driver, T, current_leader_epoch=EPOCH)
    assert answer(current) == (ErrorCode.NONE, T + 100, 0, EPOCH)
    await driver.become_follower(leader=F, leader_epoch=EPOCH + 1, isr=(L, F), replicas=(L, F))
    stale = await list_offset(driver, T, current_leader_epoch=EPOCH)
    assert answer(stale) == (ErrorCode.FENCED_LEADER_EPOCH, -1, -1, -1)
    follower = await list_offset(driver, T, current_leader_epoch=EPOCH + 1)
    assert answer(follower) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1, -1)


async def test_an_undecodable_batch_is_a_corrupt_message_answer() -> None:
    driver = await leader_with_records()
    await driver.follower_fetch(F, 5)
    segment = driver.log.active_segment
    data = bytearray(segment.log_file.pread(segment.size, 0))
    data[-3:] = b"\xff\xff\xff"  # the last record's fields now run past its end
    segment.log_file.truncate(0)
    segment.log_file.write(bytes(data))
    assert answer(await list_offset(driver, T + 350)) == (ErrorCode.CORRUPT_MESSAGE, -1, -1, -1)
