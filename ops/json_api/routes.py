"""The JSON API: REST-proxy-style produce, read and metadata over HTTP, for people and other languages.

Routes (all JSON; the ``/v1`` ones need a client user's ``Authorization: Basic <user:password>``, or
the broker identity's ``Bearer <internal.auth.secret>``: ``ops/security/authenticator.py``)::

    GET  /openapi.json                                          the OpenAPI 3.1 document (open)
    GET  /v1/cluster                                            cluster id, controller, brokers
    GET  /v1/cluster/health?broker=                             under-replicated, under-min-ISR,
                                                                offline and rack-breaking partitions;
                                                                may broker N restart now
    GET  /v1/state-changes?since=&incarnation=&limit=           this broker's ISR state-change events
    GET  /v1/topics                                             topic names
    GET  /v1/topics/{topic}                                     partitions: leader, epoch, replicas, ISR
    GET  /v1/topics/{topic}/partitions/{partition}/offsets      log start offset, high watermark,
                                                                ?timestamp=: offsetsForTimes
    POST /v1/topics/{topic}/records                             produce (partition chosen per record)
    POST /v1/topics/{topic}/partitions/{partition}/records      produce to one partition
    GET  /v1/topics/{topic}/partitions/{partition}/records      read from an offset, below the HW

Theory of operation
-------------------
Handlers are thin: parse and validate (``model.py``, pure), then ask the actor system, then
shape the answer (``model.py`` again). Metadata comes from the local broker actor's metadata
cache (what the controller last sent); partitions are chosen here (``assign_partitions``), for
every ``acks``. Reads, offsets and acks=1/acks=0 produces go to the partition's leader, asking that
broker's ``broker`` actor directly (the node's address book knows every live broker): records for
one partition travel as one v2 record batch; one ProduceRequest per leader. acks=all produces go
through the JSON API's idempotent producer (``ops/clients/producer.py``, ``enable.idempotence``,
``linger.ms=0``): one per ``JsonApi``, on this broker's own actor system, made on first use and
closed by ``JsonApi.close``; each record goes with the partition and timestamp chosen here.

Retries are only those that cannot duplicate or lose anything:

* produce with acks=all: the producer's own, as for every client: a batch is sent again with its
  producer id and sequence numbers, so a leader that already has it (the first attempt landed,
  then the answer was NOT_LEADER_OR_FOLLOWER, a timeout, or lost) answers with the original offsets
  instead of appending it twice. The answer waits until the request's deadline (``timeout_ms`` +
  the broker's ``request.timeout.ms``); a record not acknowledged by then is REQUEST_TIMED_OUT and
  may or may not have been written (the producer keeps delivering it, idempotently, until its
  ``delivery.timeout.ms``). Too few in-sync replicas and a missing leader are retriable for the
  producer, as in Kafka, so such records end as REQUEST_TIMED_OUT at the deadline;
* produce with acks=1 (and acks=0): a partition answered NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE
  or UNKNOWN_TOPIC_OR_PARTITION by the broker we thought led it, or had no leader, or that broker's
  ``broker`` actor was gone: the batch is sent again to the leader the refreshed metadata names,
  after ``retry_backoff_ms``, until the request's deadline. This is safe because an acks=1 leader
  answers at once, nothing is parked: those answers mean nothing was appended. (An acks=all leader
  that loses leadership answers a produce it has parked, appended and waiting for the ISR,
  NOT_LEADER_OR_FOLLOWER, and the new leader may keep that batch: hence the producer for acks=all.)
  A timeout or a lost connection is *not* retried: the outcome is unknown (REQUEST_TIMED_OUT /
  NETWORK_EXCEPTION);
* reads and offsets: any invalid-metadata error (the leader moved, epochs disagree) or an
  unreachable leader is retried the same way, so reads follow the current leader.

Errors are ``{"error_code", "error", "message"}`` with Kafka's numbers and names, the shape of every
actorlog HTTP error (``runtime/transport/http.py``): 4xx for the caller's mistakes, 503 for
retriable conditions, 500/502 only when the server (or a peer broker) itself failed; never a
traceback. A produce with failed records answers the first failure's status, and still lists every
record's outcome.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import orjson
from aiohttp import web

from actors.clients.producer.errors import ProducerError
from actors.common.errors import ErrorCode
from actors.common.names import ADMIN_ACTOR_NAME, BROKER_ACTOR_NAME, broker_node
from actors.common.protocol import (
    CONSUMER_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    TopicMetadata,
)
from ops.clients.producer import Producer, RecordMetadata
from ops.cluster_health import gather_cluster_health, health_body
from ops.json_api.model import (
    MAX_RECORDS_PER_REQUEST,
    ApiError,
    PartitionBatch,
    ProduceInput,
    RecordOutcome,
    assign_partitions,
    build_partition_batches,
    cluster_body,
    decode_fetched_records,
    error_body,
    offsets_body,
    outcome_of_delivery,
    outcomes_of_batch,
    parse_health_query,
    parse_offsets_query,
    parse_partition,
    parse_produce_body,
    parse_read_query,
    parse_state_changes_query,
    parse_topic,
    partition_of,
    produce_response,
    read_body,
    reject_query,
    topic_body,
    topics_body,
)
from ops.json_api.schema import openapi_document
from ops.security.authenticator import Authenticator
from ops.wiring import BrokerNode
from runtime.clock import Clock
from runtime.errors import (
    AskTimeoutError,
    CoordinationError,
    PeerUnavailableError,
    RemoteRequestError,
    UnknownActorError,
)
from runtime.ref import ActorRef
from runtime.system import ActorSystem
from runtime.transport.addresses import AddressBook
from runtime.transport.http import BodyTimeoutError

__all__ = ["JsonApi", "json_api_routes"]

_log = logging.getLogger("actorlog.json_api")

T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
NodeHandler = Callable[[web.Request, BrokerNode], Awaitable[web.Response]]

# Kafka's retry.backoff.ms.
DEFAULT_RETRY_BACKOFF_MS: Final = 100
# How long ``close`` lets the acks=all producer finish what it holds (answers on their way) before
# failing the rest (BROKER_NOT_AVAILABLE, may or may not have been written). Short: a stopping
# broker spends it before its controlled shutdown, within the pod's grace period.
DEFAULT_CLOSE_TIMEOUT_MS: Final = 5_000
# Broker answers after which an acks=1 (or acks=0) produce batch was certainly not appended: safe
# to send again. Not for acks=all (module docstring).
_PRODUCE_RETRIABLE: Final = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.BROKER_NOT_AVAILABLE,
    }
)
_READ_RETRIABLE: Final = frozenset(
    e for e in ErrorCode if e.invalid_metadata or e is ErrorCode.OFFSET_NOT_AVAILABLE
) | frozenset({ErrorCode.BROKER_NOT_AVAILABLE})


def json_api_routes(
    node: Callable[[], BrokerNode | None], *, secret: str, max_body_bytes: int
) -> list[web.RouteDef]:
    """The JSON API's routes for a broker's HttpServer; ``node`` is the running node (None while
    it starts, when /v1 answers 503). Nobody closes this ``JsonApi``'s acks=all producer: a
    server that stops before its node makes a ``JsonApi`` and calls ``close`` (``broker_main``)."""
    return JsonApi(node, secret=secret, max_body_bytes=max_body_bytes).routes()


def _json(status: int, body: object, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, body=orjson.dumps(body), content_type="application/json", headers=headers
    )


def _error(error: ApiError) -> web.Response:
    headers = {"Retry-After": "1"} if error.status == 503 else None
    return _json(error.status, error_body(error.error, error.message), headers)


def _broker_ref(broker_id: int) -> ActorRef:
    return ActorRef(node_id=broker_node(broker_id), name=BROKER_ACTOR_NAME)


@dataclass(slots=True)
class _ThisBroker:
    """The broker's node as the ``ClientEndpoint`` of the JSON API's producer: its actor system,
    its address book, and its own broker actor as the one bootstrap server."""

    system: ActorSystem
    address_book: AddressBook
    bootstrap_refs: tuple[ActorRef, ...]


class JsonApi:
    def __init__(
        self,
        node: Callable[[], BrokerNode | None],
        *,
        secret: str,
        max_body_bytes: int,
        authenticator: Authenticator | None = None,
        max_records_per_request: int = MAX_RECORDS_PER_REQUEST,
        retry_backoff_ms: int = DEFAULT_RETRY_BACKOFF_MS,
        close_timeout_ms: int = DEFAULT_CLOSE_TIMEOUT_MS,
    ) -> None:
        if not secret:
            raise ValueError("the JSON API needs internal.auth.secret")
        self._node = node
        self._authenticator = authenticator or Authenticator(internal_secret=secret, users=None)
        self.max_body_bytes = max_body_bytes
        self.max_records_per_request = max_records_per_request
        self.retry_backoff_ms = retry_backoff_ms
        self.close_timeout_ms = close_timeout_ms
        # Per topic: which available partition the next request's unkeyed records go to.
        self._rotation: dict[str, int] = {}
        self._openapi_body = orjson.dumps(openapi_document())
        # acks=all: the idempotent producer and the node it runs on (module docstring).
        self._producer: Producer | None = None
        self._producer_node: BrokerNode | None = None
        self._producer_lock = asyncio.Lock()
        self._closed = False

    def routes(self) -> list[web.RouteDef]:
        partition = "/v1/topics/{topic}/partitions/{partition}"
        return [
            web.get("/openapi.json", self._openapi, allow_head=False),
            web.get("/v1/cluster", self._guard(self._cluster), allow_head=False),
            web.get("/v1/cluster/health", self._guard(self._cluster_health), allow_head=False),
            web.get("/v1/state-changes", self._guard(self._state_changes), allow_head=False),
            web.get("/v1/topics", self._guard(self._topics), allow_head=False),
            web.get("/v1/topics/{topic}", self._guard(self._topic), allow_head=False),
            web.get(f"{partition}/offsets", self._guard(self._offsets), allow_head=False),
            web.post("/v1/topics/{topic}/records", self._guard(self._produce_to_topic)),
            web.post(f"{partition}/records", self._guard(self._produce_to_partition)),
            web.get(f"{partition}/records", self._guard(self._read), allow_head=False),
        ]

    async def close(self) -> None:
        """Close the acks=all producer: what it holds is delivered, or failed after
        ``close_timeout_ms``. Later acks=all produces answer 503 BROKER_NOT_AVAILABLE. Call it
        while the node still runs (``ops/broker_main.py`` does, before the node stops)."""
        self._closed = True
        async with self._producer_lock:
            producer, node = self._producer, self._producer_node
            self._producer = self._producer_node = None
        if producer is None or node is None or node.system.closing:
            return  # never made, or its node is stopping, and its actors with it
        await producer.close(timeout_s=self.close_timeout_ms / 1000)

    # ------------------------------------------------------------------------------ the edge

    async def _authorised(self, request: web.Request) -> bool:
        return await self._authenticator.authenticate(request.headers.get("Authorization", "")) is not None

    def _guard(self, handler: NodeHandler) -> Handler:
        """Authentication, then the handler; every failure becomes a JSON error body."""

        @functools.wraps(handler)
        async def guarded(request: web.Request) -> web.StreamResponse:
            try:
                authorised = await self._authorised(request)
            except CoordinationError as error:
                return _error(
                    ApiError(503, ErrorCode.NETWORK_EXCEPTION, f"cannot check the credential now: {error}")
                )
            if not authorised:
                return _json(
                    401,
                    error_body(
                        ErrorCode.SASL_AUTHENTICATION_FAILED,
                        "missing or wrong credential (Authorization: Basic <user:password> of a user made "
                        "with `actorlog users`)",
                    ),
                    {"WWW-Authenticate": 'Basic realm="actorlog"'},
                )
            try:
                node = self._node()
                if node is None:
                    raise ApiError(503, ErrorCode.BROKER_NOT_AVAILABLE, "the broker is starting")
                return await handler(request, node)
            except ApiError as error:
                return _error(error)
            except AskTimeoutError as error:
                return _error(ApiError.of(ErrorCode.REQUEST_TIMED_OUT, str(error)))
            except UnknownActorError as error:
                return _error(ApiError.of(ErrorCode.BROKER_NOT_AVAILABLE, str(error)))
            except PeerUnavailableError as error:
                return _error(ApiError.of(ErrorCode.NETWORK_EXCEPTION, str(error)))
            except RemoteRequestError as error:
                return _error(_remote_failure(error))
            except Exception as error:  # noqa: BLE001 - a server failure is a 500 body, not a traceback
                _log.exception("JSON API %s %s failed", request.method, request.path)
                return _error(
                    ApiError(500, ErrorCode.UNKNOWN_SERVER_ERROR, f"internal error: {type(error).__name__}")
                )

        return guarded

    async def _openapi(self, request: web.Request) -> web.Response:
        return web.Response(body=self._openapi_body, content_type="application/json")

    # ------------------------------------------------------------------------------ metadata

    async def _cluster(self, request: web.Request, node: BrokerNode) -> web.Response:
        reject_query(request.query)
        return _json(200, cluster_body(await self._metadata(node, ())))

    async def _cluster_health(self, request: web.Request, node: BrokerNode) -> web.Response:
        """This broker's metadata cache and its admin actor's topic configs, assessed by
        ``ops/cluster_health.py`` (the code path ``actorlog cluster health`` takes too)."""
        broker = parse_health_query(request.query)
        refs = {BROKER_ACTOR_NAME: node.broker, ADMIN_ACTOR_NAME: node.admin}

        async def ask(actor: str, message: object) -> object:
            return await node.system.ask(refs[actor], message, timeout_ms=node.config.request_timeout_ms)

        return _json(200, health_body(await gather_cluster_health(ask, broker=broker)))

    async def _state_changes(self, request: web.Request, node: BrokerNode) -> web.Response:
        query = parse_state_changes_query(request.query)
        ring = node.state_changes
        if ring is None:
            raise ApiError.of(ErrorCode.BROKER_NOT_AVAILABLE, "this broker keeps no state-change events")
        answer = ring.since(query.since, query.incarnation, query.limit)
        return _json(200, answer.document())

    async def _topics(self, request: web.Request, node: BrokerNode) -> web.Response:
        reject_query(request.query)
        return _json(200, topics_body(await self._metadata(node, None)))

    async def _topic(self, request: web.Request, node: BrokerNode) -> web.Response:
        topic = parse_topic(request.match_info["topic"])
        reject_query(request.query)
        return _json(200, topic_body(await self._topic_metadata(node, topic)))

    async def _metadata(self, node: BrokerNode, topics: tuple[str, ...] | None) -> MetadataResponse:
        response = await node.system.ask(
            node.broker,
            MetadataRequest(topics=topics, allow_auto_topic_creation=False),
            timeout_ms=node.config.request_timeout_ms,
        )
        return _expect(response, MetadataResponse)

    async def _topic_metadata(self, node: BrokerNode, topic: str) -> TopicMetadata:
        metadata = await self._metadata(node, (topic,))
        found = next((t for t in metadata.topics if t.name == topic), None)
        if found is None or found.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise ApiError(404, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic} does not exist")
        if found.error_code is not ErrorCode.NONE:
            raise ApiError.of(found.error_code, f"metadata of topic {topic}: {found.error_code.name}")
        return found

    # --------------------------------------------------------------------- leader round trips

    async def _backoff(self, node: BrokerNode, deadline_ms: int) -> bool:
        """Wait ``retry_backoff_ms`` on the node's clock; False (no wait) if that passes the deadline."""
        clock = node.system.clock
        if clock.now_ms() + self.retry_backoff_ms > deadline_ms:
            return False
        waited: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not waited.done():
                waited.set_result(None)

        handle = clock.call_later(self.retry_backoff_ms, wake)
        try:
            await waited
        finally:
            handle.cancel()
        return True

    async def _at_leader(
        self,
        node: BrokerNode,
        topic: str,
        partition: int,
        attempt: Callable[[PartitionMetadata], Awaitable[T]],
        *,
        deadline_ms: int,
    ) -> T:
        """``attempt`` at the partition's current leader, retried while the leader is moving."""
        while True:
            leader = partition_of(await self._topic_metadata(node, topic), partition)
            try:
                if leader.leader < 0:
                    raise ApiError.of(ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{partition} has no leader")
                try:
                    return await attempt(leader)
                except (PeerUnavailableError, UnknownActorError) as error:
                    raise ApiError.of(ErrorCode.BROKER_NOT_AVAILABLE, str(error)) from None
            except ApiError as error:
                if error.error not in _READ_RETRIABLE or not await self._backoff(node, deadline_ms):
                    raise

    # -------------------------------------------------------------------------------- offsets

    async def _offsets(self, request: web.Request, node: BrokerNode) -> web.Response:
        topic = parse_topic(request.match_info["topic"])
        partition = parse_partition(request.match_info["partition"])
        for_timestamp = parse_offsets_query(request.query)
        timeout_ms = node.config.request_timeout_ms
        timestamps: tuple[int, ...] = (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP)
        if for_timestamp is not None:
            timestamps = (*timestamps, for_timestamp)

        async def list_offsets(leader: PartitionMetadata) -> list[ListOffsetsPartitionResponse]:
            found: list[ListOffsetsPartitionResponse] = []
            for timestamp in timestamps:
                wanted = ListOffsetsPartition(
                    topic=topic, partition=partition, timestamp=timestamp,
                    current_leader_epoch=leader.leader_epoch,
                )  # fmt: skip
                response = await node.system.ask(
                    _broker_ref(leader.leader),
                    ListOffsetsRequest(replica_id=CONSUMER_REPLICA_ID, partitions=(wanted,)),
                    timeout_ms=timeout_ms,
                )
                result = _expect(response, ListOffsetsResponse).partitions[0]
                if result.error_code is not ErrorCode.NONE:
                    raise ApiError.of(
                        result.error_code,
                        f"{topic}-{partition} at broker {leader.leader}: {result.error_code.name}",
                    )
                found.append(result)
            return found

        deadline_ms = node.system.clock.now_ms() + timeout_ms
        found = await self._at_leader(node, topic, partition, list_offsets, deadline_ms=deadline_ms)
        return _json(
            200,
            offsets_body(
                topic,
                partition,
                found[0].offset,
                found[1].offset,
                found[2] if for_timestamp is not None else None,
            ),
        )

    # ----------------------------------------------------------------------------------- read

    async def _read(self, request: web.Request, node: BrokerNode) -> web.Response:
        topic = parse_topic(request.match_info["topic"])
        partition = parse_partition(request.match_info["partition"])
        query = parse_read_query(request.query)
        timeout_ms = query.timeout_ms + node.config.request_timeout_ms

        async def fetch(leader: PartitionMetadata) -> FetchPartitionResponse:
            wanted = FetchPartition(
                topic=topic, partition=partition, fetch_offset=query.offset,
                partition_max_bytes=query.max_bytes, current_leader_epoch=leader.leader_epoch,
            )  # fmt: skip
            request = FetchRequest(
                replica_id=CONSUMER_REPLICA_ID,
                max_wait_ms=query.timeout_ms,
                min_bytes=1,
                max_bytes=query.max_bytes,
                partitions=(wanted,),
            )
            response = await node.system.ask(_broker_ref(leader.leader), request, timeout_ms=timeout_ms)
            data = _expect(response, FetchResponse).partitions[0]
            if data.error_code is ErrorCode.OFFSET_OUT_OF_RANGE:
                raise ApiError.of(
                    data.error_code,
                    f"offset {query.offset} is out of range for {topic}-{partition}"
                    + (f" (log start offset {data.log_start_offset})" if data.log_start_offset >= 0 else ""),
                )
            if data.error_code is not ErrorCode.NONE:
                raise ApiError.of(
                    data.error_code, data.error_message or f"{topic}-{partition}: {data.error_code.name}"
                )
            return data

        deadline_ms = node.system.clock.now_ms() + timeout_ms
        data = await self._at_leader(node, topic, partition, fetch, deadline_ms=deadline_ms)
        records, next_offset = decode_fetched_records(
            data.records, offset=query.offset, max_records=query.max_records
        )
        body = read_body(
            topic,
            partition,
            records,
            next_offset=next_offset,
            high_watermark=data.high_watermark,
            log_start_offset=data.log_start_offset,
            fmt=query.format,
        )
        return _json(200, body)

    # -------------------------------------------------------------------------------- produce

    async def _produce_to_topic(self, request: web.Request, node: BrokerNode) -> web.Response:
        return await self._produce(request, node, path_partition=None)

    async def _produce_to_partition(self, request: web.Request, node: BrokerNode) -> web.Response:
        partition = parse_partition(request.match_info["partition"])
        return await self._produce(request, node, path_partition=partition)

    async def _produce(
        self, request: web.Request, node: BrokerNode, *, path_partition: int | None
    ) -> web.Response:
        topic = parse_topic(request.match_info["topic"])
        reject_query(request.query)
        if request.content_type != "application/json":
            raise ApiError(
                415,
                ErrorCode.INVALID_REQUEST,
                f"Content-Type must be application/json, not {request.content_type}",
            )
        body = await self._read_body(request)
        produce = parse_produce_body(
            body, max_records=self.max_records_per_request, partition_in_path=path_partition is not None
        )
        metadata = await self._topic_metadata(node, topic)
        rotation = self._rotation.get(topic, 0)
        self._rotation[topic] = rotation + 1
        partitions = assign_partitions(
            produce.records,
            partition_count=len(metadata.partitions),
            available=sorted(p.partition for p in metadata.partitions if p.leader >= 0),
            rotation=rotation,
            path_partition=path_partition,
        )
        batches = build_partition_batches(
            produce.records,
            partitions,
            now_ms=node.system.clock.wall_clock_ms(),
            encode=produce.acks != -1,  # acks=all: the producer makes its own batches
        )
        outcomes = await self._send(node, topic, metadata, batches, produce)
        status, answer = produce_response(topic, batches, outcomes)
        return _json(status, answer, {"Retry-After": "1"} if status == 503 else None)

    async def _read_body(self, request: web.Request) -> bytes:
        limit = self.max_body_bytes
        too_large = ApiError(
            413, ErrorCode.MESSAGE_TOO_LARGE, f"request body exceeds socket.request.max.bytes ({limit} bytes)"
        )
        if request.content_length is not None and request.content_length > limit:
            raise too_large
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in request.content.iter_any():
                size += len(chunk)
                if size > limit:
                    raise too_large
                chunks.append(chunk)
        except BodyTimeoutError as error:
            # The server's body timeout (HttpServer): nothing was parsed, nothing is written.
            raise ApiError(408, ErrorCode.REQUEST_TIMED_OUT, str(error)) from None
        return b"".join(chunks)

    async def _send(
        self,
        node: BrokerNode,
        topic: str,
        metadata: TopicMetadata,
        batches: list[PartitionBatch],
        produce: ProduceInput,
    ) -> dict[int, list[RecordOutcome]]:
        """acks=all: through the idempotent producer. Otherwise every batch to its partition's
        leader, one ProduceRequest per leader, concurrently; batches refused without being appended
        go again to the new leader (module docstring)."""
        if produce.acks == -1:
            return await self._send_idempotent(node, topic, batches, produce)
        deadline_ms = node.system.clock.now_ms() + produce.timeout_ms + node.config.request_timeout_ms
        outcomes: dict[int, list[RecordOutcome]] = {}
        pending = {batch.partition: batch for batch in batches}
        while True:
            leaders = {p.partition: p.leader for p in metadata.partitions}
            by_leader: dict[int, list[PartitionBatch]] = {}
            answers: dict[int, ProducePartitionResponse | None] = {}
            for partition, batch in pending.items():
                leader = leaders.get(partition, -1)
                if leader < 0:
                    answers[partition] = _failure(
                        topic, partition, ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{partition} has no leader"
                    )
                else:
                    by_leader.setdefault(leader, []).append(batch)
            for answered in await asyncio.gather(
                *(
                    self._produce_at(node, leader, topic, group, produce)
                    for leader, group in by_leader.items()
                )
            ):
                answers.update(answered)
            retry: dict[int, PartitionBatch] = {}
            for partition, answer in answers.items():
                if answer is not None and answer.error_code in _PRODUCE_RETRIABLE:
                    retry[partition] = pending[partition]
                else:
                    outcomes[partition] = outcomes_of_batch(pending[partition], answer, acks=produce.acks)
            if not retry:
                return outcomes
            if not await self._backoff(node, deadline_ms):
                for partition, batch in retry.items():
                    outcomes[partition] = outcomes_of_batch(batch, answers[partition], acks=produce.acks)
                return outcomes
            pending = retry
            metadata = await self._topic_metadata(node, topic)

    async def _send_idempotent(
        self, node: BrokerNode, topic: str, batches: list[PartitionBatch], produce: ProduceInput
    ) -> dict[int, list[RecordOutcome]]:
        """Every record to the idempotent producer, with the partition and timestamp chosen here;
        the outcomes known by the request's deadline (module docstring)."""
        producer = await self._idempotent_producer(node)
        clock = node.system.clock
        waited_ms = produce.timeout_ms + node.config.request_timeout_ms
        deadline_ms = clock.now_ms() + waited_ms
        deliveries: dict[int, list[asyncio.Future[RecordMetadata]]] = {}
        for batch in batches:
            futures = deliveries[batch.partition] = []
            for index, timestamp in zip(batch.indexes, batch.timestamps, strict=True):
                record = produce.records[index]
                future = producer.send_nowait(
                    topic,
                    record.value,
                    key=record.key,
                    partition=batch.partition,
                    headers=[(header.key, header.value) for header in record.headers],
                    timestamp_ms=timestamp,
                )
                future.add_done_callback(_retrieve)
                futures.append(future)
        await _wait_for_all(clock, deadline_ms, [f for futures in deliveries.values() for f in futures])
        return {
            partition: [outcome_of_delivery(partition, _delivered(f), waited_ms=waited_ms) for f in futures]
            for partition, futures in deliveries.items()
        }

    async def _idempotent_producer(self, node: BrokerNode) -> Producer:
        """The acks=all producer, made on first use on ``node`` (again if the node was restarted:
        the old one stopped with the old node's actors)."""
        async with self._producer_lock:
            if self._closed:
                raise ApiError.of(ErrorCode.BROKER_NOT_AVAILABLE, "the broker is shutting down")
            producer = self._producer
            if producer is None or self._producer_node is not node:
                producer = Producer(
                    node=_ThisBroker(node.system, node.address_book, (node.broker,)),
                    config={
                        "bootstrap.servers": _own_address(node),
                        "client.id": f"json-api-{node.config.broker_id}",
                        "enable.idempotence": True,
                        "acks": "all",
                        "linger.ms": 0,
                        "retry.backoff.ms": self.retry_backoff_ms,
                        "request.timeout.ms": node.config.request_timeout_ms,
                    },
                )
                await producer.start()
                self._producer, self._producer_node = producer, node
            return producer

    async def _produce_at(
        self, node: BrokerNode, leader: int, topic: str, group: list[PartitionBatch], produce: ProduceInput
    ) -> dict[int, ProducePartitionResponse | None]:
        """One ProduceRequest to ``leader``'s broker actor; per partition its answer (None: acks=0,
        which Kafka's broker never answers, so it is a tell)."""
        request = ProduceRequest(
            acks=produce.acks,
            timeout_ms=produce.timeout_ms,
            partitions=tuple(
                ProducePartitionData(topic=topic, partition=batch.partition, records=batch.records)
                for batch in group
            ),
        )
        partitions = [batch.partition for batch in group]
        if produce.acks == 0:
            node.system.tell(_broker_ref(leader), request)
            return dict.fromkeys(partitions)
        unknown_outcome = " (the records may or may not have been written)"
        try:
            response = await node.system.ask(
                _broker_ref(leader), request, timeout_ms=produce.timeout_ms + node.config.request_timeout_ms
            )
        except AskTimeoutError as error:
            return _failures(topic, partitions, ErrorCode.REQUEST_TIMED_OUT, str(error) + unknown_outcome)
        except UnknownActorError as error:
            return _failures(topic, partitions, ErrorCode.BROKER_NOT_AVAILABLE, str(error))
        except PeerUnavailableError as error:
            return _failures(topic, partitions, ErrorCode.NETWORK_EXCEPTION, str(error) + unknown_outcome)
        except RemoteRequestError as error:
            failure = _remote_failure(error)
            return _failures(topic, partitions, failure.error, f"broker {leader}: {failure.message}")
        answered = {p.partition: p for p in _expect(response, ProduceResponse).partitions if p.topic == topic}
        return {
            partition: answered.get(partition)
            or _failure(
                topic, partition, ErrorCode.UNKNOWN_SERVER_ERROR, f"broker {leader} did not answer it"
            )
            for partition in partitions
        }


def _own_address(node: BrokerNode) -> str:
    """This broker's advertised ``host:port``: the producer's ``bootstrap.servers``, for its
    configuration only (it reaches the broker through ``_ThisBroker.bootstrap_refs``)."""
    url = node.address_book.resolve(broker_node(node.config.broker_id))
    assert url is not None, "the node records its own address before it starts"
    return url.split("://", 1)[-1]


async def _wait_for_all(clock: Clock, deadline_ms: int, futures: Sequence[asyncio.Future[Any]]) -> None:
    """Until every future is done, or ``clock`` reaches ``deadline_ms``."""
    pending = [future for future in futures if not future.done()]
    if not pending:
        return
    finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    remaining = len(pending)

    def one_done(_: asyncio.Future[Any]) -> None:
        nonlocal remaining
        remaining -= 1
        if remaining == 0 and not finished.done():
            finished.set_result(None)

    def expire() -> None:
        if not finished.done():
            finished.set_result(None)

    for future in pending:
        future.add_done_callback(one_done)
    handle = clock.call_later(max(deadline_ms - clock.now_ms(), 0), expire)
    try:
        await finished
    finally:
        handle.cancel()
        for future in pending:
            future.remove_done_callback(one_done)


def _retrieve(future: asyncio.Future[RecordMetadata]) -> None:
    """Read a delivery's outcome when it comes (it may come after the answer was sent), so that
    asyncio never reports an exception as not retrieved."""
    if not future.cancelled():
        future.exception()


def _delivered(future: asyncio.Future[RecordMetadata]) -> RecordMetadata | ProducerError | None:
    """A delivery's outcome; None while it is still pending."""
    if not future.done() or future.cancelled():
        return None
    error = future.exception()
    if error is None:
        return future.result()
    if isinstance(error, ProducerError):
        return error
    return ProducerError(f"the producer failed: {type(error).__name__}: {error}")


def _failure(topic: str, partition: int, error: ErrorCode, message: str) -> ProducePartitionResponse:
    return ProducePartitionResponse(topic=topic, partition=partition, error_code=error, error_message=message)


def _failures(
    topic: str, partitions: list[int], error: ErrorCode, message: str
) -> dict[int, ProducePartitionResponse | None]:
    return {partition: _failure(topic, partition, error, message) for partition in partitions}


def _remote_failure(error: RemoteRequestError) -> ApiError:
    """A peer broker answered our internal request with an HTTP error: retriable if it was
    unavailable, otherwise a server-side failure (a misconfigured peer is not the caller's fault)."""
    if error.status == 503:
        return ApiError.of(ErrorCode.NETWORK_EXCEPTION, error.message)
    return ApiError(
        502, ErrorCode.UNKNOWN_SERVER_ERROR, f"a peer broker answered HTTP {error.status}: {error.message}"
    )


def _expect(response: Any, kind: type[T]) -> T:
    if not isinstance(response, kind):
        raise ApiError(
            500, ErrorCode.UNKNOWN_SERVER_ERROR, f"expected a {kind.__name__}, got {type(response).__name__}"
        )
    return response
