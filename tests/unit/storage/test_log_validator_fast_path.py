"""The leader's one-batch fast path gives exactly what the general path gives, and declines
everything unusual (which the general path then accepts or rejects with its own errors)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.storage.compression import CompressionType
from runtime.storage.config import LogConfig, RecordsValidation
from runtime.storage.log_validator import LeaderPlan, analyze, assign_offsets, single_batch_in_place
from runtime.storage.records import TimestampType
from tests.unit.storage.helpers import batch

PLAN = LeaderPlan.of(LogConfig())
MAX = 1_000_012


def joined(parts: list[bytes | bytearray | memoryview]) -> bytes:
    return b"".join(bytes(part) for part in parts)


@given(
    values=st.lists(st.binary(max_size=200), min_size=1, max_size=20),
    first_offset=st.integers(min_value=0, max_value=2**40),
    leader_epoch=st.integers(min_value=0, max_value=2**20),
    producer=st.booleans(),
)
def test_the_fast_path_equals_the_general_path(
    values: list[bytes], first_offset: int, leader_epoch: int, producer: bool
) -> None:
    data = batch(*values, producer_id=7 if producer else -1, producer_epoch=0 if producer else -1,
                 base_sequence=0 if producer else -1)  # fmt: skip
    fast = single_batch_in_place(data, first_offset, leader_epoch, MAX, PLAN)
    assert fast is not None
    analysis, assigned = fast
    general_analysis = analyze(data, True, MAX)
    general = assign_offsets(general_analysis, data, first_offset, leader_epoch, LogConfig(), 0, PLAN)
    assert analysis == general_analysis
    assert joined(assigned.parts) == joined(general.parts)
    assert assigned._replace(parts=[]) == general._replace(parts=[])


@pytest.mark.parametrize(
    ("data", "plan"),
    [
        (batch(b"a", compression=CompressionType.GZIP), PLAN),  # compressed
        (batch(b"a") + batch(b"b"), PLAN),  # two batches
        (batch(b"a", base_offset=5), PLAN),  # a client batch must start at 0: the general path says so
        (batch(b"a")[:-1], PLAN),  # truncated
        (b"\x00" * 10, PLAN),
        (batch(b"a"), LeaderPlan.of(LogConfig(message_timestamp_type=TimestampType.LOG_APPEND_TIME))),
        (batch(b"a"), LeaderPlan.of(LogConfig(records_validation=RecordsValidation.FULL))),
    ],
)
def test_the_fast_path_declines_the_unusual(data: bytes, plan: LeaderPlan) -> None:
    assert single_batch_in_place(data, 0, 0, MAX, plan) is None


def test_a_corrupt_batch_is_left_to_the_general_path() -> None:
    data = bytearray(batch(b"value"))
    data[-1] ^= 0xFF
    assert single_batch_in_place(bytes(data), 0, 0, MAX, PLAN) is None
    assert single_batch_in_place(batch(b"x" * 100), 0, 0, 50, PLAN) is None  # above max.message.bytes
