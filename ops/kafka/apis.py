"""The Kafka APIs of the listener: each Kafka request as the internal requests the broker's actors serve.

What this module owns: the mapping, request by request, between Kafka's messages (``ops/kafka/codec.py``)
and the internal dataclasses of ``actors/common/protocol.py`` and ``client_protocol.py``, asked of the
same local actors the HTTP client endpoint reaches: the ``broker`` actor for Produce, Fetch,
ListOffsets, OffsetForLeaderEpoch and Metadata, the ``admin`` actor for CreateTopics, DeleteTopics,
DescribeConfigs, AlterConfigs, IncrementalAlterConfigs (topics, and this broker's dynamic configs or
the cluster default's) and InitProducerId, and for AlterPartitionReassignments, ListPartitionReassignments and
ElectLeaders, which it relays to the active controller (Kafka's ``KafkaApis``).

Rules kept:

* **What a client may send is ``actors/common/client_access.py``'s rule**, checked on every internal
  request before it is asked: a Fetch, ListOffsets or OffsetForLeaderEpoch naming a replica id other
  than -1 would be taken for a follower's and is refused; the connection is then closed.
* **Answers come back in the request's order**, topic by topic and partition by partition.
* **Record batches are the stored bytes**: a Produce's batches go to the partition leader as they
  came; a Fetch answers the bytes the log returned.
* **Every internal failure has a Kafka answer.** An internal ask that times out answers
  REQUEST_TIMED_OUT where the response has error codes (a produced batch may still have been written:
  an idempotent producer's retry is deduplicated); a node that is shutting down closes the connection
  (``CloseConnection``), and the client goes to another broker.
* **No fetch sessions** (KIP-227): a full Fetch (session epoch 0 or -1) is answered in full with
  ``session_id`` 0, so clients keep sending full fetches; an incremental one (any other epoch) names
  a session this broker never gave: FETCH_SESSION_ID_NOT_FOUND.
* **No transactions, no consumer groups**: a Produce with a transactional id is refused per partition;
  the group APIs are not served (not advertised either).

One rule from Kafka's request handling lives in the listener instead of here: a Produce with
``acks=0`` gets no response, and when it fails the connection is closed (the client's only hint).
"""

from __future__ import annotations

import contextlib
import logging
import struct
from typing import Any, Final, TypeVar

from actors.common.client_access import client_request_refusal
from actors.common.client_protocol import (
    AlterableConfig,
    AlterConfigOp,
    ConfigResourceType,
    ConfigSource,
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TopicConfigEntry,
)
from actors.common.errors import ErrorCode
from actors.common.protocol import (
    CONSUMER_REPLICA_ID,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetForLeaderEpochPartition,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    ReassignablePartition,
)
from actors.common.types import TopicPartition
from actors.server.zk_data import KAFKA_LISTENER_NAME
from ops.kafka import codec as k
from runtime.errors import AskTimeoutError, RuntimeFailure
from runtime.ref import ActorRef
from runtime.storage.records import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    CompressionType,
)
from runtime.system import ActorSystem

__all__ = ["CloseConnection", "KafkaApis"]

_log = logging.getLogger("actorlog.kafka")

T = TypeVar("T")

FETCH_SESSION_ID_NOT_FOUND: Final = 70
INITIAL_EPOCH: Final = 0  # a fetch session epoch: a full fetch that would open a session (KIP-227)
FINAL_EPOCH: Final = -1  # a full fetch without a session
TRANSACTIONAL_ID_AUTHORIZATION_FAILED: Final = 53
_NO_THROTTLE: Final = k.duration(0)
_ATTRIBUTES: Final = struct.Struct(">h")
_BATCH_LENGTH: Final = struct.Struct(">i")


def _unsupported_resource(resource_type: int) -> str:
    return f"AlterConfigs is only supported for topics and brokers, but resource type is {resource_type}"


class CloseConnection(Exception):
    """The request cannot be answered on this connection: the listener closes it."""


