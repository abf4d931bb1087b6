"""The public asyncio producer: Kafka's ``KafkaProducer`` for actorlog.

    async with Producer("localhost:9092", config={"linger.ms": 5}) as producer:
        metadata = await producer.send("orders", b"value", key=b"key")      # waits for the ack
        future = producer.send_nowait("orders", b"more")                      # pipelined
        await producer.send_with_callback("orders", b"many", on_completion)   # Kafka's send(r, cb)
        await producer.flush()

Configuration uses Kafka's producer keys (``actors/clients/producer/config.py``): from a properties file
(``properties_file=``), a ``config={...}`` dict, and keyword arguments with underscores for dots
(``linger_ms=5``), later ones winning. ``enable.idempotence`` is on by default, so ``acks`` is
``all``. The credential comes from ``secret=`` (a ``ClientCredential``), else the properties'
``sasl.jaas.config``, else ``actorlog-data/client.properties`` (``ops/clients/connection.py``).

Theory of operation
-------------------
A ``ProducerActor`` (``actors/clients/producer/producer.py``) does the work on the client's own
actor system. This class is its edge:

* ``send_nowait`` creates the record's future and appends the record to a chunk; the chunk goes to
  the actor as one message at the end of the current event-loop turn (``call_soon``), or as soon as
  it holds 512 records, so a loop of sends costs a list append per record, not an actor message
  (``enqueue``/``send`` then give the loop one turn so the actor runs meanwhile);
* a small results actor receives ``ProducerResults`` (one message per batch group) and resolves the
  futures with ``RecordMetadata`` or the typed error (``actors/clients/producer/errors.py``);
* ``send_with_callback``/``send_nowait_with_callback`` are Kafka's ``send(record, callback)``: the
  record carries its callback instead of a future, and the results actor calls it directly with
  ``(metadata, None)`` or ``(None, error)``. A future costs an allocation, a done-callback and one
  event-loop turn per record; a tool sending hundreds of thousands of records a second (``perf
  produce``) cannot afford them. A callback that raises is logged, as Kafka's producer does;
* ``flush`` and ``close`` wait for the records outstanding at their call (futures and callback
  records alike), each completion ticking them off;
* backpressure: ``buffer.memory`` is enforced by the actor's buffer pool — a record that cannot get
  memory waits there, in order, and fails with ``BufferExhaustedError`` after ``max.block.ms``.
  ``send`` and ``enqueue`` also wait *here* (up to ``max.block.ms``) while the records handed over
  but not yet completed exceed ``buffer.memory``, so a fast sending loop cannot pile up records in
  memory without bound. ``send_nowait`` never waits: it is for callers that bound their own
  pipelining (or for a burst that fits);
* metadata (Kafka's ``waitOnMetadata``): ``send`` and ``enqueue`` take a record only once its topic
  is in the client's metadata, waiting up to ``max.block.ms`` for it — at the first send to a topic,
  and again after a refresh dropped the topic (deleted: the brokers answer
  UNKNOWN_TOPIC_OR_PARTITION). When that passes they raise ``ProducerTimeoutError`` naming why:
  no broker answered (which bootstrap servers), or the topic does not exist. So a sender against
  an unreachable cluster, or one whose topic was deleted, fails after ``max.block.ms`` instead of
  queueing records that can never go anywhere. ``send_nowait`` does not wait: its records wait in
  the actor and fail on their futures after ``max.block.ms``;
* ``flush`` brackets Kafka's ``flushInProgress`` (linger.ms is not waited for) around waiting for
  every record sent before it; ``close`` (also on leaving ``async with``) refuses new records,
  completes or fails everything pending, then stops the client node. Leaving ``async with`` because
  the task was cancelled (Ctrl-C in a tool) gives pending records ``_INTERRUPTED_CLOSE_S``, not the
  delivery timeout, then fails the rest: an interrupted caller is waiting for the process to end.

Errors: a configuration problem is ``ops.properties.ConfigError`` at construction; a misuse (a value
that is not bytes, a negative timestamp, sending before start) is ``TypeError``/``ValueError``/
``RuntimeError`` at the call; a send that fails is its future's ``ProducerError``; ``send``/``enqueue``
raise ``ProducerTimeoutError`` (metadata, see above) or ``BufferExhaustedError`` after ``max.block.ms``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Final, Protocol, TypeAlias

from actors.clients.metadata import ClientMetadata
from actors.clients.producer.config import ProducerConfig, ProducerConfigError
from actors.clients.producer.errors import (
    BufferExhaustedError,
    ProducerClosedError,
    ProducerError,
    ProducerTimeoutError,
)
from actors.clients.producer.producer import ProducerActor, ProducerStatistics
from actors.clients.producer.protocol import (
    AbortProducer,
    BeginFlush,
    CloseProducer,
    EndFlush,
    OutgoingRecord,
    PartitionsFor,
    PartitionsForResponse,
    ProducerResults,
    RecordMetadata,
    SendRecords,
)
from actors.common.errors import ErrorCode
from actors.common.names import producer_name, producer_results_name
from ops.clients.connection import (
    ClientCredential,
    ClientNode,
    load_client_properties,
    resolve_credential,
    resolve_ssl_context,
    split_connection_properties,
)
from ops.properties import ConfigError
from runtime.actor import Actor
from runtime.clock import Clock
from runtime.context import Context
from runtime.errors import TransportError
from runtime.ref import ActorRef
from runtime.storage.records import RecordHeader
from runtime.supervision import SupervisorStrategy
from runtime.system import ActorSystem
from runtime.transport.addresses import AddressBook

__all__ = ["ClientEndpoint", "Producer", "RecordMetadata", "SendCallback"]

SendCallback: TypeAlias = Callable[[RecordMetadata | None, ProducerError | None], None]
"""Kafka's ``Callback.onCompletion``: ``(metadata, None)`` once written, ``(None, error)`` if not."""

