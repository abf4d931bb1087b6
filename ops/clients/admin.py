"""The asyncio ``Admin`` client: topics and cluster, as Kafka's AdminClient offers them.

Every request goes to some live broker: metadata to its ``broker`` actor, administration to its
``admin`` actor (``actors/server/admin/manager.py``), which writes ZooKeeper for the controller to act on.
Results come back as values; refusals as ``KafkaError`` carrying Kafka's error code and the
broker's message (``TopicAlreadyExists``... are told apart by ``error_code``).

Rules kept:
* A broker that cannot be reached is skipped and the next one tried (bootstrap servers first,
  then the brokers the last Metadata response named), until ``default.api.timeout.ms`` runs out;
  a refused credential stops at once with a clear message (retrying cannot fix it).
* Nothing is retried that could apply twice with a different outcome: a create that timed out is
  reported as such, not re-sent.
"""

from __future__ import annotations

import asyncio
import enum
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from actors.common.client_protocol import (
    AlterableConfig,
    AlterConfigOp,
    ConfigResourceType,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsEntry,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    TopicConfigEntry,
)
from actors.common.errors import ErrorCode, KafkaError
from actors.common.names import ADMIN_ACTOR_NAME, BROKER_ACTOR_NAME, broker_node, broker_ref
from actors.common.protocol import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    BrokerEndpoint,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    ReassignablePartition,
)
from actors.common.types import TopicPartition
from ops.clients.connection import (
    ClientCredential,
    ClientNode,
    load_client_properties,
    resolve_credential,
    resolve_ssl_context,
)
from ops.cluster_health import ClusterHealth, gather_cluster_health
from runtime.clock import wait_ms
from runtime.ref import ActorRef

__all__ = [
    "Admin",
    "ClusterDescription",
    "ConfigEntry",
    "ElectionType",
    "NewTopic",
    "PartitionDescription",
    "PartitionReassignment",
    "TopicDescription",
]

_DEFAULT_API_TIMEOUT_MS = 60_000
_REQUEST_TIMEOUT_MS = 30_000
_RETRY_BACKOFF_MS = 100