class KafkaApis:
    """The APIs of one broker node, for authenticated connections (the listener authenticates)."""

    def __init__(
        self, system: ActorSystem, broker: ActorRef, admin: ActorRef, *, request_timeout_ms: int
    ) -> None:
        self.system = system
        self.broker = broker
        self.admin = admin
        self.request_timeout_ms = request_timeout_ms

    async def handle(self, header: k.RequestHeader, request: k.Request, user: str) -> k.Response | None:
        """The response to ``request`` (None: a Produce with acks=0, which is not answered).

        For a Produce, the internal request is handed to the broker actor before this coroutine
        first waits: the listener starts one per request in arrival order, so the leader appends a
        connection's batches in the order they came (an idempotent producer's sequence numbers)."""
        match request:
            case k.ApiVersionsRequest():
                return api_versions_response()
            case k.MetadataRequest():
                return await self._metadata(header, request, user)
            case k.ProduceRequest():
                return await self._produce(header, request, user)
            case k.FetchRequest():
                return await self._fetch(request, user)
            case k.ListOffsetsRequest():
                return await self._list_offsets(request, user)
            case k.OffsetForLeaderEpochRequest():
                return await self._offset_for_leader_epoch(header, request, user)
            case k.InitProducerIdRequest():
                return await self._init_producer_id(request, user)
            case k.CreateTopicsRequest():
                return await self._create_topics(request, user)
            case k.DeleteTopicsRequest():
                return await self._delete_topics(request, user)
            case k.DescribeConfigsRequest():
                return await self._describe_configs(request, user)
            case k.AlterConfigsRequest():
                return await self._alter_configs(request, user)
            case k.IncrementalAlterConfigsRequest():
                return await self._incremental_alter_configs(request, user)
            case k.ElectLeadersRequest():
                return await self._elect_leaders(request, user)
            case k.AlterPartitionReassignmentsRequest():
                return await self._alter_partition_reassignments(request, user)
            case k.ListPartitionReassignmentsRequest():
                return await self._list_partition_reassignments(request, user)
            case k.SaslHandshakeRequest() | k.SaslAuthenticateRequest():
                raise CloseConnection(f"{type(request).__name__} on an authenticated connection")
            case _:  # pragma: no cover - decode_request gives only the served kinds
                raise CloseConnection(f"no handler for {type(request).__name__}")

    # ------------------------------------------------------------------------------- asking

    async def _ask(
        self, target: ActorRef, message: object, kind: type[T], *, timeout_ms: int, user: str
    ) -> T:
        """Ask a local actor as a client would; AskTimeoutError propagates, any other failure
        (the node stopping, an actor gone) closes the connection."""
        refusal = client_request_refusal(target.name, message, ask=True)
        if refusal is not None:
            _log.warning("refused a Kafka request from user %s: %s", user, refusal)
            raise CloseConnection(refusal)
        try:
            response = await self.system.ask(target, message, timeout_ms=timeout_ms)
        except AskTimeoutError:
            raise
        except RuntimeFailure as failure:
            raise CloseConnection(f"{type(message).__name__} not served: {failure}") from None
        if not isinstance(response, kind):
            raise CloseConnection(f"{type(message).__name__} answered with {type(response).__name__}")
        return response

    # ------------------------------------------------------------------------------ Metadata

    async def _metadata(
        self, header: k.RequestHeader, request: k.MetadataRequest, user: str
    ) -> k.MetadataResponse:
        topics = None if request.topics is None else tuple(t.name for t in request.topics)
        if header.api_version == 0 and not topics:
            topics = None  # v0 has no null: an empty list asks for every topic
        internal = MetadataRequest(topics=topics, allow_auto_topic_creation=request.allow_auto_topic_creation)
        try:
            answer = await self._ask(
                self.broker, internal, MetadataResponse, timeout_ms=self.request_timeout_ms, user=user
            )
        except AskTimeoutError:
            raise CloseConnection("Metadata timed out") from None
        return metadata_response(answer)

    # ------------------------------------------------------------------------------- Produce

    async def _produce(
        self, header: k.RequestHeader, request: k.ProduceRequest, user: str
    ) -> k.ProduceResponse | None:
        wanted: list[tuple[str, int]] = [
            (t.name, p.index) for t in request.topic_data for p in t.partition_data
        ]
        if request.transactional_id is not None:
            # No transaction coordinator: nothing of a transactional producer is written.
            refused = dict.fromkeys(wanted, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            return None if request.acks == 0 else produce_response(request, refused, {})
        timeout_ms = k.millis(request.timeout)
        errors: dict[tuple[str, int], int] = {}
        partitions: list[ProducePartitionData] = []
        for t in request.topic_data:
            for p in t.partition_data:
                records = p.records or b""
                invalid = produce_records_error(header.api_version, records)
                if invalid is not None:
                    errors[(t.name, p.index)] = int(invalid)
                else:
                    partitions.append(ProducePartitionData(topic=t.name, partition=p.index, records=records))
        answer = ProduceResponse(partitions=())
        if partitions:
            internal = ProduceRequest(acks=request.acks, timeout_ms=timeout_ms, partitions=tuple(partitions))
            with contextlib.suppress(AskTimeoutError):
                answer = await self._ask(
                    self.broker,
                    internal,
                    ProduceResponse,
                    timeout_ms=timeout_ms + self.request_timeout_ms,
                    user=user,
                )
        results = {(p.topic, p.partition): p for p in answer.partitions}
        for tp in wanted:
            if tp not in results:
                errors.setdefault(tp, int(ErrorCode.REQUEST_TIMED_OUT))
        if request.acks == 0:
            if errors or any(p.error_code is not ErrorCode.NONE for p in answer.partitions):
                raise CloseConnection("an acks=0 produce failed")  # Kafka's only signal for acks=0
            return None
        return produce_response(request, errors, results)

    # --------------------------------------------------------------------------------- Fetch

    async def _fetch(self, request: k.FetchRequest, user: str) -> k.FetchResponse:
        if request.session_epoch not in (INITIAL_EPOCH, FINAL_EPOCH):
            # An incremental fetch of a session this broker never gave (Kafka's FetchManager). A
            # full one (epoch 0 or -1) is served whatever session it names, and no session is made.
            return k.FetchResponse(
                throttle_time=_NO_THROTTLE,
                error_code=k.error(FETCH_SESSION_ID_NOT_FOUND),
                session_id=k.i32(0),
                responses=(),
            )
        max_wait_ms = max(0, k.millis(request.max_wait))
        internal = FetchRequest(
            replica_id=request.replica_id,
            max_wait_ms=max_wait_ms,
            min_bytes=request.min_bytes,
            max_bytes=request.max_bytes,
            partitions=tuple(
                FetchPartition(
                    topic=t.topic,
                    partition=p.partition,
                    fetch_offset=p.fetch_offset,
                    partition_max_bytes=p.partition_max_bytes,
                    current_leader_epoch=p.current_leader_epoch,
                )
                for t in request.topics
                for p in t.partitions
            ),
        )
        try:
            answer = await self._ask(
                self.broker,
                internal,
                FetchResponse,
                timeout_ms=max_wait_ms + self.request_timeout_ms,
                user=user,
            )
        except AskTimeoutError:
            answer = FetchResponse(error_code=ErrorCode.NONE, partitions=())
        return fetch_response(request, answer)

    # --------------------------------------------------------------------------- ListOffsets

    async def _list_offsets(self, request: k.ListOffsetsRequest, user: str) -> k.ListOffsetsResponse:
        internal = ListOffsetsRequest(
            replica_id=request.replica_id,
            partitions=tuple(
                ListOffsetsPartition(topic=t.name, partition=p.partition_index, timestamp=p.timestamp)
                for t in request.topics
                for p in t.partitions
            ),
        )
        try:
            answer = await self._ask(
                self.broker, internal, ListOffsetsResponse, timeout_ms=self.request_timeout_ms, user=user
            )
        except AskTimeoutError:
            answer = ListOffsetsResponse(partitions=())
        found = {(p.topic, p.partition): p for p in answer.partitions}

        def partition(topic: str, wanted: k.ListOffsetsPartition) -> k.ListOffsetsPartitionResponse:
            result = found.get((topic, wanted.partition_index))
            if result is None:
                return k.ListOffsetsPartitionResponse(
                    partition_index=wanted.partition_index,
                    error_code=k.error(ErrorCode.REQUEST_TIMED_OUT),
                    timestamp=k.i64(-1),
                    offset=k.i64(-1),
                )
            return k.ListOffsetsPartitionResponse(
                partition_index=wanted.partition_index,
                error_code=k.error(result.error_code),
                timestamp=k.i64(result.timestamp),
                offset=k.i64(result.offset),
            )

        return k.ListOffsetsResponse(
            throttle_time=_NO_THROTTLE,
            topics=tuple(
                k.ListOffsetsTopicResponse(
                    name=t.name, partitions=tuple(partition(t.name, p) for p in t.partitions)
                )
                for t in request.topics
            ),
        )

    # ------------------------------------------------------------------ OffsetForLeaderEpoch

    async def _offset_for_leader_epoch(
        self, header: k.RequestHeader, request: k.OffsetForLeaderEpochRequest, user: str
    ) -> k.OffsetForLeaderEpochResponse:
        # Before v3 the request names no replica: from a client, it is a consumer's.
        replica_id = request.replica_id if header.api_version >= 3 else CONSUMER_REPLICA_ID
        internal = OffsetsForLeaderEpochRequest(
            replica_id=replica_id,
            partitions=tuple(
                OffsetForLeaderEpochPartition(
                    topic=t.topic,
                    partition=p.partition,
                    current_leader_epoch=p.current_leader_epoch,
                    leader_epoch=p.leader_epoch,
                )
                for t in request.topics
                for p in t.partitions
            ),
        )
        try:
            answer = await self._ask(
                self.broker,
                internal,
                OffsetsForLeaderEpochResponse,
                timeout_ms=self.request_timeout_ms,
                user=user,
            )
        except AskTimeoutError:
            answer = OffsetsForLeaderEpochResponse(partitions=())
        found = {(p.topic, p.partition): p for p in answer.partitions}

        def partition(topic: str, wanted: k.OffsetForLeaderPartition) -> k.EpochEndOffset:
            result = found.get((topic, wanted.partition))
            if result is None:
                return k.EpochEndOffset(
                    error_code=k.error(ErrorCode.REQUEST_TIMED_OUT),
                    partition=wanted.partition,
                    leader_epoch=k.i32(-1),
                    end_offset=k.i64(-1),
                )
            return k.EpochEndOffset(
                error_code=k.error(result.error_code),
                partition=wanted.partition,
                leader_epoch=k.i32(result.leader_epoch),
                end_offset=k.i64(result.end_offset),
            )

        return k.OffsetForLeaderEpochResponse(
            throttle_time=_NO_THROTTLE,
            topics=tuple(
                k.OffsetForLeaderTopicResult(
                    topic=t.topic, partitions=tuple(partition(t.topic, p) for p in t.partitions)
                )
                for t in request.topics
            ),
        )

    # ------------------------------------------------------------------------ InitProducerId

    async def _init_producer_id(
        self, request: k.InitProducerIdRequest, user: str
    ) -> k.InitProducerIdResponse:
        if request.transactional_id is not None:
            # No transaction coordinator: refused as Produce refuses a transactional producer.
            return k.InitProducerIdResponse(
                throttle_time=_NO_THROTTLE,
                error_code=k.error(TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                producer_id=k.ProducerId(-1),
                producer_epoch=k.i16(-1),
            )
        internal = InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=k.millis(request.transaction_timeout)
        )
        try:
            answer = await self._ask(
                self.admin, internal, InitProducerIdResponse, timeout_ms=self.request_timeout_ms, user=user
            )
        except AskTimeoutError:
            answer = InitProducerIdResponse(error_code=ErrorCode.REQUEST_TIMED_OUT)
        return k.InitProducerIdResponse(
            throttle_time=_NO_THROTTLE,
            error_code=k.error(answer.error_code),
            producer_id=k.ProducerId(answer.producer_id),
            producer_epoch=k.i16(answer.producer_epoch),
        )

    # ------------------------------------------------------------------------------- admin

    async def _create_topics(self, request: k.CreateTopicsRequest, user: str) -> k.CreateTopicsResponse:
        timeout_ms = k.millis(request.timeout)
        internal = CreateTopicsRequest(
            topics=tuple(
                CreatableTopic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    assignments=tuple((a.partition_index, tuple(a.broker_ids)) for a in t.assignments),
                    configs=tuple(TopicConfigEntry(name=c.name, value=c.value) for c in t.configs),
                )
                for t in request.topics
            ),
            timeout_ms=timeout_ms,
            validate_only=request.validate_only,
        )
        try:
            answer = await self._ask(
                self.admin,
                internal,
                CreateTopicsResponse,
                timeout_ms=max(timeout_ms, 0) + self.request_timeout_ms,
                user=user,
            )
        except AskTimeoutError:
            answer = CreateTopicsResponse(topics=())
        found = {t.name: t for t in answer.topics}
        results = []
        for topic in request.topics:
            result = found.get(topic.name)
            results.append(
                k.CreatableTopicResult(
                    name=topic.name,
                    error_code=k.error(ErrorCode.REQUEST_TIMED_OUT if result is None else result.error_code),
                    error_message=None if result is None else result.error_message,
                )
            )
        return k.CreateTopicsResponse(throttle_time=_NO_THROTTLE, topics=tuple(results))

    async def _delete_topics(self, request: k.DeleteTopicsRequest, user: str) -> k.DeleteTopicsResponse:
        timeout_ms = k.millis(request.timeout)
        internal = DeleteTopicsRequest(topic_names=tuple(request.topic_names), timeout_ms=timeout_ms)
        try:
            answer = await self._ask(
                self.admin,
                internal,
                DeleteTopicsResponse,
                timeout_ms=max(timeout_ms, 0) + self.request_timeout_ms,
                user=user,
            )
        except AskTimeoutError:
            answer = DeleteTopicsResponse(results=())
        found = {r.name: r.error_code for r in answer.results}
        return k.DeleteTopicsResponse(
            throttle_time=_NO_THROTTLE,
            responses=tuple(
                k.DeletableTopicResult(
                    name=name, error_code=k.error(found.get(name, ErrorCode.REQUEST_TIMED_OUT))
                )
                for name in request.topic_names
            ),
        )

    async def _describe_configs(
        self, request: k.DescribeConfigsRequest, user: str
    ) -> k.DescribeConfigsResponse:
        served = {int(t) for t in ConfigResourceType}
        wanted = tuple(
            DescribeConfigsResource(
                resource_type=ConfigResourceType(r.resource_type),
                resource_name=r.resource_name,
                configuration_keys=None if r.configuration_keys is None else tuple(r.configuration_keys),
            )
            for r in request.resources
            if r.resource_type in served
        )
        results: dict[tuple[int, str], k.DescribeConfigsResult] = {}
        if wanted:
            try:
                answer = await self._ask(
                    self.admin,
                    DescribeConfigsRequest(resources=wanted),
                    DescribeConfigsResponse,
                    timeout_ms=self.request_timeout_ms,
                    user=user,
                )
            except AskTimeoutError:
                answer = DescribeConfigsResponse(results=())
            for result in answer.results:
                results[(int(result.resource_type), result.resource_name)] = k.DescribeConfigsResult(
                    error_code=k.error(result.error_code),
                    error_message=result.error_message,
                    resource_type=k.i8(int(result.resource_type)),
                    resource_name=result.resource_name,
                    configs=tuple(
                        k.DescribeConfigsResourceResult(
                            name=entry.name,
                            value=entry.value,
                            read_only=entry.read_only,
                            config_source=k.i8(int(entry.source)),
                            is_sensitive=entry.is_sensitive,
                            synonyms=(),
                        )
                        for entry in result.configs
                    ),
                )

        def result_of(resource: k.DescribeConfigsResource) -> k.DescribeConfigsResult:
            found = results.get((resource.resource_type, resource.resource_name))
            if found is not None:
                return found
            unsupported = resource.resource_type not in served
            return k.DescribeConfigsResult(
                error_code=k.error(ErrorCode.INVALID_REQUEST if unsupported else ErrorCode.REQUEST_TIMED_OUT),
                error_message=(
                    f"resource type {resource.resource_type} is not supported (topics and brokers are)"
                    if unsupported
                    else "DescribeConfigs timed out"
                ),
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=(),
            )

        return k.DescribeConfigsResponse(
            throttle_time=_NO_THROTTLE, results=tuple(result_of(r) for r in request.resources)
        )

    # ------------------------------------------------------------------------ altering configs

    async def _incremental_alter_configs(
        self, request: k.IncrementalAlterConfigsRequest, user: str
    ) -> k.IncrementalAlterConfigsResponse:
        """Each resource as one internal IncrementalAlterConfigs to the admin actor (SET and DELETE;
        APPEND and SUBTRACT apply to list configs, which nothing here has: INVALID_REQUEST)."""
        results = []
        for resource in request.resources:
            operations = {int(op) for op in (c.config_operation for c in resource.configs)}
            unsupported = sorted(operations - {int(AlterConfigOp.SET), int(AlterConfigOp.DELETE)})
            message: str | None
            if unsupported:
                error_code = ErrorCode.INVALID_REQUEST
                message = f"config operation(s) {unsupported} are not supported: only SET (0) and DELETE (1)"
            else:
                changes = tuple(
                    AlterableConfig(name=c.name, op=AlterConfigOp(int(c.config_operation)), value=c.value)
                    for c in resource.configs
                )
                error_code, message = await self._alter_resource(
                    int(resource.resource_type), resource.resource_name, changes, request.validate_only, user
                )
            results.append(
                k.IncrementalAlterConfigsResourceResponse(
                    error_code=k.error(error_code),
                    error_message=message,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                )
            )
        return k.IncrementalAlterConfigsResponse(throttle_time=_NO_THROTTLE, responses=tuple(results))

    async def _alter_configs(self, request: k.AlterConfigsRequest, user: str) -> k.AlterConfigsResponse:
        """Kafka's older AlterConfigs replaces a resource's dynamic configs with the ones given: the
        ones set now and not given are deleted (read first with DescribeConfigs)."""
        results = []
        for resource in request.resources:
            given = {c.name: c.value for c in resource.configs}
            current = await self._dynamic_configs(int(resource.resource_type), resource.resource_name, user)
            if isinstance(current, tuple):
                error_code, message = current
            else:
                changes = tuple(
                    AlterableConfig(name=name, op=AlterConfigOp.SET, value=value)
                    if value is not None
                    else AlterableConfig(name=name, op=AlterConfigOp.DELETE)
                    for name, value in given.items()
                ) + tuple(
                    AlterableConfig(name=n, op=AlterConfigOp.DELETE) for n in sorted(current - set(given))
                )
                error_code, message = await self._alter_resource(
                    int(resource.resource_type), resource.resource_name, changes, request.validate_only, user
                )
            results.append(
                k.AlterConfigsResourceResponse(
                    error_code=k.error(error_code),
                    error_message=message,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                )
            )
        return k.AlterConfigsResponse(throttle_time=_NO_THROTTLE, responses=tuple(results))

    async def _dynamic_configs(
        self, resource_type: int, name: str, user: str
    ) -> set[str] | tuple[ErrorCode, str | None]:
        """The keys a resource has set dynamically now, or the error that prevents knowing."""
        if resource_type not in {int(t) for t in ConfigResourceType}:
            return ErrorCode.INVALID_REQUEST, _unsupported_resource(resource_type)
        kind = ConfigResourceType(resource_type)
        source = (
            ConfigSource.DYNAMIC_TOPIC_CONFIG
            if kind is ConfigResourceType.TOPIC
            else ConfigSource.DYNAMIC_BROKER_CONFIG
            if name
            else ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        )
        try:
            answer = await self._ask(
                self.admin,
                DescribeConfigsRequest(
                    resources=(DescribeConfigsResource(resource_type=kind, resource_name=name),)
                ),
                DescribeConfigsResponse,
                timeout_ms=self.request_timeout_ms,
                user=user,
            )
        except AskTimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT, "DescribeConfigs timed out"
        (result,) = answer.results
        if result.error_code is not ErrorCode.NONE:
            return result.error_code, result.error_message
        return {entry.name for entry in result.configs if entry.source is source}

    async def _alter_resource(
        self,
        resource_type: int,
        name: str,
        changes: tuple[AlterableConfig, ...],
        validate_only: bool,
        user: str,
    ) -> tuple[ErrorCode, str | None]:
        if resource_type not in {int(t) for t in ConfigResourceType}:
            return ErrorCode.INVALID_REQUEST, _unsupported_resource(resource_type)
        internal = IncrementalAlterConfigsRequest(
            resource_type=ConfigResourceType(resource_type),
            resource_name=name,
            configs=changes,
            validate_only=validate_only,
        )
        try:
            answer = await self._ask(
                self.admin,
                internal,
                IncrementalAlterConfigsResponse,
                timeout_ms=self.request_timeout_ms,
                user=user,
            )
        except AskTimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT, "AlterConfigs timed out"
        return answer.error_code, answer.error_message

    # ------------------------------------------------------------------ relayed to the controller

    async def _elect_leaders(self, request: k.ElectLeadersRequest, user: str) -> k.ElectLeadersResponse:
        wanted = (
            None
            if request.topic_partitions is None
            else tuple(TopicPartition(t.topic, p) for t in request.topic_partitions for p in t.partitions)
        )
        internal = ElectLeadersRequest(election_type=request.election_type, partitions=wanted)
        timeout_ms = max(k.millis(request.timeout), 0)
        try:
            answer = await self._ask(
                self.admin,
                internal,
                ElectLeadersResponse,
                timeout_ms=timeout_ms + self.request_timeout_ms,
                user=user,
            )
        except AskTimeoutError:
            answer = ElectLeadersResponse(error_code=ErrorCode.REQUEST_TIMED_OUT)
        results: dict[TopicPartition, tuple[ErrorCode, str | None]] = {
            TopicPartition(r.topic, r.partition): (r.error_code, r.error_message) for r in answer.results
        }
        if answer.error_code is not ErrorCode.NONE and wanted is not None:
            # v0 has no top-level error: every partition asked for carries it (Kafka's controller
            # answers NOT_CONTROLLER so, per partition).
            results = dict.fromkeys(wanted, (answer.error_code, answer.error_message))
        by_topic: dict[str, list[k.PartitionResult]] = {}
        for tp, (code, message) in results.items():
            by_topic.setdefault(tp.topic, []).append(
                k.PartitionResult(
                    partition_id=k.i32(tp.partition), error_code=k.error(code), error_message=message
                )
            )
        return k.ElectLeadersResponse(
            throttle_time=_NO_THROTTLE,
            error_code=k.error(answer.error_code),
            replica_election_results=tuple(
                k.ReplicaElectionResult(topic=k.TopicName(topic), partition_result=tuple(partitions))
                for topic, partitions in by_topic.items()
            ),
        )

    async def _alter_partition_reassignments(
        self, request: k.AlterPartitionReassignmentsRequest, user: str
    ) -> k.AlterPartitionReassignmentsResponse:
        internal = AlterPartitionReassignmentsRequest(
            partitions=tuple(
                ReassignablePartition(
                    topic=t.name,
                    partition=p.partition_index,
                    replicas=None if p.replicas is None else tuple(int(r) for r in p.replicas),
                )
                for t in request.topics
                for p in t.partitions
            )
        )
        timeout_ms = max(k.millis(request.timeout), 0)
        try:
            answer = await self._ask(
                self.admin,
                internal,
                AlterPartitionReassignmentsResponse,
                timeout_ms=timeout_ms + self.request_timeout_ms,
                user=user,
            )
        except AskTimeoutError:
            answer = AlterPartitionReassignmentsResponse(
                error_code=ErrorCode.REQUEST_TIMED_OUT, error_message="AlterPartitionReassignments timed out"
            )
        found = {(r.topic, r.partition): r for r in answer.results}

        def partition(topic: str, index: int) -> k.ReassignablePartitionResponse:
            result = found.get((topic, index))
            if result is None:  # a request-level refusal: the top-level error says why
                code = (
                    ErrorCode.REQUEST_TIMED_OUT if answer.error_code is ErrorCode.NONE else answer.error_code
                )
                return k.ReassignablePartitionResponse(
                    partition_index=k.i32(index), error_code=k.error(code), error_message=answer.error_message
                )
            return k.ReassignablePartitionResponse(
                partition_index=k.i32(index),
                error_code=k.error(result.error_code),
                error_message=result.error_message,
            )

        return k.AlterPartitionReassignmentsResponse(
            throttle_time=_NO_THROTTLE,
            error_code=k.error(answer.error_code),
            error_message=answer.error_message,
            responses=tuple(
                k.ReassignableTopicResponse(
                    name=t.name, partitions=tuple(partition(t.name, p.partition_index) for p in t.partitions)
                )
                for t in request.topics
            ),
        )

    async def _list_partition_reassignments(
        self, request: k.ListPartitionReassignmentsRequest, user: str
    ) -> k.ListPartitionReassignmentsResponse:
        wanted = (
            None
            if request.topics is None
            else tuple(TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes)
        )
        timeout_ms = max(k.millis(request.timeout), 0)
        try:
            answer = await self._ask(
                self.admin,
                ListPartitionReassignmentsRequest(partitions=wanted),
                ListPartitionReassignmentsResponse,
                timeout_ms=timeout_ms + self.request_timeout_ms,
                user=user,
            )
        except AskTimeoutError:
            answer = ListPartitionReassignmentsResponse(
                error_code=ErrorCode.REQUEST_TIMED_OUT, error_message="ListPartitionReassignments timed out"
            )
        by_topic: dict[str, list[k.OngoingPartitionReassignment]] = {}
        for r in answer.reassignments:
            by_topic.setdefault(r.topic, []).append(
                k.OngoingPartitionReassignment(
                    partition_index=k.i32(r.partition),
                    replicas=tuple(k.BrokerId(b) for b in r.replicas),
                    adding_replicas=tuple(k.BrokerId(b) for b in r.adding_replicas),
                    removing_replicas=tuple(k.BrokerId(b) for b in r.removing_replicas),
                )
            )
        return k.ListPartitionReassignmentsResponse(
            throttle_time=_NO_THROTTLE,
            error_code=k.error(answer.error_code),
            error_message=answer.error_message,
            topics=tuple(
                k.OngoingTopicReassignment(name=k.TopicName(topic), partitions=tuple(partitions))
                for topic, partitions in by_topic.items()
            ),
        )


