"""``actorlog perf produce|consume``: Kafka's perf tools, same options, same output lines.

    actorlog perf produce --topic T --num-records N --record-size S --throughput -1
                          [--producer-props k=v ...] [--producer.config FILE] [--bootstrap-server H:P]
    actorlog perf consume --bootstrap-server H:P --topic T --messages N [--from-latest]
                          [--timeout MS] [--fetch-size B] [--reporting-interval MS]
                          [--show-detailed-stats] [--hide-header] [--consumer.config FILE]

``perf produce`` (``kafka-producer-perf-test.sh``) prints every 5 s
``N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency.`` and at the end the
same with the 50th/95th/99th/99.9th latency percentiles. ``--throughput`` caps records/s (-1: no
cap). ``bootstrap.servers`` comes from ``--producer-props`` or ``--bootstrap-server``. The producer's
defaults are the project's (idempotent, acks=all); ``--producer-props acks=1`` measures acks=1.
Kafka's batching defaults (batch.size 16384, linger.ms 0) hold; the README's Performance section
says what they give and what ``--producer-props batch.size=262144 linger.ms=5`` gives beside them.

``perf consume`` (``kafka-consumer-perf-test.sh``) reads ``--messages`` records from every partition
(from the beginning unless ``--from-latest``) and prints Kafka's CSV header and line:
``start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec`` (no groups: rebalance time is 0).

Latency is measured from handing the record to the producer to its acknowledgement, for every
record, in milliseconds (Kafka's tool does the same, sampling for its percentiles).

``perf produce`` fails as Kafka's does when a send cannot proceed within ``max.block.ms`` (60000 by
default; ``--producer-props max.block.ms=N`` or ``--producer.config``): no broker answers, or the
topic does not exist (never created, or deleted while producing). It prints one line naming the
condition — ``actorlog perf: topic T not present in metadata after N ms: ...`` — and exits 1 at
once, without waiting for the records still pending (the producer is closed with no grace, as
Kafka's tool exits on the exception) and without reporting each of them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import gc
import os
import sys
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from actors.clients.producer.errors import MetadataTimeoutError, ProducerError
from actors.clients.producer.protocol import RecordMetadata
from actors.common.errors import KafkaError
from ops.clients.consumer import Consumer
from ops.clients.producer import Producer, SendCallback
from ops.config import parse_overrides
from ops.properties import ConfigError
from runtime.clock import LoopClock, wait_ms

__all__ = ["ConsumerPerfResult", "ProducerPerfStats", "main", "run_consumer_perf", "run_producer_perf"]

_REPORT_INTERVAL_MS = 5_000


# ----------------------------------------------------------------------------------- produce


@dataclass
class ProducerPerfStats:
    """Kafka's ``Stats``: totals, windows of ``reporting_interval_ms``, every latency. ``record``
    runs once per record: the window is kept as the totals at its start plus its own maximum, so a
    record costs a few additions and comparisons."""

    record_size: int
    started_ns: int
    reporting_interval_ms: int = _REPORT_INTERVAL_MS
    print_line: Callable[[str], None] = print
    latencies_ms: array[float] = field(default_factory=lambda: array("d"))
    count: int = 0
    errors: int = 0
    latency_sum: float = 0.0
    latency_max: float = 0.0
    finished_ns: int = 0
    # The current window: when it started (at its first record), the count and latency sum before
    # it, and its largest latency; -1 before the first record.
    window_started_ns: int = -1
    window_count: int = 0
    window_latency_sum: float = 0.0
    window_latency_max: float = 0.0
    _window_end_ns: int = 0

    @property
    def bytes(self) -> int:
        return self.count * self.record_size

    def record(self, latency_ms: float, now_ns: int) -> None:
        self.count += 1
        self.latency_sum += latency_ms
        if latency_ms > self.latency_max:
            self.latency_max = latency_ms
        self.latencies_ms.append(latency_ms)
        if self.window_started_ns < 0:
            self._start_window(now_ns, self.count - 1, self.latency_sum - latency_ms)
        if latency_ms > self.window_latency_max:
            self.window_latency_max = latency_ms
        if now_ns >= self._window_end_ns:
            self.print_line(self._window_line(now_ns))
            self._start_window(now_ns, self.count, self.latency_sum)

    def _start_window(self, now_ns: int, count: int, latency_sum: float) -> None:
        self.window_started_ns = now_ns
        self.window_count = count
        self.window_latency_sum = latency_sum
        self.window_latency_max = 0.0
        self._window_end_ns = now_ns + self.reporting_interval_ms * 1_000_000

    def _window_line(self, now_ns: int) -> str:
        seconds = max((now_ns - self.window_started_ns) / 1e9, 1e-9)
        count = self.count - self.window_count
        return (
            f"{count} records sent, {count / seconds:.1f} records/sec "
            f"({count * self.record_size / seconds / 1024 / 1024:.2f} MB/sec), "
            f"{(self.latency_sum - self.window_latency_sum) / max(count, 1):.1f} ms avg latency, "
            f"{self.window_latency_max:.1f} ms max latency."
        )

    def final_line(self, now_ns: int) -> str:
        seconds = max((now_ns - self.started_ns) / 1e9, 1e-9)
        ordered = sorted(self.latencies_ms)

        def percentile(p: float) -> int:
            return int(ordered[min(int(p * len(ordered)), len(ordered) - 1)]) if ordered else 0

        return (
            f"{self.count} records sent, {self.count / seconds:f} records/sec "
            f"({self.bytes / seconds / 1024 / 1024:.2f} MB/sec), "
            f"{self.latency_sum / max(self.count, 1):.2f} ms avg latency, "
            f"{self.latency_max:.2f} ms max latency, "
            f"{percentile(0.5)} ms 50th, {percentile(0.95)} ms 95th, {percentile(0.99)} ms 99th, "
            f"{percentile(0.999)} ms 99.9th."
        )


async def run_producer_perf(
    *,
    topic: str,
    num_records: int,
    record_size: int,
    throughput: float,
    producer_config: dict[str, object],
    properties_file: str | None = None,
    secret: str | None = None,
    print_line: Callable[[str], None] = print,
) -> ProducerPerfStats:
    """Send ``num_records`` records of ``record_size`` random bytes (one payload, as Kafka's tool
    reuses its payload) and return the statistics; lines are printed as the tool does."""
    clock = LoopClock()
    payload = os.urandom(record_size)
    failed = False  # a send raised: the tool is ending, the records it abandons are not reported
    sending = True  # the loop still hands records over, so a blocked send meets any metadata timeout
    async with Producer(config=producer_config, properties_file=properties_file, secret=secret) as producer:
        stats = ProducerPerfStats(record_size=record_size, started_ns=clock.now_ns(), print_line=print_line)

        def on_done(sent_ns: int) -> SendCallback:
            # Kafka's PerfCallback: one per record, called with the record's outcome.
            def done(metadata: RecordMetadata | None, error: ProducerError | None) -> None:
                if error is not None:
                    stats.errors += 1
                    # A record whose topic's metadata did not come within max.block.ms fails just
                    # before the send blocked on the same metadata raises and ends the tool with the
                    # one line that says why; reporting each such record would bury that line.
                    ending = sending and isinstance(error, MetadataTimeoutError)
                    if stats.errors <= 5 and not failed and not ending:
                        print(f"ERROR: {error}", file=sys.stderr)
                    return
                now_ns = clock.now_ns()
                stats.record((now_ns - sent_ns) / 1e6, now_ns)

            return done

        try:
            for number in range(num_records):
                if throughput > 0:
                    # Kafka's ThroughputThrottler: ahead of the target rate, wait until back on it.
                    due_ns = stats.started_ns + int(number / throughput * 1e9)
                    ahead_ms = (due_ns - clock.now_ns()) // 1_000_000
                    if ahead_ms > 0:
                        await wait_ms(clock, ahead_ms)
                # Raises after max.block.ms without the topic's metadata (or buffer memory).
                await producer.send_with_callback(topic, payload, on_done(clock.now_ns()))
            sending = False
            await producer.flush()
        except BaseException as error:
            # Ending early (a send raised, or Ctrl-C): the records abandoned are not reported.
            failed = True
            if isinstance(error, KafkaError):
                # Kafka's tool ends on the exception its send throws, without closing its
                # producer: here it is closed with no grace, failing whatever is still pending (a
                # deleted topic's records would otherwise be retried for delivery.timeout.ms).
                await producer.close(timeout_s=0)
            raise
    stats.finished_ns = clock.now_ns()
    print_line(stats.final_line(stats.finished_ns))
    return stats


# ----------------------------------------------------------------------------------- consume


@dataclass(frozen=True)
class ConsumerPerfResult:
    start_ms: int
    end_ms: int
    messages: int
    bytes: int

    @property
    def seconds(self) -> float:
        return max((self.end_ms - self.start_ms) / 1000, 1e-9)

    def line(self, date_format: Callable[[int], str]) -> str:
        megabytes = self.bytes / 1024 / 1024
        return (
            f"{date_format(self.start_ms)}, {date_format(self.end_ms)}, {megabytes:.4f}, "
            f"{megabytes / self.seconds:.4f}, {self.messages}, {self.messages / self.seconds:.4f}, 0, "
            f"{self.end_ms - self.start_ms}, {megabytes / self.seconds:.4f}, "
            f"{self.messages / self.seconds:.4f}"
        )


HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)


DETAILED_HEADER = "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec"


def kafka_date(epoch_ms: int) -> str:
    """Kafka's default ``yyyy-MM-dd HH:mm:ss:SSS`` in local time."""
    moment = datetime.datetime.fromtimestamp(epoch_ms / 1000, tz=datetime.UTC).astimezone()
    return moment.strftime("%Y-%m-%d %H:%M:%S:") + f"{epoch_ms % 1000:03d}"