_log = logging.getLogger("actorlog.producer")
_names = itertools.count(1)
# What a record costs against buffer.memory in this edge's accounting: its key and value plus an
# allowance for the record and batch framing (an estimate; the actor's pool is the exact bound).
_RECORD_ALLOWANCE: Final = 64
# Records handed to the actor per message at most: a sending loop that never waits would otherwise
# build one unbounded chunk before the actor sees anything.
_CHUNK_RECORDS: Final = 512
# How long a close caused by cancellation (Ctrl-C, SIGTERM in a tool) lets pending records finish
# before failing them: the tools promise to end within a second of the signal.
_INTERRUPTED_CLOSE_S: Final = 0.3
# Builds a NamedTuple from a tuple of its fields, without the generated ``__new__``'s argument
# handling: the two made per record (OutgoingRecord, RecordMetadata) cost half as much this way.
_new_tuple: Final[Any] = tuple.__new__


class _YieldToLoop:
    """One trip through the event loop (what ``asyncio.sleep(0)`` does, without sleeping): lets
    the producer actor take the chunk just handed over while the caller keeps sending."""

    def __await__(self) -> Generator[None, None, None]:
        yield


class ClientEndpoint(Protocol):
    """Where a producer runs: a started actor system that can reach the bootstrap brokers
    (``ClientNode`` in production; tests may pass an in-process one)."""

    system: ActorSystem
    address_book: AddressBook

    @property
    def bootstrap_refs(self) -> tuple[ActorRef, ...]: ...


class _ResultsActor(Actor[ProducerResults]):
    """Resolves the producer's futures; runs on the client's loop, like the futures' owners."""

    def __init__(self, producer: Producer) -> None:
        self._producer = producer

    def receive(self, ctx: Context[ProducerResults], message: ProducerResults) -> None:
        self._producer._deliver(message)