# ----------------------------------------------------------------------------- responses


def api_versions_response() -> k.ApiVersionsResponse:
    return k.ApiVersionsResponse(
        error_code=k.error(ErrorCode.NONE),
        api_keys=tuple(
            k.ApiVersion(api_key=k.i16(key), min_version=k.i16(low), max_version=k.i16(high))
            for key, (low, high) in sorted(k.API_VERSIONS.items())
        ),
        throttle_time=_NO_THROTTLE,
    )


def metadata_response(
    answer: MetadataResponse, listener_name: str = KAFKA_LISTENER_NAME
) -> k.MetadataResponse:
    """The broker's Metadata for a client of ``listener_name``: each broker at that listener's address;
    a broker without one is left out, and a partition led by such a broker has no leader to offer
    (LEADER_NOT_AVAILABLE), as Kafka answers a listener its leader does not have."""
    brokers: list[k.MetadataResponseBroker] = []
    for broker in answer.brokers:
        endpoint = broker.endpoint(listener_name)
        if endpoint is not None:
            brokers.append(
                k.MetadataResponseBroker(
                    node_id=k.BrokerId(broker.broker_id),
                    host=endpoint.host,
                    port=k.i32(endpoint.port),
                    rack=broker.rack,
                )
            )
    reachable = {int(b.node_id) for b in brokers}
    topics = []
    for topic in answer.topics:
        partitions = []
        for p in topic.partitions:
            error, leader = p.error_code, p.leader
            if leader >= 0 and leader not in reachable:
                error, leader = ErrorCode.LEADER_NOT_AVAILABLE, -1
            partitions.append(
                k.MetadataResponsePartition(
                    error_code=k.error(error),
                    partition_index=k.i32(p.partition),
                    leader_id=k.BrokerId(leader),
                    replica_nodes=tuple(k.BrokerId(b) for b in p.replicas),
                    isr_nodes=tuple(k.BrokerId(b) for b in p.isr),
                    offline_replicas=tuple(k.BrokerId(b) for b in p.offline_replicas),
                )
            )
        topics.append(
            k.MetadataResponseTopic(
                error_code=k.error(topic.error_code),
                name=k.TopicName(topic.name),
                is_internal=False,
                partitions=tuple(partitions),
            )
        )
    return k.MetadataResponse(
        throttle_time=_NO_THROTTLE,
        brokers=tuple(brokers),
        cluster_id=answer.cluster_id,
        controller_id=k.BrokerId(answer.controller_id),
        topics=tuple(topics),
    )


