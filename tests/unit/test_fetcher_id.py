"""Kafka's fetcher-id formula, with Java's String.hashCode and int overflow."""

from __future__ import annotations

import pytest

from actors.server.fetcher.fetcher_id import fetcher_id, java_string_hash_code, kafka_abs, to_int32


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("topic", 110546223),
        # Famous: this string hashes to Integer.MIN_VALUE.
        ("polygenelubricants", -(2**31)),
        # A character outside the BMP is two UTF-16 code units (0xD83D, 0xDE00).
        ("\U0001f600", 0xD83D * 31 + 0xDE00),
    ],
)
def test_java_string_hash_code(text: str, expected: int) -> None:
    assert java_string_hash_code(text) == expected


def test_kafka_abs_maps_int_min_to_zero() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5


def test_int_arithmetic_wraps() -> None:
    assert to_int32(2**31) == -(2**31)
    assert to_int32(31 * -(2**31)) == -(2**31)


@pytest.mark.parametrize(
    ("topic", "partition", "fetchers", "expected"),
    [
        ("topic", 0, 1, 0),
        # 31 × 110546223 = 3426932913 wraps to −868034383; abs → 868034383; % 4 → 3.
        ("topic", 0, 4, 3),
        ("polygenelubricants", 0, 3, 0),  # abs(Integer.MIN_VALUE) is 0 in Kafka
        ("polygenelubricants", 1, 3, (2**31 - 1) % 3),  # MIN_VALUE + 1 → abs = 2^31 − 1
    ],
)
def test_fetcher_id(topic: str, partition: int, fetchers: int, expected: int) -> None:
    assert fetcher_id(topic, partition, fetchers) == expected


def test_fetcher_ids_spread_partitions_over_fetchers() -> None:
    ids = {fetcher_id("orders", partition, 4) for partition in range(100)}
    assert ids == {0, 1, 2, 3}