class Producer:
    """An idempotent, batching producer (module docstring). Use as ``async with``."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        *,
        secret: str | ClientCredential | None = None,
        config: Mapping[str, object] | None = None,
        properties_file: str | os.PathLike[str] | None = None,
        node: ClientEndpoint | None = None,
        clock: Clock | None = None,
        **settings: object,
    ) -> None:
        properties: dict[str, object] = dict(load_client_properties(properties_file))
        properties.update(config or {})
        properties.update({key.replace("_", "."): value for key, value in settings.items()})
        if bootstrap_servers is not None:
            properties["bootstrap.servers"] = bootstrap_servers
        connection, properties = split_connection_properties(properties)
        try:
            self.config = ProducerConfig.from_properties(properties)
        except ProducerConfigError as error:
            raise ConfigError(str(error)) from None
        for note in self.config.notes:
            _log.info("producer %s: %s", self.config.client_id, note)
        if node is None:
            if secret is None:
                secret = resolve_credential(
                    {**{k: v for k, v in properties.items() if isinstance(v, str)}, **connection}
                )
            node = ClientNode(
                list(self.config.bootstrap_servers),
                secret=secret,
                client_id=self.config.client_id,
                clock=clock,
                ssl_context=resolve_ssl_context(connection),
            )
            self._owned_node: ClientNode | None = node
        else:
            self._owned_node = None
        self._node: ClientEndpoint = node
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wall_clock_ms: Callable[[], int] = self._node.system.clock.wall_clock_ms
        self._actor: ProducerActor | None = None
        self._producer_ref: ActorRef | None = None
        self._chunk: list[OutgoingRecord] = []
        self._handover_scheduled = False
        # Every record not completed yet (its future or callback completion), and the waits of
        # flush and close: each the records outstanding at its call, and what to resolve.
        self._outstanding: set[_Completion] = set()
        self._waits: list[tuple[set[_Completion], asyncio.Future[None]]] = []
        self._buffered_bytes = 0
        self._space = asyncio.Event()
        self._space.set()
        self._started = False
        self._closing = False
        self._stopped_reason: str | None = None
        # The producer actor's client metadata, once the actor has answered (it is created in the
        # actor's on_start): enqueue reads it to know whether a topic is known (module docstring).
        self._metadata: ClientMetadata | None = None

    # ----------------------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        interrupted = exc_type is not None and issubclass(
            exc_type, asyncio.CancelledError | KeyboardInterrupt
        )
        await self.close(_INTERRUPTED_CLOSE_S if interrupted else None)

    async def start(self) -> None:
        if self._started:
            return
        self._loop = asyncio.get_running_loop()
        if self._owned_node is not None:
            await self._owned_node.__aenter__()
        system = self._node.system
        self._wall_clock_ms = system.clock.wall_clock_ms
        number = next(_names)
        results = system.spawn(
            producer_results_name(number), lambda: _ResultsActor(self), supervision=SupervisorStrategy.stop()
        )

        def make_producer() -> ProducerActor:
            self._actor = ProducerActor(
                self.config,
                bootstrap=self._node.bootstrap_refs,
                results=results,
                address_book=self._node.address_book,
            )
            return self._actor

        # A failing producer stops (its on_stop fails whatever was pending) rather than restarting
        # with an empty state that would leave futures without an outcome.
        self._producer_ref = system.spawn(
            producer_name(self.config.client_id, number), make_producer, supervision=SupervisorStrategy.stop()
        )
        self._started = True

    async def close(self, timeout_s: float | None = None) -> None:
        """Kafka's ``close``: no new records; everything pending is sent (or, after ``timeout_s``,
        failed with ProducerClosedError); then the client node stops."""
        if not self._started or self._closing:
            return
        self._closing = True
        try:
            if self._stopped_reason is None:
                await self._close_actor(timeout_s)
        finally:
            self._fail_outstanding(ProducerClosedError("the producer is closed"))
            if self._owned_node is not None:
                await self._owned_node.__aexit__(None, None, None)

    async def _close_actor(self, timeout_s: float | None) -> None:
        self._hand_over()
        assert self._producer_ref is not None
        config = self.config
        # Everything pending resolves within these bounds, so "no timeout" still ends.
        bound_ms = config.max_block_ms + config.delivery_timeout_ms + config.request_timeout_ms
        timeout_ms = bound_ms if timeout_s is None else int(timeout_s * 1000)
        try:
            await self._node.system.ask(self._producer_ref, CloseProducer(), timeout_ms=max(timeout_ms, 1))
        except TransportError:
            self._node.system.tell(
                self._producer_ref, AbortProducer(reason=f"close timed out after {timeout_ms} ms")
            )
            await self._wait_outstanding()

    # --------------------------------------------------------------------------------- sends

    def send_nowait(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Iterable[tuple[str, bytes | None]] = (),
        timestamp_ms: int | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue a record; the future resolves with its RecordMetadata or fails with a ProducerError.
        Never waits (see the module docstring on backpressure)."""
        loop = self._loop
        if loop is None or self._producer_ref is None:
            raise RuntimeError("the producer is not started: use `async with Producer(...)`")
        future: asyncio.Future[RecordMetadata] = loop.create_future()
        self._queue(topic, value, key, partition, headers, timestamp_ms, future)
        return future

    def send_nowait_with_callback(
        self,
        topic: str,
        value: bytes | None,
        callback: SendCallback,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Iterable[tuple[str, bytes | None]] = (),
        timestamp_ms: int | None = None,
    ) -> None:
        """Queue a record whose outcome goes to ``callback(metadata, None)`` or ``callback(None,
        error)`` (Kafka's ``send(record, callback)``), called on the loop as the result arrives,
        without a future. Never waits."""
        if self._loop is None or self._producer_ref is None:
            raise RuntimeError("the producer is not started: use `async with Producer(...)`")
        self._queue(topic, value, key, partition, headers, timestamp_ms, _CallbackCompletion(callback))

    def _queue(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int | None,
        headers: Iterable[tuple[str, bytes | None]],
        timestamp_ms: int | None,
        completion: _Completion,
    ) -> None:
        if self._closing or self._stopped_reason is not None:
            _complete(
                completion,
                None,
                ProducerClosedError(self._stopped_reason or "cannot send after the producer is closed"),
            )
            return
        if type(value) is not bytes and value is not None:
            value = _as_bytes(value, "value")
        if type(key) is not bytes and key is not None:
            key = _as_bytes(key, "key")
        if type(topic) is not str or not topic:
            _check_topic(topic)
        if partition is None:
            partition = -1
        else:
            _check_partition(partition)
        if timestamp_ms is None:
            timestamp_ms = self._wall_clock_ms()
        elif timestamp_ms < 0:
            raise ValueError(f"invalid timestamp {timestamp_ms}: timestamps must be non-negative or None")
        record_headers = _headers(headers) if headers else ()
        chunk = self._chunk
        chunk.append(
            _new_tuple(
                OutgoingRecord, (topic, partition, key, value, record_headers, timestamp_ms, completion)
            )
        )
        self._outstanding.add(completion)
        self._buffered_bytes += (
            (0 if key is None else len(key)) + (0 if value is None else len(value)) + _RECORD_ALLOWANCE
        )
        if len(chunk) >= _CHUNK_RECORDS:
            self._hand_over()
        elif not self._handover_scheduled:
            self._handover_scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._hand_over)

    async def enqueue(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Iterable[tuple[str, bytes | None]] = (),
        timestamp_ms: int | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Kafka's blocking ``send``: wait (up to max.block.ms each) while buffer.memory is used up and
        until the topic is in the metadata, then queue the record and return the future of its
        acknowledgement; ``ProducerTimeoutError``/``BufferExhaustedError`` when a wait runs out.
        After every full chunk it gives the event loop one turn, so a loop of ``await enqueue(...)``
        keeps the actor fed."""
        if self._may_wait(topic):
            await self._wait_to_send(topic)
        future = self.send_nowait(topic, value, key, partition, headers, timestamp_ms)
        if not self._chunk:
            await _YieldToLoop()  # a chunk was just handed over
        return future

    async def send_with_callback(
        self,
        topic: str,
        value: bytes | None,
        callback: SendCallback,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Iterable[tuple[str, bytes | None]] = (),
        timestamp_ms: int | None = None,
    ) -> None:
        """Kafka's ``send(record, callback)``: waits as ``enqueue`` does, then queues the record;
        its outcome goes to ``callback`` (see ``send_nowait_with_callback``). A tool sending many
        records uses this: no future per record, and no event-loop turn per completion."""
        if self._may_wait(topic):
            await self._wait_to_send(topic)  # a coroutine only when it may wait: this runs per record
        self.send_nowait_with_callback(topic, value, callback, key, partition, headers, timestamp_ms)
        if not self._chunk:
            await _YieldToLoop()  # a chunk was just handed over

    def _may_wait(self, topic: str) -> bool:
        """Whether a send to ``topic`` may have to wait: buffer.memory used up, or the topic not in
        the metadata. Checked before making the waiting coroutine, which a send then rarely needs."""
        return self._buffered_bytes >= self.config.buffer_memory or not self._knows(topic)

    def _knows(self, topic: str) -> bool:
        metadata = self._metadata
        return metadata is not None and metadata.topic_info(topic) is not None

    async def _wait_to_send(self, topic: str) -> None:
        """Kafka's blocking part of ``send``: for buffer.memory, then for the topic's metadata."""
        if self._buffered_bytes >= self.config.buffer_memory:
            await self._wait_for_space()
        if type(topic) is str and topic and not self._knows(topic) and self._can_wait_on_metadata():
            await self.partitions_for(topic)

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Iterable[tuple[str, bytes | None]] = (),
        timestamp_ms: int | None = None,
    ) -> RecordMetadata:
        """Send one record and wait for its acknowledgement; raises a ProducerError on failure."""
        future = await self.enqueue(topic, value, key, partition, headers, timestamp_ms)
        return await future

    async def flush(self) -> None:
        """Send everything now and wait until every record sent before this call has completed
        (successfully or not: each future carries its own outcome)."""
        if self._producer_ref is None:
            return
        self._hand_over()
        if not self._outstanding:
            return
        system = self._node.system
        system.tell(self._producer_ref, BeginFlush())
        try:
            await self._wait_outstanding()
        finally:
            if self._stopped_reason is None:
                system.tell(self._producer_ref, EndFlush())

    async def partitions_for(self, topic: str) -> tuple[int, ...]:
        """The topic's partitions, from metadata (waiting up to max.block.ms for it; then
        ``ProducerTimeoutError`` saying why it is not there)."""
        if self._producer_ref is None:
            raise RuntimeError("the producer is not started: use `async with Producer(...)`")
        response = await self._node.system.ask(
            self._producer_ref, PartitionsFor(topic), timeout_ms=self.config.max_block_ms + 1_000
        )
        assert isinstance(response, PartitionsForResponse)
        if self._metadata is None and self._actor is not None:
            self._metadata = self._actor.sender.metadata  # it has answered, so it has started
        if isinstance(response.error, ProducerTimeoutError):
            raise ProducerTimeoutError(f"{response.error.message}: {self._metadata_condition(topic)}")
        if response.error is not None:
            raise response.error
        return response.partitions

    def statistics(self) -> ProducerStatistics | None:
        """The producer actor's snapshot (records sent, retries, errors, buffer use...)."""
        return None if self._actor is None else self._actor.statistics()

    # ------------------------------------------------------------------------------ internals

    def _can_wait_on_metadata(self) -> bool:
        """Whether ``enqueue`` should wait for a topic: not when the record will be refused anyway
        (a closed or unstarted producer; the caller checks for a topic that is not a name) —
        send_nowait says so at once."""
        return not self._closing and self._stopped_reason is None and self._producer_ref is not None

    def _metadata_condition(self, topic: str) -> str:
        """Why ``topic`` is not in the metadata after max.block.ms, in the words a user acts on.
        The actor's answer only says the wait ran out; the reason is in the client metadata it keeps
        (read here, on the loop both run on)."""
        metadata = self._metadata
        bootstrap = ",".join(self.config.bootstrap_servers)
        if metadata is None:
            return f"the producer has no metadata (bootstrap.servers={bootstrap})"
        if metadata.updates_total == 0:
            failed = metadata.failed_updates_total
            if failed == 0:
                return (
                    f"no broker answered: the metadata request to bootstrap server(s) {bootstrap} has had "
                    f"no answer yet (request.timeout.ms={self.config.request_timeout_ms})"
                )
            return f"no broker answered: bootstrap server(s) {bootstrap} unreachable ({failed} attempt(s))"
        code = metadata.topic_errors.get(topic)
        if code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return "no such topic (the brokers answer UNKNOWN_TOPIC_OR_PARTITION): deleted, or never created"
        if code is not None:
            return f"the brokers answer {code.name} for it"
        if metadata.last_successful_refresh_ms < metadata.last_refresh_ms:
            known = ", ".join(f"{b.broker_id} at {b.host}:{b.port}" for b in metadata.brokers.values())
            return f"the brokers stopped answering metadata requests (broker(s) {known or bootstrap})"
        return "the brokers' metadata does not list it"

    def _hand_over(self) -> None:
        self._handover_scheduled = False
        chunk = self._chunk
        if not chunk:
            return
        self._chunk = []
        assert self._producer_ref is not None
        self._node.system.tell(self._producer_ref, SendRecords(chunk))

    def _deliver(self, message: ProducerResults) -> None:
        outstanding = self._outstanding
        waits = self._waits
        released = 0
        for outcome in message.outcomes:
            # BatchOutcome.results() inlined: this loop runs once per record sent.
            error = outcome.error
            topic, partition, base = outcome.topic, outcome.partition, outcome.base_offset
            append_time = outcome.log_append_time_ms
            metadata: RecordMetadata | None = None
            for index, (completion, timestamp, key_size, value_size) in enumerate(outcome.records):
                released += max(0, key_size) + max(0, value_size)
                outstanding.discard(completion)
                if waits:
                    self._flushed(completion)
                if error is None:
                    metadata = _new_tuple(
                        RecordMetadata,
                        (
                            topic,
                            partition,
                            base + index if base >= 0 else -1,
                            append_time if append_time >= 0 else timestamp,
                            key_size,
                            value_size,
                        ),
                    )
                _complete(completion, metadata, error)  # type: ignore[arg-type]
            released += _RECORD_ALLOWANCE * len(outcome.records)
        self._buffered_bytes -= released
        if self._buffered_bytes < self.config.buffer_memory:
            self._space.set()
        if message.stopped and not self._closing:
            self._stopped_reason = "the producer stopped (see the log for why)"
            self._fail_outstanding(ProducerClosedError(self._stopped_reason))

    def _flushed(self, completion: object) -> None:
        """A record completed while someone waits for the records outstanding at their call."""
        for wait in list(self._waits):
            remaining, done = wait
            remaining.discard(completion)
            if not remaining:
                self._waits.remove(wait)
                if not done.done():
                    done.set_result(None)

    def _fail_outstanding(self, error: ProducerError) -> None:
        for record in self._chunk:
            completion: _Completion = record.completion  # type: ignore[assignment]
            self._outstanding.discard(completion)
            if self._waits:
                self._flushed(completion)
            _complete(completion, None, error)
        self._chunk = []
        for completion in list(self._outstanding):
            if self._waits:
                self._flushed(completion)
            _complete(completion, None, error)
        self._outstanding.clear()
        self._space.set()

    async def _wait_for_space(self) -> None:
        timeout_s = self.config.max_block_ms / 1000
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self._buffered_bytes >= self.config.buffer_memory:
            self._space.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise BufferExhaustedError(
                    "failed to allocate memory within the configured max blocking time "
                    f"{self.config.max_block_ms} ms ({self._buffered_bytes} bytes of records pending, "
                    f"buffer.memory={self.config.buffer_memory})"
                )
            try:
                await asyncio.wait_for(self._space.wait(), timeout=remaining)
            except TimeoutError:
                continue

    async def _wait_outstanding(self) -> None:
        """Until every record outstanding now has completed (later ones are not waited for)."""
        if not self._outstanding:
            return
        assert self._loop is not None
        done: asyncio.Future[None] = self._loop.create_future()
        wait = (set(self._outstanding), done)
        self._waits.append(wait)
        try:
            await done
        finally:
            if wait in self._waits:
                self._waits.remove(wait)


