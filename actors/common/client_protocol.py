"""Wire messages for clients' administrative requests: Kafka's admin and producer-id APIs.

What ``kafka-topics.sh --bootstrap-server`` and an idempotent producer send to any broker in the
ZooKeeper era, and which that broker serves by writing ZooKeeper itself (the controller then acts
on the znodes): CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
IncrementalAlterConfigs and InitProducerId. Fields follow Kafka's request schemas in snake case;
errors are ``ErrorCode`` values with an optional message, never exceptions.

They are served by the broker node's ``admin`` actor (``actors/server/admin/manager.py``), beside the
``broker`` actor that serves the data path.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from actors.common.errors import ErrorCode
from runtime.codec import wire

__all__ = [
    "AlterConfigOp",
    "AlterableConfig",
    "ConfigResourceType",
    "ConfigSource",
    "CreatableTopic",
    "CreatableTopicResult",
    "CreatePartitionsRequest",
    "CreatePartitionsResponse",
    "CreatePartitionsResult",
    "CreatePartitionsTopic",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DeletableTopicResult",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
    "DescribeConfigsEntry",
    "DescribeConfigsRequest",
    "DescribeConfigsResource",
    "DescribeConfigsResponse",
    "DescribeConfigsResult",
    "IncrementalAlterConfigsRequest",
    "IncrementalAlterConfigsResponse",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "TopicConfigEntry",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicConfigEntry:
    name: str
    value: str | None


# -------------------------------------------------------------------------------- CreateTopics


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopic:
    """``num_partitions``/``replication_factor`` of -1 mean the broker's defaults (KIP-464);
    ``assignments`` (partition → replicas) replaces both when given."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: tuple[tuple[int, tuple[int, ...]], ...] = ()
    configs: tuple[TopicConfigEntry, ...] = ()


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicsRequest:
    topics: tuple[CreatableTopic, ...]
    timeout_ms: int = 30_000
    validate_only: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopicResult:
    name: str
    error_code: ErrorCode
    error_message: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicsResponse:
    topics: tuple[CreatableTopicResult, ...]


# -------------------------------------------------------------------------------- DeleteTopics


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicsRequest:
    topic_names: tuple[str, ...]
    timeout_ms: int = 30_000


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletableTopicResult:
    name: str
    error_code: ErrorCode
    error_message: str | None = None


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicsResponse:
    results: tuple[DeletableTopicResult, ...]


# ---------------------------------------------------------------------------- CreatePartitions


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsTopic:
    """``count`` is the new total number of partitions; ``assignments`` lists the replicas of each
    new partition (or is empty for the broker's assignment)."""

    name: str
    count: int
    assignments: tuple[tuple[int, ...], ...] = ()


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsRequest:
    topics: tuple[CreatePartitionsTopic, ...]
    timeout_ms: int = 30_000
    validate_only: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsResult:
    name: str
    error_code: ErrorCode
    error_message: str | None = None


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsResponse:
    results: tuple[CreatePartitionsResult, ...]


# ---------------------------------------------------------------------------- DescribeConfigs


class ConfigResourceType(enum.IntEnum):
    TOPIC = 2
    BROKER = 4


class ConfigSource(enum.IntEnum):
    """Where a value comes from (DescribeConfigs v1+)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResource:
    resource_type: ConfigResourceType
    resource_name: str
    configuration_keys: tuple[str, ...] | None = None


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsRequest:
    resources: tuple[DescribeConfigsResource, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsEntry:
    name: str
    value: str | None
    read_only: bool
    is_default: bool
    source: ConfigSource
    is_sensitive: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResult:
    resource_type: ConfigResourceType
    resource_name: str
    error_code: ErrorCode
    error_message: str | None = None
    configs: tuple[DescribeConfigsEntry, ...] = ()


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResponse:
    results: tuple[DescribeConfigsResult, ...]


# -------------------------------------------------------------------- IncrementalAlterConfigs


class AlterConfigOp(enum.IntEnum):
    SET = 0
    DELETE = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterableConfig:
    name: str
    op: AlterConfigOp
    value: str | None = None


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class IncrementalAlterConfigsRequest:
    """A topic's overrides, or a broker's dynamic configs (``resource_name`` a broker id, or ""
    for the cluster-wide default); broker resources accept only the dynamic keys."""

    resource_type: ConfigResourceType
    resource_name: str
    configs: tuple[AlterableConfig, ...]
    validate_only: bool = False


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class IncrementalAlterConfigsResponse:
    error_code: ErrorCode
    error_message: str | None = None


# ------------------------------------------------------------------------------ InitProducerId


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class InitProducerIdRequest:
    """Non-transactional: any broker hands out a fresh producer id with epoch 0."""

    transactional_id: str | None = None
    transaction_timeout_ms: int = 60_000


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class InitProducerIdResponse:
    error_code: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1
    error_message: str | None = None