async def run_consumer_perf(
    *,
    bootstrap_servers: str,
    topic: str,
    messages: int,
    from_latest: bool = False,
    timeout_ms: int = 10_000,
    consumer_config: dict[str, object] | None = None,
    properties_file: str | None = None,
    secret: str | None = None,
    detailed: Callable[[int, int, int, int], None] | None = None,
    reporting_interval_ms: int = _REPORT_INTERVAL_MS,
) -> ConsumerPerfResult:
    clock = LoopClock()
    config: dict[str, object] = {"auto.offset.reset": "latest" if from_latest else "earliest"}
    config.update(consumer_config or {})
    async with Consumer(
        bootstrap_servers, config=config, config_file=properties_file, secret=secret
    ) as consumer:
        consumer.assign(await consumer.partitions_for(topic))
        start_ms = clock.wall_clock_ms()
        count = 0
        total_bytes = 0
        last_record_ms = clock.now_ms()
        last_report_ms = clock.now_ms()
        while count < messages:
            records = await consumer.poll(timeout_ms=min(1_000, timeout_ms))
            now_ms = clock.now_ms()
            if not records:
                if now_ms - last_record_ms >= timeout_ms:
                    print(
                        f"WARNING: Exiting before consuming the expected number of messages: timeout "
                        f"({timeout_ms} ms) exceeded. You can use the --timeout option to increase the "
                        "timeout.",
                        file=sys.stderr,
                    )
                    break
                continue
            last_record_ms = now_ms
            for record in records[: messages - count]:
                count += 1
                total_bytes += len(record.value or b"") + len(record.key or b"")
            if detailed is not None and now_ms - last_report_ms >= reporting_interval_ms:
                detailed(start_ms, clock.wall_clock_ms(), count, total_bytes)
                last_report_ms = now_ms
        return ConsumerPerfResult(start_ms, clock.wall_clock_ms(), count, total_bytes)