def produce_records_error(version: int, records: bytes) -> ErrorCode | None:
    """Kafka's ``ProduceRequest.validateRecords`` (v3 and later) for one partition's records: exactly
    one record batch, of magic 2 (else CORRUPT_MESSAGE, as Kafka 2.4 answers its
    InvalidRecordException), and zstd only from v7 on (KIP-110: UNSUPPORTED_COMPRESSION_TYPE). None
    when they may go to the leader, which checks the rest."""
    if len(records) < ATTRIBUTES_OFFSET + _ATTRIBUTES.size:
        return ErrorCode.CORRUPT_MESSAGE  # not one whole batch header
    if records[MAGIC_OFFSET] != MAGIC_V2:
        return ErrorCode.CORRUPT_MESSAGE
    (attributes,) = _ATTRIBUTES.unpack_from(records, ATTRIBUTES_OFFSET)
    if version < 7 and attributes & COMPRESSION_MASK == CompressionType.ZSTD:
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    (batch_length,) = _BATCH_LENGTH.unpack_from(records, LENGTH_OFFSET)
    if LOG_OVERHEAD + batch_length < len(records):
        return ErrorCode.CORRUPT_MESSAGE  # more than one batch
    return None


def produce_response(
    request: k.ProduceRequest, errors: dict[tuple[str, int], int], results: dict[tuple[str, int], Any]
) -> k.ProduceResponse:
    def partition(topic: str, index: int) -> k.PartitionProduceResponse:
        result = results.get((topic, index))
        if result is None:
            return k.PartitionProduceResponse(
                index=k.i32(index),
                error_code=k.error(errors.get((topic, index), ErrorCode.UNKNOWN_SERVER_ERROR)),
                base_offset=k.i64(-1),
                log_append_time=None,
                log_start_offset=k.i64(-1),
            )
        return k.PartitionProduceResponse(
            index=k.i32(index),
            error_code=k.error(result.error_code),
            base_offset=k.i64(result.base_offset),
            log_append_time=k.append_time(result.log_append_time_ms),
            log_start_offset=k.i64(result.log_start_offset),
        )

    return k.ProduceResponse(
        responses=tuple(
            k.TopicProduceResponse(
                name=t.name, partition_responses=tuple(partition(t.name, p.index) for p in t.partition_data)
            )
            for t in request.topic_data
        ),
        throttle_time=_NO_THROTTLE,
    )


