"""The ``admin`` actor on every broker node: topic administration and producer ids, via ZooKeeper.

In the ZooKeeper era any broker serves the admin APIs by writing znodes that the controller then
acts on (Kafka's ``AdminManager`` + ``AdminZkClient``, and ``ProducerIdManager``). This actor does
the same, one script per request (``actors/common/scripts.py``), so requests proceed concurrently:

* CreateTopics — validate the name (Kafka's ``Topic.validate``, incl. '.'/'_' collisions), the
  partition count and replication factor (-1 = the broker defaults ``num.partitions`` and
  ``default.replication.factor``) or the explicit assignment, and the configs (as ``LogConfig``
  parses them); assign replicas over the registered brokers, rack-aware when they have
  ``broker.rack`` (``assignment.py``; some with a rack and some without is refused); write
  ``/config/topics/<t>`` then ``/brokers/topics/<t>`` (its creation is the commit point:
  ``TOPIC_ALREADY_EXISTS`` if someone else won); then wait, up to the request's timeout, until
  this broker's metadata shows a leader for every partition (``REQUEST_TIMED_OUT`` otherwise — the
  topic still exists, as in Kafka).
* DeleteTopics — ``/admin/delete_topics/<t>``; waits until the controller removed the topic.
* CreatePartitions — rewrites the assignment with a conditional write on its zkVersion; the
  controller's partition-modification watch starts the new partitions.
* DescribeConfigs / IncrementalAlterConfigs — topic overrides in ``/config/topics/<t>``, and
  dynamic broker configs in ``/config/brokers/<id>`` (this broker's id) or
  ``/config/brokers/<default>`` (resource name ""; only ``dynamic_broker_config.py``'s keys), with a
  ``/config/changes/config_change_<seq>`` notification after each change.
* AlterPartitionReassignments, ListPartitionReassignments, ElectLeaders — relayed to the active
  controller's actor (the controller id of this broker's metadata, as Kafka 2.4 brokers hand these
  to their controller), its answer relayed back: NOT_CONTROLLER when no controller is known or the
  one asked is not active (the client looks again and retries), REQUEST_TIMED_OUT when it does not
  answer in ``CONTROLLER_ASK_MS``. An elected partition is reported once this broker's metadata
  shows its new leader epoch (Kafka's DelayedElectLeader), REQUEST_TIMED_OUT if that takes the rest
  of ``CONTROLLER_ASK_MS``.
* InitProducerId — ids from blocks of 1000 claimed in ``/latest_producer_id_block`` with a
  conditional write (Kafka's ``ProducerIdManager``); requests wait while a block is fetched.

Waiting for the cluster to catch up polls this broker's own metadata every
``METADATA_POLL_MS`` (Kafka parks the request in a purgatory completed by UpdateMetadata; a local
ask every 50 ms costs nothing and keeps the broker actor unaware of admin requests).
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import typing
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeAlias, assert_never

from actors.common.client_protocol import (
    AlterConfigOp,
    ConfigResourceType,
    ConfigSource,
    CreatableTopic,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsEntry,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from actors.common.errors import ErrorCode
from actors.common.names import controller_ref
from actors.common.protocol import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    MetadataRequest,
    MetadataResponse,
)
from actors.common.scripts import Ask, AskFailed, Pause, Resume, Script, ScriptRunner, ScriptStep
from actors.common.topic_names import validate_topic_name
from actors.common.types import TopicPartition
from actors.server import zk_data
from actors.server.admin.assignment import (
    MIXED_RACKS_ERROR,
    MIXED_RACKS_TOOL_MESSAGE,
    AssignmentError,
    assign_replicas_to_brokers,
)
from actors.server.config import BrokerConfig
from actors.server.dynamic_broker_config import DynamicConfigError
from actors.server.dynamic_broker_config import validate as validate_dynamic_broker_config
from runtime.actor import Actor
from runtime.context import Context
from runtime.coordination.base import Coordinator, Stat
from runtime.coordination.errors import BadVersionError, NodeExistsError, NoNodeError
from runtime.coordination.requests import ZkCreate, ZkExists, ZkGet, ZkGetChildren, ZkSet
from runtime.messages import AskTimedOut, Requester
from runtime.ref import ActorRef
from runtime.storage.config import (
    BROKER_KEYS_FOR_TOPIC_KEY,
    TOPIC_CONFIG_KEYS,
    LogConfig,
    topic_config_values,
)

__all__ = ["CONTROLLER_ASK_MS", "METADATA_POLL_MS", "AdminError", "AdminManagerActor", "AdminStatistics"]

METADATA_POLL_MS = 50
_LOCAL_ASK_MS = 5_000
# How long a relayed request may wait for the controller: shorter than a client's request timeout
# (30 s by default), so the client hears REQUEST_TIMED_OUT rather than nothing.
CONTROLLER_ASK_MS = 25_000

AdminRequest: TypeAlias = (
    CreateTopicsRequest
    | DeleteTopicsRequest
    | CreatePartitionsRequest
    | DescribeConfigsRequest
    | IncrementalAlterConfigsRequest
    | InitProducerIdRequest
    | AlterPartitionReassignmentsRequest
    | ListPartitionReassignmentsRequest
    | ElectLeadersRequest
)
ControllerRequest: TypeAlias = (
    AlterPartitionReassignmentsRequest | ListPartitionReassignmentsRequest | ElectLeadersRequest
)
AdminMessage: TypeAlias = AdminRequest | ScriptStep | Resume


class AdminError(Exception):
    """A request-level refusal: the Kafka error code and the message the client sees."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class AdminStatistics:
    requests_total: int
    requests_in_progress: int
    producer_id_blocks_claimed: int
    producer_ids_handed_out: int


