"""Consumer configuration: Kafka's keys and defaults, clear errors for typos and missing features."""

from __future__ import annotations

import re

import pytest

from actors.clients.consumer.config import ConsumerConfig, OffsetResetStrategy


def test_configuration_is_checked_and_explained() -> None:
    with pytest.raises(ValueError, match="consumer groups are not supported"):
        ConsumerConfig.from_properties({"group.id": "g"})
    with pytest.raises(ValueError, match=re.escape("did you mean 'fetch.max.wait.ms'")):
        ConsumerConfig.from_properties({"fetch.max.wait": "1"})
    with pytest.raises(ValueError, match="earliest, latest or none"):
        ConsumerConfig.from_properties({"auto.offset.reset": "smallest"})
    config = ConsumerConfig.from_properties({"auto.offset.reset": "earliest", "max.poll.records": "7"})
    assert (config.auto_offset_reset, config.max_poll_records) == (OffsetResetStrategy.EARLIEST, 7)


def test_defaults_are_kafkas() -> None:
    config = ConsumerConfig.from_properties({})
    assert (config.fetch_min_bytes, config.fetch_max_wait_ms) == (1, 500)
    assert (config.fetch_max_bytes, config.max_partition_fetch_bytes) == (52_428_800, 1_048_576)
    assert (config.max_poll_records, config.auto_offset_reset) == (500, OffsetResetStrategy.LATEST)
    with pytest.raises(ValueError, match=re.escape("must be larger than fetch.max.wait.ms")):
        ConsumerConfig.from_properties({"fetch.max.wait.ms": "40000"})
    with pytest.raises(ValueError, match="only read_uncommitted"):
        ConsumerConfig.from_properties({"isolation.level": "read_committed"})
