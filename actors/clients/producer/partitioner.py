"""Kafka's default partitioner: murmur2 on the key, sticky partitioning for records without one.

Rules kept (docs/producer.md §1, Kafka 2.4's ``DefaultPartitioner`` and KIP-480):
* a keyed record goes to ``to_positive(murmur2(key)) % number_of_partitions`` — every partition
  counts, available or not, so a key's partition never moves while the leader is away;
* a record without a key sticks to one partition, chosen at random among the *available*
  partitions (those with a leader) or among all when none is available, and moves only when the
  batch it fed is complete (``on_new_batch``), so unkeyed traffic fills whole batches.

``murmur2`` is byte-for-byte Kafka's ``Utils.murmur2`` (seed 0x9747b28c), so a key lands on the
same partition as with Kafka's Java client.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

__all__ = ["StickyPartitionCache", "keyed_partition", "murmur2", "to_positive"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def _to_int32(value: int) -> int:
    value &= _MASK
    return value - (1 << 32) if value & 0x80000000 else value


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2, as a signed 32-bit integer (as Java computes it)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    quartets = length // 4
    for i in range(quartets):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = length & 3
    base = quartets * 4
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return _to_int32(h)


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``: that fails for MIN_VALUE)."""
    return number & 0x7FFFFFFF


def keyed_partition(key: bytes, number_of_partitions: int) -> int:
    if number_of_partitions <= 0:
        raise ValueError("a topic has at least one partition")
    return to_positive(murmur2(key)) % number_of_partitions


class StickyPartitionCache:
    """The partition each topic's unkeyed records currently stick to (KIP-480)."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._current: dict[str, int] = {}

    def partition(self, topic: str, number_of_partitions: int, available: Sequence[int]) -> int:
        current = self._current.get(topic)
        if current is None or current >= number_of_partitions:
            return self._choose(topic, number_of_partitions, available, previous=None)
        return current

    def on_new_batch(
        self, topic: str, number_of_partitions: int, available: Sequence[int], previous: int
    ) -> int:
        """The batch fed by ``previous`` is complete: move on, unless someone already did."""
        current = self._current.get(topic)
        if current is not None and current != previous:
            return current
        return self._choose(topic, number_of_partitions, available, previous=previous)

    def _choose(
        self, topic: str, number_of_partitions: int, available: Sequence[int], previous: int | None
    ) -> int:
        if len(available) == 1:
            choice = available[0]
        elif available:
            candidates = [p for p in available if p != previous] or list(available)
            choice = candidates[self._rng.randrange(len(candidates))]
        else:
            choices = [p for p in range(number_of_partitions) if p != previous] or [0]
            choice = choices[self._rng.randrange(len(choices))]
        self._current[topic] = choice
        return choice