class _CallbackCompletion:
    """What a record sent with a callback completes (hashed by identity: one per record, even when
    every record shares one callback, so flush can tell them apart)."""

    __slots__ = ("callback",)

    def __init__(self, callback: SendCallback) -> None:
        self.callback = callback


_Completion: TypeAlias = "asyncio.Future[RecordMetadata] | _CallbackCompletion"


def _complete(completion: _Completion, metadata: RecordMetadata | None, error: ProducerError | None) -> None:
    """Hand a record's outcome to its future or its callback."""
    if type(completion) is _CallbackCompletion:
        try:
            completion.callback(metadata, error)
        except Exception:  # noqa: BLE001 - any error of the caller's code
            # As Kafka's producer does: a failing callback is logged, and the others still run.
            _log.exception("error in a send callback")
        return
    future: asyncio.Future[RecordMetadata] = completion  # type: ignore[assignment]
    if future.done():
        return  # cancelled by its caller; the record was produced regardless
    if error is None:
        assert metadata is not None
        future.set_result(metadata)
    else:
        future.set_exception(error)


def _check_topic(topic: object) -> None:
    # Callers are not always type-checked: a wrong type is caught here, not deep in the actor.
    if not isinstance(topic, str) or not topic:
        raise ValueError(f"topic must be a non-empty string, got {topic!r}")


def _check_partition(partition: object) -> None:
    if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
        raise ValueError(f"partition must be a non-negative integer or None, got {partition!r}")


def _headers(headers: Iterable[tuple[str, bytes | None]]) -> tuple[RecordHeader, ...]:
    converted = []
    for header_key, header_value in headers:
        if not isinstance(header_key, str):
            raise TypeError(f"a header key must be a string, got {type(header_key).__name__}")
        converted.append(
            RecordHeader(
                header_key, None if header_value is None else _as_bytes(header_value, "header value")
            )
        )
    return tuple(converted)


def _as_bytes(data: Any, what: str) -> bytes:
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"the record's {what} must be bytes (serialize it first), got {type(data).__name__}")
