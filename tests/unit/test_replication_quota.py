"""The replication quota's rate (Kafka's SimpleRate over 11 × 1 s windows), its bound, the
throttled-replica lists (parsing and validation) and the dynamic broker config rules."""

from __future__ import annotations

import pytest

from actors.common.types import TopicPartition
from actors.server import zk_data
from actors.server.dynamic_broker_config import DynamicBrokerConfigs, DynamicConfigError, validate
from actors.server.replication_quota import (
    ALL_PARTITIONS,
    UNBOUNDED_RATE,
    ReplicationQuota,
    ReplicationQuotas,
    SampledRate,
    throttled_partitions,
)
from runtime.coordination.base import Stat
from runtime.storage.config import LogConfig

# ------------------------------------------------------------------------------ sampled rate


def test_a_fresh_rate_is_zero() -> None:
    assert SampledRate().measure(5_000) == 0.0


def test_the_first_second_is_measured_over_one_window() -> None:
    rate = SampledRate()
    rate.record(500, 0)
    # SimpleRate: the elapsed time is at least one window, so 500 bytes in the first 200 ms
    # read as 500 B/s, not 2500.
    assert rate.measure(200) == pytest.approx(500.0)


def test_a_steady_stream_measures_its_rate() -> None:
    rate = SampledRate()
    for second in range(30):
        for tick in range(10):
            rate.record(100, second * 1000 + tick * 100)
    # 1000 B/s for 30 s: the 11 retained windows hold ~11 s of data over ~11 s.
    assert rate.measure(30_000) == pytest.approx(1000.0, rel=0.1)


def test_old_windows_are_forgotten() -> None:
    rate = SampledRate()
    rate.record(10_000, 0)
    assert rate.measure(5_000) == pytest.approx(2000.0)
    # 11 windows × 1 s later the burst no longer counts.
    assert rate.measure(11_000) == 0.0


def test_an_idle_gap_lowers_the_rate() -> None:
    rate = SampledRate()
    rate.record(5_000, 0)
    before = rate.measure(1_000)
    after = rate.measure(5_000)
    assert after < before


def test_windows_rotate_beyond_the_sample_count() -> None:
    rate = SampledRate(samples=3, window_ms=100)
    for t in range(0, 1000, 100):
        rate.record(1, t)
    # Only the last three windows remain: 3 units over 200..300 ms of elapsed time.
    assert rate.measure(950) == pytest.approx(3 / 0.25, rel=0.01)


def test_a_rate_needs_sensible_windows() -> None:
    with pytest.raises(ValueError):
        SampledRate(samples=0)


# ---------------------------------------------------------------------------------- quota


def test_an_unbounded_quota_is_never_exceeded() -> None:
    quota = ReplicationQuota()
    quota.record(10**12, 0)
    assert quota.bound == UNBOUNDED_RATE
    assert not quota.is_exceeded(1)


def test_a_quota_is_exceeded_above_its_bound_and_recovers() -> None:
    quota = ReplicationQuota(bound=1_000)
    quota.record(900, 0)
    assert not quota.is_exceeded(500)
    quota.record(200, 600)
    assert quota.is_exceeded(700)
    # 1100 bytes: below 1000 B/s once more than 1.1 s have passed since the first window began.
    assert quota.is_exceeded(1_050)
    assert not quota.is_exceeded(1_200)
    assert quota.bytes_total == 1_100


def test_throttle_time_adds_up_between_checks_that_found_the_quota_exceeded() -> None:
    quota = ReplicationQuota(bound=100)
    quota.record(1_000, 0)
    assert quota.is_exceeded(100)
    assert quota.is_exceeded(600)
    assert quota.throttle_time_ms_total == 500
    assert not quota.is_exceeded(20_000)
    assert quota.is_exceeded(20_000) is False
    quota.record(10_000, 20_001)
    assert quota.is_exceeded(20_100)
    assert quota.throttle_time_ms_total == 500  # a new episode starts counting from its first check


def test_throttled_partitions_per_topic() -> None:
    quota = ReplicationQuota()
    quota.mark_throttled("a", frozenset({0, 2}))
    quota.mark_throttled("b", ALL_PARTITIONS)
    assert quota.is_throttled(TopicPartition("a", 0))
    assert not quota.is_throttled(TopicPartition("a", 1))
    assert quota.is_throttled(TopicPartition("b", 7))
    assert not quota.is_throttled(TopicPartition("c", 0))
    quota.mark_throttled("a", frozenset())
    assert not quota.is_throttled(TopicPartition("a", 0))


# ------------------------------------------------------------------------------ replica lists


