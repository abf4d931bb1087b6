"""A campaign's clients: concurrent writers and readers whose every operation goes to the history.

Writers (each a logical process of the history; values unique per writer: ``<writer>-<n>``):

* ``ProducerWriter``: the project's idempotent ``Producer`` (acks as the campaign says), sending
  to explicit partitions round robin with at most ``in_flight`` records outstanding. A send that
  completes with metadata is ``ok`` with its offset; one that fails is ``info`` (indeterminate:
  after retries a producer cannot know whether an attempt landed).
* ``JsonApiWriter``: small batches through the JSON API (``POST .../partitions/P/records``), to a
  broker picked in turn. Each record is one operation: ``ok`` with the offset the answer names;
  an error the API says may or may not have been written, a timeout or a lost connection is
  ``info``; any other refusal (nothing was appended) is ``fail``.

Readers: a ``Consumer`` assigned every partition from the beginning, polling; each poll is one
operation (``ok`` with what it read, ``info`` when it failed). A reader whose consumer failed
starts a new one as a new process (Jepsen's rule: a crashed client is a new process).

Every client takes ``connection``, the cluster's connection keys (``security.protocol`` and, over
TLS, ``ssl.truststore.location``); the JSON API writer is given the brokers' base URLs
(``https://`` over TLS) and the context that verifies them.

Nothing here decides correctness: the checker reads the history afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import aiohttp
import orjson

from actors.clients.producer.errors import ProducerError, ProducerTimeoutError
from actors.common.errors import KafkaError
from actors.common.types import TopicPartition
from ops.clients.consumer import Consumer
from ops.clients.producer import Producer, RecordMetadata
from ops.verify.history import HistoryWriter, Operation

__all__ = ["JsonApiWriter", "ProducerWriter", "Reader", "WorkloadStats", "history_key"]

_log = logging.getLogger("actorlog.verify")
# Errors that mean the broker refused a JSON API record before appending it. Any other error (a
# timeout, a lost connection, NOT_ENOUGH_REPLICAS_AFTER_APPEND, a leader that moved while waiting for
# acks=all) leaves the outcome unknown: the record may be in the log, so the operation is ``info``.
_REFUSED = frozenset(
    {
        "NOT_ENOUGH_REPLICAS",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "INVALID_REQUEST",
        "INVALID_RECORD",
        "CORRUPT_MESSAGE",
        "MESSAGE_TOO_LARGE",
        "RECORD_LIST_TOO_LARGE",
        "POLICY_VIOLATION",
    }
)


def history_key(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


@dataclass
class WorkloadStats:
    """Acknowledgements so far: the campaign reads it at the fault window's start and end for the
    rates with and without faults."""

    acknowledged: int = 0

    def acked(self, count: int = 1) -> None:
        self.acknowledged += count


class ProducerWriter:
    def __init__(
        self,
        history: HistoryWriter,
        process: int,
        name: str,
        *,
        bootstrap_servers: str,
        secret: str,
        topic: str,
        partitions: int,
        acks: str,
        in_flight: int,
        stats: WorkloadStats,
        connection: Mapping[str, str],
    ) -> None:
        self.history = history
        self.process = process
        self.name = name
        self.bootstrap_servers = bootstrap_servers
        self.secret = secret
        self.connection = dict(connection)
        self.topic = topic
        self.partitions = partitions
        self.acks = acks
        self.stats = stats
        self._slots = asyncio.Semaphore(in_flight)
        self._stop = asyncio.Event()
        self._pending: set[asyncio.Future[RecordMetadata]] = set()

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        config: dict[str, object] = {
            "acks": self.acks,
            "enable.idempotence": self.acks == "all",
            "linger.ms": 5,
            "delivery.timeout.ms": 60_000,
            "request.timeout.ms": 10_000,
            "retry.backoff.ms": 100,
            **self.connection,
        }
        producer = Producer(self.bootstrap_servers, secret=self.secret, config=config)
        await producer.start()
        try:
            await self._send_until_stopped(producer)
        finally:
            # Stopped: every send has completed, closing is quick. Cancelled (the campaign was
            # interrupted): the brokers may be gone, so outstanding sends get 5 s, not the
            # delivery timeout.
            await producer.close(timeout_s=None if self._stop.is_set() else 5.0)

    async def _send_until_stopped(self, producer: Producer) -> None:
        for number in itertools.count():
            if self._stop.is_set():
                break
            await self._slots.acquire()
            partition = number % self.partitions
            value = f"{self.name}-{number}"
            key = history_key(TopicPartition(self.topic, partition))
            operation = self.history.invoke(self.process, "send", [key, value])
            try:
                future = await producer.enqueue(self.topic, value.encode(), partition=partition)
            except ProducerTimeoutError:
                # The topic's metadata did not come within max.block.ms: the record was never
                # handed to the producer, so it was certainly not written.
                operation.fail([key, [None, value]], error="max.block.ms")
                self._slots.release()
                continue
            self._pending.add(future)
            future.add_done_callback(functools.partial(self._completed, operation=operation))
        if self._pending:
            await asyncio.wait(set(self._pending))

    def _completed(self, future: asyncio.Future[RecordMetadata], *, operation: Operation) -> None:
        key, value = operation.value
        self._pending.discard(future)
        self._slots.release()
        if future.cancelled():
            operation.info([key, [None, value]], error="cancelled")
            return
        error = future.exception()
        if error is None:
            metadata = future.result()
            offset = metadata.offset if metadata.has_offset else None
            operation.ok([key, [offset, value]])
            self.stats.acked()
        else:
            name = (
                error.error_code.name
                if isinstance(error, ProducerError) and error.error_code
                else type(error).__name__
            )
            operation.info([key, [None, value]], error=name)


class JsonApiWriter:
    def __init__(
        self,
        history: HistoryWriter,
        process: int,
        name: str,
        *,
        base_urls: Sequence[str],
        secret: str,
        topic: str,
        partitions: int,
        acks: str,
        batch: int,
        stats: WorkloadStats,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.history = history
        self.process = process
        self.name = name
        self.base_urls = list(base_urls)
        self.ssl_context = ssl_context
        self.headers = {"Authorization": f"Bearer {secret}"}
        self.topic = topic
        self.partitions = partitions
        self.acks = acks
        self.batch = batch
        self.stats = stats
        self._stop = asyncio.Event()

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        timeout = aiohttp.ClientTimeout(total=45)
        connector = aiohttp.TCPConnector(ssl=self.ssl_context or True)
        async with aiohttp.ClientSession(
            timeout=timeout, headers=self.headers, connector=connector
        ) as session:
            numbers = itertools.count()
            for round_number in itertools.count():
                if self._stop.is_set():
                    return
                partition = round_number % self.partitions
                base_url = self.base_urls[round_number % len(self.base_urls)]
                key = history_key(TopicPartition(self.topic, partition))
                values = [f"{self.name}-{next(numbers)}" for _ in range(self.batch)]
                operations = [self.history.invoke(self.process, "send", [key, value]) for value in values]
                await self._post(session, base_url, partition, key, values, operations)

    async def _post(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        partition: int,
        key: str,
        values: list[str],
        operations: list[Operation],
    ) -> None:
        url = f"{base_url}/v1/topics/{self.topic}/partitions/{partition}/records"
        body = {
            "records": [{"value": value} for value in values],
            "value_format": "string",
            "acks": self.acks,
            "timeout_ms": 10_000,
        }
        try:
            async with session.post(
                url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}
            ) as answer:
                payload = await answer.read()
        except (aiohttp.ClientError, TimeoutError) as error:
            for operation, value in zip(operations, values, strict=True):
                operation.info([key, [None, value]], error=type(error).__name__)
            return
        try:
            document = orjson.loads(payload)
        except orjson.JSONDecodeError:
            document = {}
        records = document.get("records") if isinstance(document, dict) else None
        if not isinstance(records, list) or len(records) != len(values):
            # Refused before any record was handled (bad request, node starting): nothing written.
            refusal = document.get("error") if isinstance(document, dict) else None
            name = str(refusal) if refusal is not None else f"HTTP {answer.status}"
            for operation, value in zip(operations, values, strict=True):
                self._outcome(operation, key, value, name)
            return
        for operation, value, outcome in zip(operations, values, records, strict=True):
            if "offset" in outcome:
                operation.ok([key, [outcome["offset"], value]])
                self.stats.acked()
            else:
                self._outcome(operation, key, value, str(outcome.get("error")))

    def _outcome(self, operation: Operation, key: str, value: str, error: str) -> None:
        """A record not acknowledged: ``fail`` if the broker refused it before appending, else
        ``info`` (its outcome is unknown)."""
        if error in _REFUSED:
            operation.fail([key, [None, value]], error=error)
        else:
            operation.info([key, [None, value]], error=error)


class Reader:
    def __init__(
        self,
        history: HistoryWriter,
        processes: itertools.count[int],
        *,
        bootstrap_servers: str,
        secret: str,
        topic: str,
        partitions: int,
        connection: Mapping[str, str],
    ) -> None:
        self.history = history
        self.processes = processes
        self.bootstrap_servers = bootstrap_servers
        self.secret = secret
        self.connection = dict(connection)
        self.tps = [TopicPartition(topic, p) for p in range(partitions)]
        self._stop = asyncio.Event()

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        while not self._stop.is_set():
            process = next(self.processes)
            try:
                await self._read_as(process)
            except (KafkaError, RuntimeError, OSError) as error:
                _log.info("reader %d failed (%s); a new reader starts", process, error)

    async def _read_as(self, process: int) -> None:
        config = {"auto.offset.reset": "earliest", "request.timeout.ms": 10_000, **self.connection}
        async with Consumer(self.bootstrap_servers, secret=self.secret, config=config) as consumer:
            consumer.assign(self.tps)
            consumer.seek_to_beginning(self.tps)
            while not self._stop.is_set():
                operation = self.history.invoke(process, "poll", None)
                try:
                    records = await consumer.poll(timeout_ms=500)
                except KafkaError as error:
                    operation.info(None, error=error.error_code.name if error.error_code else str(error))
                    raise
                read: dict[str, list[list[object]]] = {}
                for record in records:
                    if record.value is None:  # the campaign's values are never null
                        continue
                    value = record.value.decode()
                    read.setdefault(history_key(TopicPartition(record.topic, record.partition)), []).append(
                        [record.offset, value]
                    )
                operation.ok(read)


async def final_read(
    history: HistoryWriter,
    process: int,
    *,
    bootstrap_servers: str,
    secret: str,
    topic: str,
    partitions: int,
    timeout_s: float,
    connection: Mapping[str, str],
) -> dict[str, list[tuple[int, str]]]:
    """Every partition from its log start to its high watermark, as one ``final-read`` event per
    partition (the checker's ground truth of what the cluster keeps)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    found: dict[str, list[tuple[int, str]]] = {history_key(tp): [] for tp in tps}
    config = {"auto.offset.reset": "earliest", "request.timeout.ms": 10_000, **connection}
    async with Consumer(bootstrap_servers, secret=secret, config=config) as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)
        ends = await consumer.end_offsets(tps)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        remaining = {tp for tp in tps if ends[tp] > 0}
        positions = dict.fromkeys(tps, 0)
        while remaining and loop.time() < deadline:
            with contextlib.suppress(KafkaError):
                for record in await consumer.poll(timeout_ms=500):
                    tp = TopicPartition(record.topic, record.partition)
                    if record.value is not None:  # the campaign's values are never null
                        found[history_key(tp)].append((record.offset, record.value.decode()))
                    positions[tp] = record.offset + 1
                    if positions[tp] >= ends[tp]:
                        remaining.discard(tp)
        for tp in tps:
            history.final_read(
                process,
                history_key(tp),
                found[history_key(tp)],
                high_watermark=ends[tp],
                complete=tp not in remaining,
            )
    return found