class AdminManagerActor(Actor[AdminMessage]):
    # Every admin request comes from a client (or another broker's forwarding) and wants an answer.
    remote_asks = frozenset(typing.get_args(AdminRequest))

    def __init__(
        self,
        *,
        config: BrokerConfig,
        coordinator: Coordinator,
        broker: ActorRef,
        default_log_config: LogConfig,
        static_broker_properties: Mapping[str, str] | None = None,
        broker_config_entries: tuple[DescribeConfigsEntry, ...] = (),
    ) -> None:
        self.config = config
        self.broker = broker
        # The replication keys' broker defaults live in BrokerConfig (min.insync.replicas is 2 here).
        self.default_log_config = dataclasses.replace(
            default_log_config,
            min_insync_replicas=config.min_insync_replicas,
            unclean_leader_election_enable=config.unclean_leader_election_enable,
        )
        self.static_broker_properties = dict(static_broker_properties or {})
        self.broker_config_entries = broker_config_entries
        self.scripts = ScriptRunner(coordinator)
        self.requests_total = 0
        # Producer ids: the current block, and who waits for the next one.
        self._next_producer_id = 0
        self._block_end = -1
        self._fetching_block = False
        self._waiting_for_ids: deque[Requester] = deque()
        self.producer_id_blocks_claimed = 0
        self.producer_ids_handed_out = 0

    def statistics(self) -> AdminStatistics:
        return AdminStatistics(
            requests_total=self.requests_total,
            requests_in_progress=len(self.scripts),
            producer_id_blocks_claimed=self.producer_id_blocks_claimed,
            producer_ids_handed_out=self.producer_ids_handed_out,
        )

    def receive(self, ctx: Context[AdminMessage], message: AdminMessage) -> None:
        match message:
            case ScriptStep():
                self.scripts.on_step(ctx, message)
            case Resume():
                self.scripts.on_resume(ctx, message)
            case InitProducerIdRequest():
                self._on_init_producer_id(ctx, message)
            case CreateTopicsRequest():
                self._run(ctx, self._create_topics(message, ctx.now_ms, ctx.rng))
            case DeleteTopicsRequest():
                self._run(ctx, self._delete_topics(message, ctx.now_ms))
            case CreatePartitionsRequest():
                self._run(ctx, self._create_partitions(message, ctx.now_ms, ctx.rng))
            case DescribeConfigsRequest():
                self._run(ctx, self._describe_configs(message))
            case IncrementalAlterConfigsRequest():
                self._run(ctx, self._alter_configs(message))
            case (
                AlterPartitionReassignmentsRequest()
                | ListPartitionReassignmentsRequest()
                | ElectLeadersRequest()
            ):
                self._run(ctx, self._relay_to_controller(message, ctx.now_ms))
            case _:
                assert_never(message)

    def _run(self, ctx: Context[AdminMessage], script: Script) -> None:
        self.requests_total += 1
        requester = ctx.requester

        def finish(result: object, error: Exception | None) -> None:
            if error is not None:
                ctx.log.exception("admin request failed", exc_info=error)
                return  # the client's ask times out; nothing half-answered
            if requester is not None:
                ctx.reply_to(requester, result)

        self.scripts.start(ctx, script, finish)

    # ---------------------------------------------------------------------------- CreateTopics

    def _create_topics(self, request: CreateTopicsRequest, now_ms: int, rng: random.Random) -> Script:
        existing: list[str] = yield ZkGetChildren(zk_data.TOPICS_PATH)
        being_deleted: list[str] = yield ZkGetChildren(zk_data.DELETE_TOPICS_PATH)
        racks = yield from _registered_brokers()
        known = set(existing)
        results: dict[str, CreatableTopicResult] = {}
        created: list[str] = []
        names = [topic.name for topic in request.topics]
        for topic in request.topics:
            if names.count(topic.name) > 1:
                results[topic.name] = CreatableTopicResult(
                    name=topic.name, error_code=ErrorCode.INVALID_REQUEST,
                    error_message=f"Create topics request contains duplicate topic {topic.name!r}",
                )  # fmt: skip
                continue
            try:
                assignment, configs = self._plan_topic(topic, known, set(being_deleted), racks, rng)
            except AdminError as refused:
                results[topic.name] = CreatableTopicResult(
                    name=topic.name, error_code=refused.error_code, error_message=str(refused)
                )
                continue
            result = CreatableTopicResult(
                name=topic.name, error_code=ErrorCode.NONE,
                num_partitions=len(assignment), replication_factor=len(assignment[0]),
            )  # fmt: skip
            if not request.validate_only:
                try:
                    yield from _write_topic_config(topic.name, configs)
                    yield ZkCreate(
                        zk_data.topic_path(topic.name),
                        zk_data.encode_topic_assignment(zk_data.TopicAssignment(partitions=assignment)),
                    )
                except NodeExistsError:
                    result = CreatableTopicResult(
                        name=topic.name, error_code=ErrorCode.TOPIC_ALREADY_EXISTS,
                        error_message=f"Topic '{topic.name}' already exists.",
                    )  # fmt: skip
                else:
                    known.add(topic.name)
                    created.append(topic.name)
            results[topic.name] = result
        if created:
            missing = yield from self._await_metadata(created, now_ms + request.timeout_ms)
            for name in missing:
                results[name] = CreatableTopicResult(
                    name=name, error_code=ErrorCode.REQUEST_TIMED_OUT,
                    error_message=f"Topic {name!r} was created but its partitions had no leader "
                    f"within {request.timeout_ms} ms",
                )  # fmt: skip
        return CreateTopicsResponse(topics=tuple(results[topic.name] for topic in request.topics))

    def _plan_topic(
        self,
        topic: CreatableTopic,
        existing: set[str],
        being_deleted: set[str],
        racks: Mapping[int, str | None],
        rng: random.Random,
    ) -> tuple[dict[int, tuple[int, ...]], dict[str, str]]:
        """``racks``: the registered brokers, by id, with their racks."""
        brokers = list(racks)
        message = validate_topic_name(topic.name)
        if message is not None:
            raise AdminError(ErrorCode.INVALID_TOPIC_EXCEPTION, message)
        if topic.name in being_deleted:
            raise AdminError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' is marked for deletion.")
        if topic.name in existing:
            raise AdminError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists.")
        collision = _collision(topic.name, existing)
        if collision is not None:
            raise AdminError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic '{topic.name}' collides with existing topic: {collision}",
            )
        configs = {entry.name: entry.value for entry in topic.configs if entry.value is not None}
        self._validate_configs(configs)
        if topic.assignments:
            if topic.num_partitions != -1 or topic.replication_factor != -1:
                raise AdminError(
                    ErrorCode.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                )
            return _checked_assignment(dict(topic.assignments), brokers), configs
        partitions = self.config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
        replication = (
            self.config.default_replication_factor
            if topic.replication_factor == -1
            else topic.replication_factor
        )
        if not brokers:
            raise AdminError(ErrorCode.INVALID_REPLICATION_FACTOR, "No brokers are registered")
        try:
            return assign_replicas_to_brokers(brokers, partitions, replication, rng=rng, racks=racks), configs
        except AssignmentError as error:
            raise AdminError(ErrorCode[error.error_name], str(error)) from None

    def _validate_configs(self, configs: Mapping[str, str]) -> None:
        unknown = sorted(set(configs) - TOPIC_CONFIG_KEYS)
        if unknown:
            raise AdminError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {', '.join(unknown)}")
        try:
            LogConfig.from_properties(configs, base=self.default_log_config)
        except ValueError as error:
            raise AdminError(ErrorCode.INVALID_CONFIG, f"Invalid config value: {error}") from None

    def _await_metadata(
        self, topics: list[str], deadline_ms: int, *, partitions: Mapping[str, int] | None = None
    ) -> Script:
        """Wait until this broker's metadata shows a leader on every partition of each topic (at
        least ``partitions[topic]`` of them, when given: a grown topic). Returns the topics still
        not there at the deadline."""
        wanted = partitions or {}
        while True:
            response = yield Ask(
                self.broker,
                MetadataRequest(topics=tuple(topics), allow_auto_topic_creation=False),
                _LOCAL_ASK_MS,
            )
            assert isinstance(response, MetadataResponse)
            ready = set()
            for t in response.topics:
                led = sum(1 for p in t.partitions if p.leader >= 0)
                if (
                    t.error_code is ErrorCode.NONE
                    and led > 0
                    and led >= wanted.get(t.name, len(t.partitions))
                ):
                    ready.add(t.name)
            pending = [t for t in topics if t not in ready]
            if not pending:
                return []
            now_ms = yield Pause(METADATA_POLL_MS)
            if now_ms >= deadline_ms:
                return pending

    # ---------------------------------------------------------------------------- DeleteTopics

    def _delete_topics(self, request: DeleteTopicsRequest, now_ms: int) -> Script:
        existing = set((yield ZkGetChildren(zk_data.TOPICS_PATH)))
        results: dict[str, DeletableTopicResult] = {}
        marked: list[str] = []
        for name in request.topic_names:
            if name not in existing:
                results[name] = DeletableTopicResult(
                    name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message="This server does not host this topic-partition.",
                )  # fmt: skip
                continue
            if not self.config.delete_topic_enable:
                results[name] = DeletableTopicResult(
                    name=name, error_code=ErrorCode.TOPIC_DELETION_DISABLED,
                    error_message="Topic deletion is disabled (delete.topic.enable=false).",
                )  # fmt: skip
                continue
            with contextlib.suppress(NodeExistsError):  # already marked: that is one deletion
                yield ZkCreate(zk_data.delete_topic_path(name))
            marked.append(name)
            results[name] = DeletableTopicResult(name=name, error_code=ErrorCode.NONE)
        deadline_ms = now_ms + request.timeout_ms
        while marked:
            still = []
            for name in marked:
                if (yield ZkExists(zk_data.topic_path(name))) is not None:
                    still.append(name)  # noqa: PERF401 - a yield cannot sit in a comprehension
            if not still:
                break
            if (yield Pause(METADATA_POLL_MS)) >= deadline_ms:
                for name in still:
                    results[name] = DeletableTopicResult(
                        name=name, error_code=ErrorCode.REQUEST_TIMED_OUT,
                        error_message=f"Topic {name!r} is marked for deletion; the controller has not "
                        f"finished within {request.timeout_ms} ms (a replica's broker may be offline)",
                    )  # fmt: skip
                break
            marked = still
        return DeleteTopicsResponse(
            results=tuple(results[name] for name in dict.fromkeys(request.topic_names))
        )

    # ------------------------------------------------------------------------ CreatePartitions

    def _create_partitions(self, request: CreatePartitionsRequest, now_ms: int, rng: random.Random) -> Script:
        racks = yield from _registered_brokers()
        # Kafka reads the brokers rack-enforced before looking at any topic: with some brokers
        # racked and others not, nothing can be added, not even with explicit assignments.
        mixed = any(r is None for r in racks.values()) and any(r is not None for r in racks.values())
        results: list[CreatePartitionsResult] = []
        grown: list[str] = []
        for topic in request.topics:
            if mixed:
                results.append(CreatePartitionsResult(
                    name=topic.name, error_code=ErrorCode[MIXED_RACKS_ERROR],
                    error_message=MIXED_RACKS_TOOL_MESSAGE,
                ))  # fmt: skip
                continue
            try:
                found = yield ZkGet(zk_data.topic_path(topic.name))
            except NoNodeError:
                results.append(CreatePartitionsResult(
                    name=topic.name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message=f"The topic '{topic.name}' does not exist.",
                ))  # fmt: skip
                continue
            data, stat = found
            current = zk_data.decode_topic_assignment(topic.name, data)
            try:
                added = _added_partitions(topic, current, racks, rng)
            except AdminError as refused:
                results.append(CreatePartitionsResult(
                    name=topic.name, error_code=refused.error_code, error_message=str(refused)
                ))  # fmt: skip
                continue
            if not request.validate_only:
                # A reassignment in progress keeps its adding/removing replicas (KIP-455).
                updated = zk_data.TopicAssignment(
                    partitions={**current.partitions, **added},
                    adding_replicas=current.adding_replicas,
                    removing_replicas=current.removing_replicas,
                )
                try:
                    yield ZkSet(
                        zk_data.topic_path(topic.name), zk_data.encode_topic_assignment(updated), stat.version
                    )
                except BadVersionError:
                    results.append(CreatePartitionsResult(
                        name=topic.name, error_code=ErrorCode.INVALID_PARTITIONS,
                        error_message="The topic's assignment changed concurrently; retry",
                    ))  # fmt: skip
                    continue
                grown.append(topic.name)
            results.append(CreatePartitionsResult(name=topic.name, error_code=ErrorCode.NONE))
        if grown:
            counts = {t.name: t.count for t in request.topics}
            pending = yield from self._await_metadata(grown, now_ms + request.timeout_ms, partitions=counts)
            results = [
                CreatePartitionsResult(
                    name=r.name, error_code=ErrorCode.REQUEST_TIMED_OUT,
                    error_message=f"new partitions of {r.name!r} had no leader within "
                    f"{request.timeout_ms} ms",
                ) if r.name in pending else r
                for r in results
            ]  # fmt: skip
        return CreatePartitionsResponse(results=tuple(results))

    # ------------------------------------------------------------------------- topic configs

    def _describe_configs(self, request: DescribeConfigsRequest) -> Script:
        results: list[DescribeConfigsResult] = []
        for resource in request.resources:
            if resource.resource_type is ConfigResourceType.BROKER:
                results.append((yield from self._describe_broker(resource)))
                continue
            stat = yield ZkExists(zk_data.topic_path(resource.resource_name))
            if stat is None:
                results.append(DescribeConfigsResult(
                    resource_type=resource.resource_type, resource_name=resource.resource_name,
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message=f"Topic {resource.resource_name!r} does not exist",
                ))  # fmt: skip
                continue
            overrides, _ = yield from _read_topic_config(resource.resource_name)
            entries = self._topic_entries(overrides, resource.configuration_keys)
            results.append(DescribeConfigsResult(
                resource_type=resource.resource_type, resource_name=resource.resource_name,
                error_code=ErrorCode.NONE, configs=entries,
            ))  # fmt: skip
        return DescribeConfigsResponse(results=tuple(results))

    def _topic_entries(
        self, overrides: Mapping[str, str], keys: tuple[str, ...] | None
    ) -> tuple[DescribeConfigsEntry, ...]:
        defaults = topic_config_values(self.default_log_config)
        entries = []
        for name in sorted(defaults):
            if keys is not None and name not in keys:
                continue
            if name in overrides:
                value, source = overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
            else:
                value = defaults[name]
                source = (
                    ConfigSource.STATIC_BROKER_CONFIG
                    if _broker_sets(name, self.static_broker_properties)
                    else ConfigSource.DEFAULT_CONFIG
                )
            entries.append(DescribeConfigsEntry(
                name=name, value=value, read_only=False,
                is_default=source is ConfigSource.DEFAULT_CONFIG, source=source,
            ))  # fmt: skip
        return tuple(entries)

    def _describe_broker(self, resource: DescribeConfigsResource) -> Script:
        """Kafka's: the cluster default ("") shows the ``<default>`` dynamic configs only; this
        broker's id shows its static settings under its dynamic ones (per broker, then default)."""
        if resource.resource_name not in ("", str(self.config.broker_id)):
            return DescribeConfigsResult(
                resource_type=resource.resource_type, resource_name=resource.resource_name,
                error_code=ErrorCode.INVALID_REQUEST,
                error_message=f"this is broker {self.config.broker_id}: send the request to broker "
                f"{resource.resource_name}",
            )  # fmt: skip
        keys = resource.configuration_keys
        default, _ = yield from _read_broker_config(None)
        dynamic: dict[str, DescribeConfigsEntry] = {
            name: _dynamic_entry(name, value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
            for name, value in default.items()
        }
        entries: list[DescribeConfigsEntry] = []
        if resource.resource_name:
            own, _ = yield from _read_broker_config(self.config.broker_id)
            for name, value in own.items():
                dynamic[name] = _dynamic_entry(name, value, ConfigSource.DYNAMIC_BROKER_CONFIG)
            entries = [e for e in self.broker_config_entries if e.name not in dynamic]
        entries += dynamic.values()
        wanted = sorted((e for e in entries if keys is None or e.name in keys), key=lambda e: e.name)
        return DescribeConfigsResult(
            resource_type=resource.resource_type, resource_name=resource.resource_name,
            error_code=ErrorCode.NONE, configs=tuple(wanted),
        )  # fmt: skip

    def _alter_broker_configs(self, request: IncrementalAlterConfigsRequest) -> Script:
        """Kafka's ``alterBrokerConfigs``: ``/config/brokers/<id>`` (this broker's id) or
        ``/config/brokers/<default>`` (""), only the dynamic keys, then a change notification that
        every broker's ``topic-configs`` actor follows."""
        name = request.resource_name
        if name not in ("", str(self.config.broker_id)):
            return IncrementalAlterConfigsResponse(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message=f"Unexpected broker id, expected {self.config.broker_id}, but received {name}",
            )
        broker_id = self.config.broker_id if name else None
        names = [change.name for change in request.configs]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            return IncrementalAlterConfigsResponse(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message=f"Error due to duplicate config keys : {','.join(duplicates)}",
            )
        current, stat = yield from _read_broker_config(broker_id)
        updated = dict(current)
        for change in request.configs:
            if change.op is AlterConfigOp.SET and change.value is not None:
                updated[change.name] = change.value
            else:
                updated.pop(change.name, None)
        try:
            validate_dynamic_broker_config(updated)
        except DynamicConfigError as error:
            return IncrementalAlterConfigsResponse(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message="Invalid config value for resource "
                f"ConfigResource(type=BROKER, name='{name}'): {error}",
            )
        if request.validate_only or updated == current:
            return IncrementalAlterConfigsResponse(error_code=ErrorCode.NONE)
        path = zk_data.broker_config_path(broker_id)
        data = zk_data.encode_broker_config(updated)
        try:
            if stat is None:
                yield ZkCreate(path, data)
            else:
                yield ZkSet(path, data, stat.version)
        except (BadVersionError, NodeExistsError):
            return IncrementalAlterConfigsResponse(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message="the broker's dynamic configuration changed concurrently; retry",
            )
        yield ZkCreate(
            f"{zk_data.CONFIG_CHANGES_PATH}/{zk_data.CONFIG_CHANGE_PREFIX}",
            zk_data.encode_broker_config_change_notification(broker_id),
            sequential=True,
        )
        return IncrementalAlterConfigsResponse(error_code=ErrorCode.NONE)

    def _alter_configs(self, request: IncrementalAlterConfigsRequest) -> Script:
        def refused(error_code: ErrorCode, message: str) -> IncrementalAlterConfigsResponse:
            return IncrementalAlterConfigsResponse(error_code=error_code, error_message=message)

        if request.resource_type is ConfigResourceType.BROKER:
            return (yield from self._alter_broker_configs(request))
        name = request.resource_name
        if (yield ZkExists(zk_data.topic_path(name))) is None:
            return refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name!r} does not exist")
        current, stat = yield from _read_topic_config(name)
        updated = dict(current)
        for change in request.configs:
            if change.name not in TOPIC_CONFIG_KEYS:
                return refused(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {change.name}")
            if change.op is AlterConfigOp.SET:
                if change.value is None:
                    return refused(ErrorCode.INVALID_CONFIG, f"{change.name}: SET needs a value")
                updated[change.name] = change.value
            else:
                updated.pop(change.name, None)
        try:
            self._validate_configs(updated)
        except AdminError as error:
            return refused(error.error_code, str(error))
        if request.validate_only or updated == current:
            return IncrementalAlterConfigsResponse(error_code=ErrorCode.NONE)
        data = zk_data.encode_topic_config(updated)
        try:
            if stat is None:
                yield ZkCreate(zk_data.topic_config_path(name), data)
            else:
                yield ZkSet(zk_data.topic_config_path(name), data, stat.version)
        except (BadVersionError, NodeExistsError):
            return refused(ErrorCode.INVALID_CONFIG, "the topic's configuration changed concurrently; retry")
        yield ZkCreate(
            f"{zk_data.CONFIG_CHANGES_PATH}/{zk_data.CONFIG_CHANGE_PREFIX}",
            zk_data.encode_config_change_notification(name),
            sequential=True,
        )
        return IncrementalAlterConfigsResponse(error_code=ErrorCode.NONE)

    # ------------------------------------------------------------------- relayed to the controller

    def _relay_to_controller(self, request: ControllerRequest, now_ms: int) -> Script:
        topics: tuple[str, ...] | None = ()
        if isinstance(request, ElectLeadersRequest):
            # The leader epochs before the election, to know when this broker has heard of it.
            topics = None if request.partitions is None else tuple({tp.topic for tp in request.partitions})
        response = yield Ask(
            self.broker, MetadataRequest(topics=topics, allow_auto_topic_creation=False), _LOCAL_ASK_MS
        )
        assert isinstance(response, MetadataResponse)
        epochs_before = _leader_epochs(response)
        if response.controller_id < 0:
            return _controller_refusal(request, ErrorCode.NOT_CONTROLLER, "no controller is known yet")
        controller_id = response.controller_id
        try:
            answer = yield Ask(controller_ref(controller_id), request, CONTROLLER_ASK_MS)
        except AskFailed as failed:
            if isinstance(failed.failure, AskTimedOut):
                return _controller_refusal(
                    request,
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"the controller (broker {controller_id}) did not answer within {CONTROLLER_ASK_MS} ms",
                )
            # Gone or unreachable: the controller moves; the client asks again.
            return _controller_refusal(
                request, ErrorCode.NOT_CONTROLLER, f"the controller (broker {controller_id}): {failed}"
            )
        if isinstance(answer, ElectLeadersResponse) and answer.error_code is ErrorCode.NONE:
            answer = yield from self._await_elected(answer, epochs_before, now_ms + CONTROLLER_ASK_MS)
        return answer

    def _await_elected(
        self, answer: ElectLeadersResponse, epochs_before: Mapping[TopicPartition, int], deadline_ms: int
    ) -> Script:
        """``answer`` once this broker's metadata shows a newer leader epoch for each partition it
        says was elected; those still not shown at the deadline become REQUEST_TIMED_OUT."""
        elected = {
            TopicPartition(r.topic, r.partition) for r in answer.results if r.error_code is ErrorCode.NONE
        }
        while elected:
            response = yield Ask(
                self.broker,
                MetadataRequest(topics=tuple({tp.topic for tp in elected}), allow_auto_topic_creation=False),
                _LOCAL_ASK_MS,
            )
            assert isinstance(response, MetadataResponse)
            now = _leader_epochs(response)
            elected = {tp for tp in elected if now.get(tp, -1) <= epochs_before.get(tp, -1)}
            if not elected:
                break
            now_ms = yield Pause(METADATA_POLL_MS)
            if now_ms >= deadline_ms:
                break
        if not elected:
            return answer
        late = ErrorCode.REQUEST_TIMED_OUT
        return dataclasses.replace(
            answer,
            results=tuple(
                dataclasses.replace(
                    r, error_code=late, error_message="the new leader was not announced in time"
                )
                if TopicPartition(r.topic, r.partition) in elected
                else r
                for r in answer.results
            ),
        )

    # -------------------------------------------------------------------------- producer ids

    def _on_init_producer_id(self, ctx: Context[AdminMessage], request: InitProducerIdRequest) -> None:
        requester = ctx.requester
        if requester is None:
            return
        if request.transactional_id is not None:
            ctx.reply(InitProducerIdResponse(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message="transactions are not supported: no transactional.id",
            ))  # fmt: skip
            return
        self._waiting_for_ids.append(requester)
        self._hand_out_ids(ctx)

    def _hand_out_ids(self, ctx: Context[AdminMessage]) -> None:
        while self._waiting_for_ids and self._next_producer_id <= self._block_end:
            requester = self._waiting_for_ids.popleft()
            producer_id = self._next_producer_id
            self._next_producer_id += 1
            self.producer_ids_handed_out += 1
            ctx.reply_to(requester, InitProducerIdResponse(
                error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0
            ))  # fmt: skip
        if self._waiting_for_ids and not self._fetching_block:
            self._fetching_block = True

            def finish(result: object, error: Exception | None) -> None:
                self._fetching_block = False
                if error is not None or not isinstance(result, zk_data.ProducerIdBlock):
                    ctx.log.warning("could not claim a producer id block: %s", error)
                    while self._waiting_for_ids:
                        ctx.reply_to(self._waiting_for_ids.popleft(), InitProducerIdResponse(
                            error_code=ErrorCode.NOT_ENOUGH_REPLICAS,
                            error_message=f"no producer id block could be claimed: {error}",
                        ))  # fmt: skip
                    return
                self.producer_id_blocks_claimed += 1
                self._next_producer_id, self._block_end = result.block_start, result.block_end
                self._hand_out_ids(ctx)

            self.scripts.start(ctx, self._claim_producer_id_block(), finish)

    def _claim_producer_id_block(self) -> Script:
        """Kafka's ``ProducerIdManager.getNewProducerIdBlock``: the next 1000 ids after the last
        claimed block, claimed with a conditional write (a lost race reads again)."""
        path = zk_data.LATEST_PRODUCER_ID_BLOCK_PATH
        while True:
            try:
                data, stat = yield ZkGet(path)
            except NoNodeError:
                data, stat = b"", None
            start = zk_data.decode_producer_id_block(data, path=path).block_end + 1 if data else 0
            block = zk_data.ProducerIdBlock(
                broker_id=self.config.broker_id, block_start=start,
                block_end=start + zk_data.PRODUCER_ID_BLOCK_SIZE - 1,
            )  # fmt: skip
            try:
                if stat is None:
                    yield ZkCreate(path, zk_data.encode_producer_id_block(block))
                else:
                    yield ZkSet(path, zk_data.encode_producer_id_block(block), stat.version)
            except (BadVersionError, NodeExistsError):
                continue
            return block


# ------------------------------------------------------------------------------------ helpers


def _registered_brokers() -> Script:
    """The registered brokers by id, each with its ``broker.rack`` (None without one). A broker
    that deregisters between the listing and the read is left out, as if listed a moment later."""
    racks: dict[int, str | None] = {}
    for name in (yield ZkGetChildren(zk_data.BROKER_IDS_PATH)):
        broker_id = zk_data.parse_broker_id(name)
        try:
            data, _ = yield ZkGet(zk_data.broker_id_path(broker_id))
        except NoNodeError:
            continue
        racks[broker_id] = zk_data.decode_broker_registration(broker_id, data).rack
    found: dict[int, str | None] = dict(sorted(racks.items()))
    return found


def _write_topic_config(topic: str, configs: Mapping[str, str]) -> Script:
    data = zk_data.encode_topic_config(configs)
    try:
        yield ZkCreate(zk_data.topic_config_path(topic), data)
    except NodeExistsError:
        # Left over from a deleted topic or a half-finished create: the new topic's config wins.
        yield ZkSet(zk_data.topic_config_path(topic), data, -1)


def _read_topic_config(topic: str) -> Script:
    """(overrides, Stat or None when there is no config znode)."""
    try:
        data, stat = yield ZkGet(zk_data.topic_config_path(topic))
    except NoNodeError:
        return {}, None
    found: tuple[dict[str, str], Stat | None] = (dict(zk_data.decode_topic_config(topic, data)), stat)
    return found


def _read_broker_config(broker_id: int | None) -> Script:
    """A broker's (or, for None, the cluster default's) dynamic configs: (configs, Stat or None)."""
    try:
        data, stat = yield ZkGet(zk_data.broker_config_path(broker_id))
    except NoNodeError:
        return {}, None
    entity = zk_data.broker_config_entity(broker_id)
    found: tuple[dict[str, str], Stat | None] = (dict(zk_data.decode_broker_config(entity, data)), stat)
    return found


def _dynamic_entry(name: str, value: str, source: ConfigSource) -> DescribeConfigsEntry:
    return DescribeConfigsEntry(name=name, value=value, read_only=False, is_default=False, source=source)


def _collision(name: str, existing: set[str]) -> str | None:
    """Kafka: '.' and '_' map to the same metric name, so such topics may not coexist."""
    if "." not in name and "_" not in name:
        return None
    normalized = name.replace(".", "_")
    for other in existing:
        if other != name and other.replace(".", "_") == normalized:
            return other
    return None


def _checked_assignment(
    assignment: dict[int, tuple[int, ...]], brokers: list[int]
) -> dict[int, tuple[int, ...]]:
    if sorted(assignment) != list(range(len(assignment))):
        raise AdminError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Partitions should be a consecutive 0-based integer sequence, got {sorted(assignment)}",
        )
    sizes = {len(replicas) for replicas in assignment.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise AdminError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, "All partitions should have the same number of replicas"
        )
    for partition, replicas in assignment.items():
        if len(set(replicas)) != len(replicas):
            raise AdminError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Duplicate replica assignment found for partition {partition}: {list(replicas)}",
            )
    unknown = sorted({r for replicas in assignment.values() for r in replicas} - set(brokers))
    if unknown:
        raise AdminError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Unknown broker(s) in replica assignment: {unknown}"
        )
    return assignment