@pytest.mark.parametrize(
    ("value", "broker_id", "expected"),
    [
        ("", 1, frozenset()),
        ("*", 1, ALL_PARTITIONS),
        ("0:1,1:2,2:1", 1, frozenset({0, 2})),
        ("0:1, 1:2 ,2:1", 2, frozenset({1})),
        ("0:3", 1, frozenset()),
    ],
)
def test_throttled_partitions_of_a_broker(
    value: str, broker_id: int, expected: frozenset[int] | None
) -> None:
    assert throttled_partitions(value, broker_id) == expected


def test_the_quotas_follow_a_topics_lists() -> None:
    quotas = ReplicationQuotas(broker_id=2)
    quotas.update_topic("t", "0:1,1:2", "*")
    assert quotas.leader.is_throttled(TopicPartition("t", 1))
    assert not quotas.leader.is_throttled(TopicPartition("t", 0))
    assert quotas.follower.is_throttled(TopicPartition("t", 5))
    quotas.update_topic("t", "", "")
    assert not quotas.follower.is_throttled(TopicPartition("t", 5))


@pytest.mark.parametrize("value", ["*", "", "0:1", "0:1,1:2", " 0:1 , 1:2 "])
def test_valid_replica_lists_are_accepted(value: str) -> None:
    config = LogConfig.from_properties({"leader.replication.throttled.replicas": value})
    assert config.leader_replication_throttled_replicas == ",".join(i.strip() for i in value.split(","))


@pytest.mark.parametrize("value", ["x", "0", "0:", ":1", "0:1,foo", "1:*", "0-1"])
def test_invalid_replica_lists_are_refused_with_kafkas_message(value: str) -> None:
    with pytest.raises(
        ValueError, match=r"must be the literal '\*' or a list of replicas in the following format"
    ):
        LogConfig.from_properties({"follower.replication.throttled.replicas": value})


# ------------------------------------------------------------------------- dynamic configs


def test_only_the_throttle_rates_may_change_dynamically() -> None:
    validate({"leader.replication.throttled.rate": "1000", "follower.replication.throttled.rate": "0"})
    with pytest.raises(
        DynamicConfigError,
        match=r"^Cannot update these configs dynamically: Set\(log.retention.ms, num.partitions\)$",
    ):
        validate({"num.partitions": "3", "log.retention.ms": "1", "leader.replication.throttled.rate": "1"})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-1", "Value must be at least 0"),
        ("fast", "Not a number of type LONG"),
        ("1e3", "Not a number of type LONG"),
    ],
)
def test_a_bad_rate_is_refused(value: str, message: str) -> None:
    with pytest.raises(
        DynamicConfigError,
        match=f"Invalid value {value} for configuration follower.replication.throttled.rate: {message}",
    ):
        validate({"follower.replication.throttled.rate": value})


def _found(config: dict[str, str]) -> tuple[bytes, Stat]:
    return zk_data.encode_broker_config(config), Stat(
        version=0, cversion=0, czxid=1, mzxid=1, ephemeral_owner=0, num_children=0, data_length=0
    )


def test_a_brokers_own_value_wins_over_the_cluster_default() -> None:
    configs = DynamicBrokerConfigs(1)
    own, default = configs.paths()
    assert (own, default) == ("/config/brokers/1", "/config/brokers/<default>")
    configs.load(
        {
            own: _found({"leader.replication.throttled.rate": "100"}),
            default: _found(
                {"leader.replication.throttled.rate": "5", "follower.replication.throttled.rate": "7"}
            ),
        }
    )
    settings = configs.settings()
    assert settings.leader_replication_throttled_rate == 100
    assert settings.follower_replication_throttled_rate == 7
    configs.load({})
    assert configs.settings().leader_replication_throttled_rate == UNBOUNDED_RATE


def test_a_hand_written_bad_value_is_ignored() -> None:
    configs = DynamicBrokerConfigs(1)
    own, default = configs.paths()
    configs.load(
        {
            own: _found({"leader.replication.throttled.rate": "lots"}),
            default: _found({"leader.replication.throttled.rate": "9"}),
        }
    )
    assert configs.settings().leader_replication_throttled_rate == 9


def test_change_notifications_name_broker_entities() -> None:
    data = zk_data.encode_broker_config_change_notification(None)
    assert zk_data.decode_config_change_notification(data, path="/config/changes/x") == (
        "brokers",
        "<default>",
    )
    data = zk_data.encode_broker_config_change_notification(3)
    assert zk_data.decode_config_change_notification(data, path="/config/changes/x") == ("brokers", "3")
    configs = DynamicBrokerConfigs(3)
    assert configs.concerns("3")
    assert configs.concerns("<default>")
    assert not configs.concerns("4")