# --------------------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="actorlog perf", description="Producer and consumer performance tools."
    )
    tools = parser.add_subparsers(dest="tool", required=True)
    produce = tools.add_parser("produce", help="like kafka-producer-perf-test.sh")
    produce.add_argument("--topic", required=True)
    produce.add_argument("--num-records", type=int, required=True)
    produce.add_argument("--record-size", type=int, required=True)
    produce.add_argument("--throughput", type=float, required=True, help="records/s cap; -1 for none")
    produce.add_argument("--producer-props", nargs="+", default=[], metavar="KEY=VALUE")
    produce.add_argument("--producer.config", dest="producer_config", metavar="FILE")
    produce.add_argument("--bootstrap-server", help="shorthand for --producer-props bootstrap.servers=...")
    consume = tools.add_parser("consume", help="like kafka-consumer-perf-test.sh")
    consume.add_argument("--bootstrap-server", "--broker-list", dest="bootstrap_server", required=True)
    consume.add_argument("--topic", required=True)
    consume.add_argument("--messages", type=int, required=True)
    consume.add_argument("--from-latest", action="store_true")
    consume.add_argument("--timeout", type=int, default=10_000, help="ms without a record before giving up")
    consume.add_argument("--fetch-size", type=int, help="max.partition.fetch.bytes")
    consume.add_argument("--reporting-interval", type=int, default=_REPORT_INTERVAL_MS)
    consume.add_argument("--show-detailed-stats", action="store_true")
    consume.add_argument("--hide-header", action="store_true")
    consume.add_argument("--consumer.config", dest="consumer_config", metavar="FILE")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    arguments = parser.parse_args(argv)
    try:
        if arguments.tool == "produce":
            return _produce(parser, arguments)
        return _consume(arguments)
    except ConfigError as error:
        print(f"actorlog perf: {error}", file=sys.stderr)
        return 2
    except KafkaError as error:
        print(f"actorlog perf: {error}", file=sys.stderr)
        return 1


