"""The one-batch fast paths of ``Log.append_as_leader`` and ``Log.append_as_follower`` give exactly
what the general path gives (outcome, bytes, epochs, producer state), and ``one_plain_batch`` declines
everything unusual (which the general path then accepts or rejects with its own errors).

The general path is forced by a trailing partial batch: ``one_plain_batch`` declines it, ``analyze``
trims it (as Kafka does), so both logs are asked to append the same batch."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.storage.compression import CompressionType
from runtime.storage.config import LogConfig, RecordsValidation
from runtime.storage.fs import MemoryFileSystem
from runtime.storage.log import Log
from runtime.storage.log_types import LogAppendInfo
from runtime.storage.log_validator import LeaderPlan, one_plain_batch
from runtime.storage.records import TimestampType, iterate_batches
from tests.unit.storage.helpers import batch, open_log

MAX = 1_000_012
PARTIAL = 20  # bytes of a next batch, too few to frame it

# One produce request: its values, whether an idempotent producer sent it, whether it is a retry of
# the previous request (same bytes), and the leader epoch at the time (epochs only grow).
Request = tuple[list[bytes], bool, bool, int]
requests = st.lists(
    st.tuples(
        st.lists(st.binary(max_size=100), min_size=1, max_size=8),
        st.booleans(),
        st.booleans(),
        st.integers(min_value=0, max_value=2),
    ),
    min_size=1,
    max_size=12,
)


def state(log: Log) -> tuple[object, ...]:
    producers = {
        pid: (entry.producer_epoch, list(entry.batches))
        for pid, entry in log.producer_state.producers.items()
    }
    return (
        log.log_end_offset,
        log.read(0, 1 << 30).records,
        log.leader_epoch_cache.entries,
        producers,
        log.producer_state.map_end_offset,
    )


def both(fast: Log, general: Log, append: str, data: bytes, *args: object) -> LogAppendInfo:
    """Append ``data`` to both logs (the general one with a partial batch after it); same outcome."""
    fast_info: LogAppendInfo = getattr(fast, append)(data, *args, now_ms=0, wall_clock_ms=1)
    general_info: LogAppendInfo = getattr(general, append)(
        data + data[:PARTIAL], *args, now_ms=0, wall_clock_ms=1
    )
    assert fast_info == general_info
    return fast_info


@settings(max_examples=60, deadline=None)
@given(requests=requests)
def test_the_fast_paths_equal_the_general_path(requests: list[Request]) -> None:
    fast, general = open_log(MemoryFileSystem(), "/a/t-0"), open_log(MemoryFileSystem(), "/b/t-0")
    sequence, epoch, previous, previous_idempotent = 0, 0, None, False
    for values, idempotent, retry, epoch_step in requests:
        epoch += epoch_step
        is_retry = retry and previous is not None
        if is_retry:
            assert previous is not None
            data, idempotent = previous, previous_idempotent
        else:
            data = batch(*values, producer_id=7 if idempotent else -1, producer_epoch=0 if idempotent else -1,
                         base_sequence=sequence if idempotent else -1)  # fmt: skip
            sequence += len(values) if idempotent else 0
        info = both(fast, general, "append_as_leader", data, epoch)
        # An idempotent producer's retry is found and not written again; any other retry is.
        assert info.duplicate == (is_retry and idempotent)
        assert state(fast) == state(general)
        previous, previous_idempotent = data, idempotent

    # The leader's log, batch by batch, appended by two followers.
    fast_follower, general_follower = (
        open_log(MemoryFileSystem(), "/c/t-0"),
        open_log(MemoryFileSystem(), "/d/t-0"),
    )
    for leader_batch in iterate_batches(fast.read(0, 1 << 30).records):
        both(fast_follower, general_follower, "append_as_follower", bytes(leader_batch.data))
        assert state(fast_follower) == state(general_follower)
    assert state(fast_follower)[:3] == state(fast)[:3]


def test_a_retried_idempotent_batch_is_found_on_the_fast_path() -> None:
    log = open_log(MemoryFileSystem())
    data = batch(b"a", b"b", producer_id=7, producer_epoch=0, base_sequence=0)
    first = log.append_as_leader(data, 0, now_ms=0, wall_clock_ms=1)
    again = log.append_as_leader(data, 0, now_ms=0, wall_clock_ms=1)
    assert again.duplicate
    assert not first.duplicate
    assert (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset) == (0, 1)
    assert log.log_end_offset == 2


@pytest.mark.parametrize(
    "data",
    [
        batch(b"a", compression=CompressionType.GZIP),  # compressed
        batch(b"a") + batch(b"b"),  # two batches
        batch(b"a")[:-1],  # truncated
        batch(b"a") + batch(b"b")[:PARTIAL],  # a partial batch after it
        b"\x00" * 10,
    ],
)
def test_one_plain_batch_declines_the_unusual(data: bytes) -> None:
    assert one_plain_batch(data, MAX) is None


def test_a_corrupt_or_oversized_batch_is_left_to_the_general_path() -> None:
    data = bytearray(batch(b"value"))
    data[-1] ^= 0xFF
    assert one_plain_batch(bytes(data), MAX) is None
    assert one_plain_batch(batch(b"x" * 100), 50) is None  # above max.message.bytes


@pytest.mark.parametrize(
    ("config", "as_sent"),
    [
        (LogConfig(), True),
        (LogConfig(message_timestamp_type=TimestampType.LOG_APPEND_TIME), False),
        (LogConfig(records_validation=RecordsValidation.FULL), False),
        (LogConfig(message_timestamp_difference_max_ms=1000), False),
    ],
)
def test_the_leader_writes_as_sent_only_when_nothing_needs_the_records(
    config: LogConfig, as_sent: bool
) -> None:
    assert LeaderPlan.of(config).as_sent is as_sent
