"""Every numeric configuration key is range-checked as Kafka 2.4's ConfigDef checks it (issue 23,
item 6): broker keys at start-up (a one-line ConfigError naming the key, exit code 2), topic keys
wherever a topic's configuration is given (LogConfig.from_properties: what CreateTopics and
IncrementalAlterConfigs validate with, answering INVALID_CONFIG)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from actors.common.client_protocol import (
    AlterableConfig,
    AlterConfigOp,
    ConfigResourceType,
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    TopicConfigEntry,
)
from actors.common.errors import ErrorCode
from actors.common.names import admin_ref
from actors.server.config import BrokerConfig
from ops.broker_main import main as broker_main
from ops.config import BROKER_KEY_RANGES, KNOWN_KEYS, settings_from_properties
from ops.properties import ConfigError
from runtime.storage.config import LogConfig
from tests.support.cluster import InProcessCluster

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1

BASE = {
    "broker.id": "1",
    "listeners": "HTTP://127.0.0.1:19092",
    "log.dirs": "/var/lib/actorlog",
    "zookeeper.connect": "zk-0:2181",
    "internal.auth.secret": "s3cret-s3cret-s3cret",
}

# (key, value, what the message must say); each is a value Kafka's broker refuses at start.
BAD_BROKER_VALUES: list[tuple[str, str, str]] = [
    ("num.partitions", "-3", "at least 1"),
    ("num.partitions", "0", "at least 1"),
    ("num.partitions", str(INT_MAX + 1), f"at most {INT_MAX}"),
    ("default.replication.factor", "0", "at least 1"),
    ("min.insync.replicas", "0", "at least 1"),
    ("replica.lag.time.max.ms", "0", "at least 1"),
    ("replica.fetch.backoff.ms", "-1", "at least 0"),
    ("replica.fetch.response.max.bytes", "-1", "at least 0"),
    ("zookeeper.session.timeout.ms", "-6000", "at least 1"),
    ("zookeeper.connection.timeout.ms", "0", "at least 1"),
    ("request.timeout.ms", str(INT_MAX + 1), f"at most {INT_MAX}"),
    ("controlled.shutdown.max.retries", "-1", "at least 0"),
    ("leader.imbalance.per.broker.percentage", "101", "at most 100"),
    ("leader.imbalance.check.interval.seconds", "0", "at least 1"),
    ("log.retention.check.interval.ms", "0", "at least 1"),
    ("log.flush.offset.checkpoint.interval.ms", "0", "at least 1"),
    ("log.flush.scheduler.interval.ms", str(LONG_MAX + 1), "at most"),
    ("broker.id", "-1", "at least 0"),
    ("socket.request.max.bytes", str(INT_MAX + 1), f"at most {INT_MAX}"),
    ("request.body.timeout.ms", "0", "at least 1"),
    ("metrics.snapshot.interval.ms", str(INT_MAX + 1), f"at most {INT_MAX}"),
    # The log defaults (LogConfig.from_broker_properties).
    ("log.segment.bytes", "13", ">= 14"),
    ("log.roll.hours", "0", ">= 1"),
    ("log.retention.hours", str(INT_MAX + 1), "an int"),
    ("log.retention.minutes", str(INT_MAX + 1), "an int"),
    ("log.roll.jitter.hours", str(INT_MAX + 1), "an int"),
    ("log.index.size.max.bytes", "3", ">= 12"),
    ("message.max.bytes", "-1", "at least 0"),
]


@pytest.mark.parametrize(("key", "value", "rule"), BAD_BROKER_VALUES)
def test_an_out_of_range_broker_value_is_a_config_error_naming_the_key(
    key: str, value: str, rule: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        settings_from_properties({**BASE, key: value})
    message = str(raised.value)
    assert message.startswith(f"{key}: "), message
    assert rule in message, message
    assert value in message, message


def test_the_edges_of_each_range_are_accepted() -> None:
    edges = {
        "num.partitions": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "controlled.shutdown.max.retries": "0",
        "leader.imbalance.per.broker.percentage": "100",
        "replica.fetch.backoff.ms": "0",
        "log.retention.hours": str(INT_MAX),
        "log.flush.scheduler.interval.ms": str(LONG_MAX),
        "request.timeout.ms": str(INT_MAX),
    }
    loaded = settings_from_properties({**BASE, **edges})
    assert loaded.broker.num_partitions == 1
    assert loaded.broker.leader_imbalance_per_broker_percentage == 100
    assert loaded.log_config.retention_ms == INT_MAX * 3_600_000


def test_every_numeric_broker_key_has_a_range() -> None:
    numeric = {
        field.name.replace("_", ".")
        for field in dataclasses.fields(BrokerConfig)
        if field.type in ("int", int)
    }
    assert numeric - set(BROKER_KEY_RANGES) == set()
    assert set(BROKER_KEY_RANGES) <= KNOWN_KEYS


@pytest.mark.parametrize(
    ("key", "value"),
    [("num.partitions", "-3"), ("log.retention.hours", "99999999999"), ("min.insync.replicas", "0")],
)
def test_a_broker_start_with_an_out_of_range_value_prints_one_line_naming_the_key_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, value: str
) -> None:
    path = tmp_path / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in BASE.items()))
    assert broker_main(["start", "--config", str(path), "--override", f"{key}={value}"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0, error
    assert error.startswith(f"actorlog broker: {key}: "), error


# Topic keys Kafka validates that this engine accepts and ignores (no compaction here): still
# refused out of range, as a Kafka broker refuses them.
BAD_TOPIC_VALUES: list[tuple[str, str]] = [
    ("delete.retention.ms", "-1"),
    ("min.compaction.lag.ms", "-1"),
    ("max.compaction.lag.ms", "0"),
    ("min.cleanable.dirty.ratio", "1.5"),
    ("min.cleanable.dirty.ratio", "-0.1"),
    ("min.cleanable.dirty.ratio", "nan"),
    # And the ones it uses (checked before this change too).
    ("segment.bytes", "13"),
    ("min.insync.replicas", "0"),
    ("retention.ms", "-2"),
    ("max.message.bytes", str(INT_MAX + 1)),
]


@pytest.mark.parametrize(("key", "value"), BAD_TOPIC_VALUES)
def test_an_out_of_range_topic_value_is_refused_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(ValueError, match=rf"^{key}: "):
        LogConfig.from_properties({key: value})


def test_in_range_ignored_topic_keys_are_accepted() -> None:
    LogConfig.from_properties(
        {
            "delete.retention.ms": "0",
            "min.compaction.lag.ms": "0",
            "max.compaction.lag.ms": "1",
            "min.cleanable.dirty.ratio": "0.5",
        }
    )


@pytest.mark.asyncio
async def test_the_admin_api_refuses_out_of_range_topic_configs_with_invalid_config() -> None:
    async with InProcessCluster(broker_ids=(1,)) as cluster:
        await cluster.start_brokers(1)
        await cluster.create_topic("t", {0: (1,)})

        async def ask(request: object) -> object:
            return await cluster.complete(
                cluster.client_node.ask(admin_ref(1), request, timeout_ms=10_000), step_ms=10
            )

        created = await ask(
            CreateTopicsRequest(
                topics=(
                    CreatableTopic(
                        name="u",
                        assignments=((0, (1,)),),
                        configs=(TopicConfigEntry(name="delete.retention.ms", value="-1"),),
                    ),
                )
            )
        )
        assert isinstance(created, CreateTopicsResponse)
        (result,) = created.topics
        assert result.error_code is ErrorCode.INVALID_CONFIG
        assert "delete.retention.ms" in (result.error_message or "")
        altered = await ask(
            IncrementalAlterConfigsRequest(
                resource_type=ConfigResourceType.TOPIC,
                resource_name="t",
                configs=(AlterableConfig(name="min.cleanable.dirty.ratio", op=AlterConfigOp.SET, value="2"),),
            )
        )
        assert isinstance(altered, IncrementalAlterConfigsResponse)
        assert altered.error_code is ErrorCode.INVALID_CONFIG
        assert "min.cleanable.dirty.ratio" in (altered.error_message or "")