def fetch_response(request: k.FetchRequest, answer: FetchResponse) -> k.FetchResponse:
    found = {(p.topic, p.partition): p for p in answer.partitions}

    def partition(topic: str, wanted: k.FetchPartition) -> k.FetchPartitionData:
        result = found.get((topic, wanted.partition))
        if result is None:
            return _fetch_error(wanted.partition, ErrorCode.REQUEST_TIMED_OUT)
        if result.error_code is not ErrorCode.NONE:
            return _fetch_error(
                wanted.partition, result.error_code, result.high_watermark, result.log_start_offset
            )
        return k.FetchPartitionData(
            partition_index=wanted.partition,
            error_code=k.error(ErrorCode.NONE),
            high_watermark=k.i64(result.high_watermark),
            # No transactions: everything below the high watermark is stable.
            last_stable_offset=k.i64(result.high_watermark),
            log_start_offset=k.i64(result.log_start_offset),
            aborted_transactions=(),
            preferred_read_replica=k.BrokerId(-1),
            records=k.records(result.records),
        )

    return k.FetchResponse(
        throttle_time=_NO_THROTTLE,
        error_code=k.error(answer.error_code),
        session_id=k.i32(0),
        responses=tuple(
            k.FetchableTopicResponse(
                topic=t.topic, partitions=tuple(partition(t.topic, p) for p in t.partitions)
            )
            for t in request.topics
        ),
    )


def _fetch_error(
    partition: int, error: ErrorCode, high_watermark: int = -1, log_start_offset: int = -1
) -> k.FetchPartitionData:
    return k.FetchPartitionData(
        partition_index=k.i32(partition),
        error_code=k.error(error),
        high_watermark=k.i64(high_watermark),
        last_stable_offset=k.i64(high_watermark),
        log_start_offset=k.i64(log_start_offset),
        aborted_transactions=(),
        preferred_read_replica=k.BrokerId(-1),
        records=k.records(b""),
    )