@dataclass(frozen=True, slots=True, kw_only=True)
class NewTopic:
    """-1 partitions / replication factor = the brokers' ``num.partitions`` /
    ``default.replication.factor``; ``replica_assignment`` replaces both."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignment: Mapping[int, Sequence[int]] | None = None
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionDescription:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicDescription:
    name: str
    partitions: tuple[PartitionDescription, ...]

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerEndpoint, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigEntry:
    name: str
    value: str | None
    source: str
    is_default: bool
    is_sensitive: bool
    read_only: bool


class ElectionType(enum.IntEnum):
    """Kafka's ElectionType: the ``election_type`` of ElectLeaders."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionReassignment:
    """An ongoing reassignment (KIP-455): the replica set during the move (target and current
    replicas together), the replicas being added and those to be removed when it completes."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


class Admin:
    """``async with Admin("localhost:9092") as admin: await admin.create_topic(...)``."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        secret: str | ClientCredential | None = None,
        command_config: str | os.PathLike[str] | None = None,
        default_api_timeout_ms: int = _DEFAULT_API_TIMEOUT_MS,
        request_timeout_ms: int = _REQUEST_TIMEOUT_MS,
    ) -> None:
        properties = load_client_properties(command_config)
        self._node = ClientNode(
            bootstrap_servers,
            secret=secret or resolve_credential(properties),
            client_id=properties.get("client.id", "adminclient"),
            ssl_context=resolve_ssl_context(properties),
        )
        self._api_timeout_ms = default_api_timeout_ms
        self._request_timeout_ms = request_timeout_ms
        self._brokers: tuple[BrokerEndpoint, ...] = ()

    async def __aenter__(self) -> Admin:
        await self._node.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self._node.__aexit__(exc_type, exc, traceback)

    # ------------------------------------------------------------------------------- metadata

    async def metadata(self, topics: Iterable[str] | None = None) -> MetadataResponse:
        wanted = None if topics is None else tuple(topics)
        response = await self._ask_any(
            BROKER_ACTOR_NAME, MetadataRequest(topics=wanted, allow_auto_topic_creation=False)
        )
        assert isinstance(response, MetadataResponse)
        self._brokers = response.brokers
        self._node.learn(response.brokers)
        return response

    async def describe_cluster(self) -> ClusterDescription:
        response = await self.metadata(())
        return ClusterDescription(
            cluster_id=response.cluster_id, controller_id=response.controller_id, brokers=response.brokers
        )

    async def cluster_health(self, *, broker: int | None = None) -> ClusterHealth:
        """The cluster health view, with the restart check for ``broker`` (``ops/cluster_health.py``;
        the same requests the brokers' ``GET /v1/cluster/health`` makes)."""

        async def ask(actor: str, message: object) -> object:
            answer = await self._ask_any(actor, message)
            if isinstance(answer, MetadataResponse):
                self._brokers = answer.brokers
                self._node.learn(answer.brokers)
            return answer

        return await gather_cluster_health(ask, broker=broker)

    async def list_topics(self) -> list[str]:
        response = await self.metadata(None)
        return sorted(t.name for t in response.topics if t.error_code is ErrorCode.NONE)

    async def describe_topics(self, names: Iterable[str] | None = None) -> list[TopicDescription]:
        """Every named topic (all when None); an unknown one raises UNKNOWN_TOPIC_OR_PARTITION."""
        response = await self.metadata(names)
        descriptions = []
        for topic in sorted(response.topics, key=lambda t: t.name):
            if topic.error_code is not ErrorCode.NONE:
                raise KafkaError(topic.error_code, f"topic {topic.name!r}: {_describe(topic.error_code)}")
            descriptions.append(
                TopicDescription(
                    name=topic.name,
                    partitions=tuple(
                        _partition(p) for p in sorted(topic.partitions, key=lambda p: p.partition)
                    ),
                )
            )
        return descriptions

    # --------------------------------------------------------------------------------- topics

    async def create_topics(
        self, topics: Sequence[NewTopic], *, validate_only: bool = False, timeout_ms: int | None = None
    ) -> dict[str, KafkaError | None]:
        """Per topic: None when created (with a leader for every partition), else the error."""
        request = CreateTopicsRequest(
            topics=tuple(_creatable(topic) for topic in topics),
            timeout_ms=self._request_timeout_ms if timeout_ms is None else timeout_ms,
            validate_only=validate_only,
        )
        response = await self._ask_any(ADMIN_ACTOR_NAME, request, extra_ms=request.timeout_ms)
        assert isinstance(response, CreateTopicsResponse)
        return {r.name: _error(r.error_code, r.error_message) for r in response.topics}

    async def create_topic(
        self,
        name: str,
        *,
        num_partitions: int = -1,
        replication_factor: int = -1,
        replica_assignment: Mapping[int, Sequence[int]] | None = None,
        configs: Mapping[str, str] | None = None,
        validate_only: bool = False,
    ) -> None:
        topic = NewTopic(
            name=name,
            num_partitions=num_partitions,
            replication_factor=replication_factor,
            replica_assignment=replica_assignment,
            configs=dict(configs or {}),
        )
        error = (await self.create_topics([topic], validate_only=validate_only))[name]
        if error is not None:
            raise error

    async def delete_topics(
        self, names: Sequence[str], *, timeout_ms: int | None = None
    ) -> dict[str, KafkaError | None]:
        request = DeleteTopicsRequest(
            topic_names=tuple(names),
            timeout_ms=self._request_timeout_ms if timeout_ms is None else timeout_ms,
        )
        response = await self._ask_any(ADMIN_ACTOR_NAME, request, extra_ms=request.timeout_ms)
        assert isinstance(response, DeleteTopicsResponse)
        return {r.name: _error(r.error_code, r.error_message) for r in response.results}

    async def create_partitions(
        self, name: str, total_count: int, *, assignments: Sequence[Sequence[int]] | None = None
    ) -> None:
        request = CreatePartitionsRequest(
            topics=(
                CreatePartitionsTopic(
                    name=name, count=total_count, assignments=tuple(tuple(a) for a in assignments or ())
                ),
            ),
            timeout_ms=self._request_timeout_ms,
        )
        response = await self._ask_any(ADMIN_ACTOR_NAME, request, extra_ms=request.timeout_ms)
        assert isinstance(response, CreatePartitionsResponse)
        result = response.results[0]
        error = _error(result.error_code, result.error_message)
        if error is not None:
            raise error

    # -------------------------------------------------------------------------------- configs

    async def describe_topic_config(self, name: str) -> dict[str, ConfigEntry]:
        request = DescribeConfigsRequest(
            resources=(DescribeConfigsResource(resource_type=ConfigResourceType.TOPIC, resource_name=name),)
        )
        response = await self._ask_any(ADMIN_ACTOR_NAME, request)
        assert isinstance(response, DescribeConfigsResponse)
        result = response.results[0]
        error = _error(result.error_code, result.error_message)
        if error is not None:
            raise error
        return {entry.name: _config_entry(entry) for entry in result.configs}

    async def describe_broker_config(self, broker_id: int | None) -> dict[str, ConfigEntry]:
        """A broker's settings (static, and dynamic with their sources), asked of that broker;
        None: the cluster-wide dynamic defaults (``/config/brokers/<default>``), asked of any."""
        request = DescribeConfigsRequest(
            resources=(
                DescribeConfigsResource(
                    resource_type=ConfigResourceType.BROKER,
                    resource_name="" if broker_id is None else str(broker_id),
                ),
            )
        )
        if broker_id is None:
            response = await self._ask_any(ADMIN_ACTOR_NAME, request)
        else:
            response = await self._ask_broker(broker_id, request)
        assert isinstance(response, DescribeConfigsResponse)
        result = response.results[0]
        error = _error(result.error_code, result.error_message)
        if error is not None:
            raise error
        return {entry.name: _config_entry(entry) for entry in result.configs}

    async def alter_broker_config(self, broker_id: int | None, changes: Mapping[str, str | None]) -> None:
        """Set (a value) or delete (None) dynamic broker configs — ``leader.replication.throttled.rate``
        and ``follower.replication.throttled.rate`` — of one broker (asked of that broker, as Kafka's
        AdminClient does), or with ``broker_id`` None of the cluster default (asked of any broker).
        Refusals raise ``KafkaError`` (INVALID_REQUEST for a key that cannot change dynamically)."""
        request = IncrementalAlterConfigsRequest(
            resource_type=ConfigResourceType.BROKER,
            resource_name="" if broker_id is None else str(broker_id),
            configs=tuple(
                AlterableConfig(name=k, op=AlterConfigOp.SET, value=v)
                if v is not None
                else AlterableConfig(name=k, op=AlterConfigOp.DELETE)
                for k, v in changes.items()
            ),
        )
        if broker_id is None:
            response = await self._ask_any(ADMIN_ACTOR_NAME, request)
        else:
            response = await self._ask_broker(broker_id, request)
        assert isinstance(response, IncrementalAlterConfigsResponse)
        error = _error(response.error_code, response.error_message)
        if error is not None:
            raise error

    async def _ask_broker(self, broker_id: int, request: object) -> Any:
        """Ask one broker's admin actor (broker resources are answered by their own broker)."""
        if not self._brokers:
            await self.metadata(())
        if broker_id not in {b.broker_id for b in self._brokers}:
            await self.metadata(())
            if broker_id not in {b.broker_id for b in self._brokers}:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"broker {broker_id} is not in the cluster")
        target = ActorRef(node_id=broker_node(broker_id), name=ADMIN_ACTOR_NAME)
        return await self._ask(target, request, self._request_timeout_ms)

    async def alter_topic_config(
        self, name: str, *, set_configs: Mapping[str, str] | None = None, delete_configs: Iterable[str] = ()
    ) -> None:
        changes = [
            AlterableConfig(name=k, op=AlterConfigOp.SET, value=v) for k, v in (set_configs or {}).items()
        ]
        changes += [AlterableConfig(name=k, op=AlterConfigOp.DELETE) for k in delete_configs]
        request = IncrementalAlterConfigsRequest(
            resource_type=ConfigResourceType.TOPIC, resource_name=name, configs=tuple(changes)
        )
        response = await self._ask_any(ADMIN_ACTOR_NAME, request)
        assert isinstance(response, IncrementalAlterConfigsResponse)
        error = _error(response.error_code, response.error_message)
        if error is not None:
            raise error

    # ------------------------------------------------------------ reassignments and elections

    async def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, KafkaError | None]:
        """Start (a replica list) or cancel (None) the reassignment of each partition; per
        partition None when the controller accepted it, else the error. The move itself goes on
        after this returns: ``list_partition_reassignments`` shows it until it completes."""
        request = AlterPartitionReassignmentsRequest(
            partitions=tuple(
                ReassignablePartition(
                    topic=tp.topic,
                    partition=tp.partition,
                    replicas=None if replicas is None else tuple(replicas),
                )
                for tp, replicas in reassignments.items()
            )
        )
        response = await self._ask_controller(request)
        assert isinstance(response, AlterPartitionReassignmentsResponse)
        return {
            TopicPartition(r.topic, r.partition): _error(r.error_code, r.error_message)
            for r in response.results
        }

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The ongoing reassignments (of ``partitions`` only, when given)."""
        request = ListPartitionReassignmentsRequest(
            partitions=None if partitions is None else tuple(partitions)
        )
        response = await self._ask_controller(request)
        assert isinstance(response, ListPartitionReassignmentsResponse)
        return {
            TopicPartition(r.topic, r.partition): PartitionReassignment(
                replicas=r.replicas, adding_replicas=r.adding_replicas, removing_replicas=r.removing_replicas
            )
            for r in response.reassignments
        }

    async def elect_leaders(
        self, election_type: ElectionType, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, KafkaError | None]:
        """Elect leaders (KIP-460); per partition None when elected, else the error
        (ELECTION_NOT_NEEDED: it already had the leader the election would give). None asks for
        every partition, and then those that needed no election are left out."""
        request = ElectLeadersRequest(
            election_type=int(election_type), partitions=None if partitions is None else tuple(partitions)
        )
        response = await self._ask_controller(request)
        assert isinstance(response, ElectLeadersResponse)
        return {
            TopicPartition(r.topic, r.partition): _error(r.error_code, r.error_message)
            for r in response.results
        }

    async def _ask_controller(
        self,
        request: AlterPartitionReassignmentsRequest | ListPartitionReassignmentsRequest | ElectLeadersRequest,
    ) -> AlterPartitionReassignmentsResponse | ListPartitionReassignmentsResponse | ElectLeadersResponse:
        """Any broker's admin actor relays these to the active controller. NOT_CONTROLLER (none
        known, or it just moved) is retried after ``retry.backoff.ms`` until the API timeout, as
        Kafka's AdminClient does; any other request-level error is raised."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._api_timeout_ms / 1000
        while True:
            response = await self._ask_any(ADMIN_ACTOR_NAME, request)
            assert isinstance(
                response,
                AlterPartitionReassignmentsResponse
                | ListPartitionReassignmentsResponse
                | ElectLeadersResponse,
            )
            if response.error_code is not ErrorCode.NOT_CONTROLLER or loop.time() >= deadline:
                break
            await wait_ms(self._node.system.clock, _RETRY_BACKOFF_MS)
        error = _error(response.error_code, response.error_message)
        if error is not None:
            raise error
        return response

    # ------------------------------------------------------------------------------ transport

    def _candidates(self) -> list[ActorRef]:
        known = [broker_ref(b.broker_id) for b in self._brokers]
        return known + list(self._node.bootstrap_refs)

    async def _ask_any(self, actor: str, message: object, *, extra_ms: int = 0) -> Any:
        """Ask ``actor`` on the first broker that answers; after a round in which none did, back off
        ``retry.backoff.ms`` and go round again (a restarting broker comes back), until the API
        timeout runs out."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self._api_timeout_ms + extra_ms) / 1000
        while True:
            remaining_ms = int((deadline - loop.time()) * 1000)
            targets = [ActorRef(node_id=c.node_id, name=actor) for c in self._candidates()]
            try:
                return await self._node.ask_first(
                    targets,
                    message,
                    timeout_ms=max(1, min(remaining_ms, self._request_timeout_ms + extra_ms)),
                )
            except KafkaError as error:
                if error.error_code is not ErrorCode.NETWORK_EXCEPTION or loop.time() >= deadline:
                    raise
            await wait_ms(self._node.system.clock, _RETRY_BACKOFF_MS)

    async def _ask(self, target: ActorRef, message: object, timeout_ms: int) -> Any:
        return await self._node.system.ask(target, message, timeout_ms=timeout_ms)


def _creatable(topic: NewTopic) -> CreatableTopic:
    return CreatableTopic(
        name=topic.name,
        num_partitions=topic.num_partitions,
        replication_factor=topic.replication_factor,
        assignments=tuple(
            (partition, tuple(replicas))
            for partition, replicas in sorted((topic.replica_assignment or {}).items())
        ),
        configs=tuple(TopicConfigEntry(name=k, value=v) for k, v in sorted(topic.configs.items())),
    )


def _partition(p: PartitionMetadata) -> PartitionDescription:
    return PartitionDescription(
        partition=p.partition,
        leader=p.leader,
        leader_epoch=p.leader_epoch,
        replicas=p.replicas,
        isr=p.isr,
        offline_replicas=p.offline_replicas,
    )


def _config_entry(entry: DescribeConfigsEntry) -> ConfigEntry:
    return ConfigEntry(
        name=entry.name,
        value=entry.value,
        source=entry.source.name,
        is_default=entry.is_default,
        is_sensitive=entry.is_sensitive,
        read_only=entry.read_only,
    )


def _error(code: ErrorCode, message: str | None) -> KafkaError | None:
    return None if code is ErrorCode.NONE else KafkaError(code, message or _describe(code))


def _describe(code: ErrorCode) -> str:
    return {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
        ErrorCode.LEADER_NOT_AVAILABLE: "There is no leader for this topic-partition.",
        ErrorCode.INVALID_TOPIC_EXCEPTION: "The request attempted an operation on an invalid topic.",
    }.get(code, code.name)
