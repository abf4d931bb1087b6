"""Zig-zag varints match Kafka's ByteUtils encodings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.storage.errors import CorruptRecordError
from runtime.storage.varint import decode_varint, encode_varint, size_of_varint


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (-65, b"\x81\x01"),
        (2_147_483_647, b"\xfe\xff\xff\xff\x0f"),
        (-2_147_483_648, b"\xff\xff\xff\xff\x0f"),
        (9_223_372_036_854_775_807, b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
    ],
)
def test_encodings_match_kafka_byte_utils(value: int, encoded: bytes) -> None:
    out = bytearray()
    encode_varint(value, out)
    assert bytes(out) == encoded
    assert size_of_varint(value) == len(encoded)
    assert decode_varint(encoded, 0, 10) == (value, len(encoded))


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_round_trip(value: int) -> None:
    out = bytearray(b"\xaa")
    encode_varint(value, out)
    assert decode_varint(bytes(out), 1, 10) == (value, len(out))


def test_a_varint_longer_than_five_bytes_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="longer than 5 bytes"):
        decode_varint(b"\x80\x80\x80\x80\x80\x01", 0)


def test_a_varint_running_past_the_end_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="past the end"):
        decode_varint(b"\x80\x80", 0)