def _added_partitions(
    topic: CreatePartitionsTopic,
    current: zk_data.TopicAssignment,
    racks: Mapping[int, str | None],
    rng: random.Random,
) -> dict[int, tuple[int, ...]]:
    brokers = list(racks)
    existing = len(current.partitions)
    if topic.count < existing:
        raise AdminError(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {existing} partitions, which is higher than the requested {topic.count}.",
        )
    if topic.count == existing:
        raise AdminError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {existing} partitions.")
    replication = len(current.partitions[0])
    new = topic.count - existing
    if topic.assignments:
        if len(topic.assignments) != new:
            raise AdminError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Increasing the number of partitions by {new} but {len(topic.assignments)} "
                "assignments provided.",
            )
        added = {existing + i: tuple(replicas) for i, replicas in enumerate(topic.assignments)}
        if any(len(replicas) != replication for replicas in added.values()):
            raise AdminError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Inconsistent replication factor between partitions, partition 0 has {replication}",
            )
        _checked_assignment(dict(enumerate(added.values())), brokers)
        return added
    # Kafka's AdminZkClient.addPartitions: start at the first broker (by id) not below partition
    # 0's first replica, else at 0. With racks that index is used in the rack-alternated list, as
    # in Kafka.
    first_leader = current.partitions[0][0]
    start = next((i for i, b in enumerate(sorted(brokers)) if b >= first_leader), 0)
    try:
        return assign_replicas_to_brokers(
            brokers,
            new,
            replication,
            rng=rng,
            fixed_start_index=start,
            start_partition_id=existing,
            racks=racks,
        )
    except AssignmentError as error:
        raise AdminError(ErrorCode[error.error_name], str(error)) from None


def _leader_epochs(response: MetadataResponse) -> dict[TopicPartition, int]:
    return {
        TopicPartition(t.name, p.partition): p.leader_epoch
        for t in response.topics
        for p in t.partitions
        if p.leader >= 0
    }


def _controller_refusal(request: ControllerRequest, error_code: ErrorCode, message: str) -> object:
    match request:
        case AlterPartitionReassignmentsRequest():
            return AlterPartitionReassignmentsResponse(error_code=error_code, error_message=message)
        case ListPartitionReassignmentsRequest():
            return ListPartitionReassignmentsResponse(error_code=error_code, error_message=message)
        case ElectLeadersRequest():
            return ElectLeadersResponse(error_code=error_code, error_message=message)
        case _:
            assert_never(request)


def _broker_sets(topic_key: str, properties: Mapping[str, str]) -> bool:
    return any(key in properties for key in BROKER_KEYS_FOR_TOPIC_KEY.get(topic_key, ()))