@contextlib.contextmanager
def collector_tuned(*, youngest_threshold: int | None = None) -> Iterator[None]:
    """The tools' own collector tuning while they run, as Kafka's scripts tune their JVM's; undone
    after (``main`` also runs inside tests and ``ops.bench``).

    What the start made (modules, classes, the codec, the client's actors) lives as long as the
    run, so it is frozen: the collector leaves it alone instead of walking it at every full
    collection the records' allocations set off. ``youngest_threshold`` raises generation 0's from
    700 allocations: a producer at buffer.memory keeps ~200,000 records outstanding, each a few
    tracked objects, which the default thresholds promote and walk again and again (18 % of the
    producer tool's CPU at 100 B records, measured beside the defaults on one cluster)."""
    thresholds = gc.get_threshold()
    gc.freeze()
    if youngest_threshold is not None:
        gc.set_threshold(youngest_threshold, 50, 100)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def _produce(parser: argparse.ArgumentParser, arguments: argparse.Namespace) -> int:
    if arguments.num_records <= 0 or arguments.record_size <= 0:
        parser.error("--num-records and --record-size must be positive")
    config: dict[str, object] = dict(parse_overrides(arguments.producer_props))
    if arguments.bootstrap_server:
        config.setdefault("bootstrap.servers", arguments.bootstrap_server)
    if "bootstrap.servers" not in config and not arguments.producer_config:
        parser.error("give --bootstrap-server or --producer-props bootstrap.servers=HOST:PORT")
    with collector_tuned(youngest_threshold=100_000):
        stats = asyncio.run(
            run_producer_perf(
                topic=arguments.topic,
                num_records=arguments.num_records,
                record_size=arguments.record_size,
                throughput=arguments.throughput,
                producer_config=config,
                properties_file=arguments.producer_config,
            )
        )
    return 1 if stats.errors else 0


def _consume(arguments: argparse.Namespace) -> int:
    config: dict[str, object] = {}
    if arguments.fetch_size:
        config["max.partition.fetch.bytes"] = arguments.fetch_size

    def detailed(start_ms: int, now_ms: int, count: int, total: int) -> None:
        elapsed = max((now_ms - start_ms) / 1000, 1e-9)
        megabytes = total / 1024 / 1024
        print(
            f"{kafka_date(now_ms)}, 0, {megabytes:.4f}, {megabytes / elapsed:.4f}, "
            f"{count}, {count / elapsed:.4f}"
        )

    if not arguments.hide_header:
        print(DETAILED_HEADER if arguments.show_detailed_stats else HEADER)
    with collector_tuned():
        result = asyncio.run(
            run_consumer_perf(
                bootstrap_servers=arguments.bootstrap_server,
                topic=arguments.topic,
                messages=arguments.messages,
                from_latest=arguments.from_latest,
                timeout_ms=arguments.timeout,
                consumer_config=config,
                properties_file=arguments.consumer_config,
                detailed=detailed if arguments.show_detailed_stats else None,
                reporting_interval_ms=arguments.reporting_interval,
            )
        )
    if not arguments.show_detailed_stats:
        print(result.line(kafka_date))
    return 0 if result.messages >= arguments.messages else 1
