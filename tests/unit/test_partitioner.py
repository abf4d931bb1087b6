"""Kafka's default partitioner: murmur2 byte for byte (vectors from Kafka's UtilsTest) and KIP-480
sticky partitioning for records without a key."""

from __future__ import annotations

import random

import pytest

from actors.clients.producer.partitioner import StickyPartitionCache, keyed_partition, murmur2, to_positive


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_matches_kafkas_utils_test(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_to_positive_clears_the_sign_bit_rather_than_taking_abs() -> None:
    assert to_positive(-(2**31)) == 0
    assert to_positive(-1) == 2**31 - 1
    assert to_positive(-973932308) == -973932308 & 0x7FFFFFFF


def test_keyed_partition_is_murmur2_made_positive_modulo_the_partition_count() -> None:
    assert keyed_partition(b"foobar", 7) == (-790332482 & 0x7FFFFFFF) % 7
    assert keyed_partition(b"21", 10) == (-973932308 & 0x7FFFFFFF) % 10
    with pytest.raises(ValueError, match="at least one partition"):
        keyed_partition(b"k", 0)


def test_sticky_partition_stays_until_a_batch_completes() -> None:
    cache = StickyPartitionCache(random.Random(1))
    first = cache.partition("t", 6, available=range(6))
    assert all(cache.partition("t", 6, available=range(6)) == first for _ in range(50))
    moved = cache.on_new_batch("t", 6, available=range(6), previous=first)
    assert moved != first
    assert cache.partition("t", 6, available=range(6)) == moved


def test_sticky_partition_is_chosen_among_available_partitions() -> None:
    cache = StickyPartitionCache(random.Random(2))
    seen = set()
    previous = cache.partition("t", 10, available=[3, 7])
    seen.add(previous)
    for _ in range(20):
        previous = cache.on_new_batch("t", 10, available=[3, 7], previous=previous)
        seen.add(previous)
    assert seen == {3, 7}


def test_a_single_available_partition_is_used_even_if_it_was_the_previous_one() -> None:
    cache = StickyPartitionCache(random.Random(3))
    assert cache.partition("t", 4, available=[2]) == 2
    assert cache.on_new_batch("t", 4, available=[2], previous=2) == 2


def test_without_available_partitions_any_partition_but_the_previous_is_chosen() -> None:
    cache = StickyPartitionCache(random.Random(4))
    previous = cache.partition("t", 3, available=[])
    assert 0 <= previous < 3
    for _ in range(10):
        current = cache.on_new_batch("t", 3, available=[], previous=previous)
        assert current != previous
        previous = current


def test_on_new_batch_for_an_outdated_previous_keeps_the_current_choice() -> None:
    """Two batches completing for the same sticky choice move the topic once, not twice."""
    cache = StickyPartitionCache(random.Random(5))
    first = cache.partition("t", 5, available=range(5))
    moved = cache.on_new_batch("t", 5, available=range(5), previous=first)
    assert cache.on_new_batch("t", 5, available=range(5), previous=first) == moved


def test_topics_stick_independently() -> None:
    cache = StickyPartitionCache(random.Random(6))
    a = cache.partition("a", 8, available=range(8))
    b = cache.partition("b", 8, available=range(8))
    cache.on_new_batch("a", 8, available=range(8), previous=a)
    assert cache.partition("b", 8, available=range(8)) == b


def test_a_topic_that_shrank_below_the_sticky_partition_chooses_again() -> None:
    cache = StickyPartitionCache(random.Random(7))
    cache._current["t"] = 9
    assert cache.partition("t", 4, available=range(4)) < 4
