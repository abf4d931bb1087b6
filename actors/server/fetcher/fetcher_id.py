"""Which replica fetcher a followed partition belongs to (docs/replication.md §6.1).

``abs(31 * topic.hashCode() + partition) % num.replica.fetchers`` in Java's 32-bit ``int``
arithmetic: ``String.hashCode`` over UTF-16 code units with overflow, the sum wrapping too, and
Kafka's ``Utils.abs``, which maps ``Integer.MIN_VALUE`` to 0 instead of leaving it negative.
"""

from __future__ import annotations

__all__ = ["fetcher_id", "java_string_hash_code", "kafka_abs", "to_int32"]

_INT32_MIN = -(2**31)


def to_int32(value: int) -> int:
    """Wrap to a signed 32-bit integer, as Java's int arithmetic does."""
    value &= 0xFFFFFFFF
    return value - 2**32 if value >= 2**31 else value


def java_string_hash_code(text: str) -> int:
    """Java's ``String.hashCode``: s[0]·31^(n−1) + … + s[n−1] over UTF-16 code units, in int."""
    # surrogatepass: a lone surrogate is one code unit to Java, not an encoding error.
    encoded = text.encode("utf-16-be", "surrogatepass")
    result = 0
    for index in range(0, len(encoded), 2):
        code_unit = (encoded[index] << 8) | encoded[index + 1]
        result = (31 * result + code_unit) & 0xFFFFFFFF
    return to_int32(result)


def kafka_abs(value: int) -> int:
    """Kafka's ``Utils.abs``: the absolute value, except that Integer.MIN_VALUE maps to 0."""
    return 0 if value == _INT32_MIN else abs(value)


def fetcher_id(topic: str, partition: int, num_replica_fetchers: int) -> int:
    if num_replica_fetchers <= 0:
        raise ValueError("num.replica.fetchers must be positive")
    return kafka_abs(to_int32(31 * java_string_hash_code(topic) + partition)) % num_replica_fetchers
