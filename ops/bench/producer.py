"""Producer benchmark: records/s and MB/s through real broker processes, as ``kafka-producer-perf-test``.

    python -m ops.bench.producer [--records 200000] [--cases rf1-acks1,rf3-acks1,rf3-acksall]
                                 [--sizes 100,1024] [--partitions 3] [--linger-ms 5]
                                 [--batch-size 16384] [--producer-property KEY=VALUE ...]
                                 [--tls | --bootstrap-server H:P --secret S]

Without ``--bootstrap-server`` it starts its own cluster in a temporary directory: a ZooKeeper from
the installed package and three broker processes (``ops.local.cluster``; with ``--tls`` HTTPS
listeners and certificates as ``cluster up --tls`` makes them, the producer verifying them, so the
figures with and without it are TLS's cost), topics
``bench-rf1`` (each partition on one broker) and ``bench-rf3`` (three replicas,
``min.insync.replicas=2``) created through the admin API. With one it uses those
topics on that cluster (create them first; for an HTTPS one give ``--producer-property
security.protocol=SSL --producer-property ssl.truststore.location=CA.pem``).

Each case runs in this process: one ``Producer`` (idempotent for acks=all, the default; acks=1
switches idempotence off) sending ``--records`` unkeyed records of the given size (the sticky
partitioner spreads them), via ``await producer.enqueue(...)`` as fast as buffer.memory allows.
A warm-up of a tenth of the records (metadata, producer id, connections) is not timed. Printed per
case, in kafka-producer-perf-test's words: records sent, records/sec, MB/sec, avg and max latency
(send to acknowledgement, sampled every 16th record), and the producer's retries and errors.
Target (issue 7): RF 3 acks=all 100-byte records >= 50,000 records/s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from actors.clients.producer.protocol import RecordMetadata
from ops.bench.proc_cpu import total_cpu_seconds
from ops.clients.admin import Admin
from ops.clients.producer import Producer
from ops.local.cluster import LocalCluster

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Case:
    name: str
    topic: str
    acks: str


CASES = {
    "rf1-acks1": Case("RF1 acks=1", "bench-rf1", "1"),
    "rf3-acks1": Case("RF3 acks=1", "bench-rf3", "1"),
    "rf3-acksall": Case("RF3 acks=all", "bench-rf3", "all"),
}


@dataclass
class Result:
    case: str
    record_bytes: int
    records: int
    seconds: float
    latencies_ms: list[float]
    retries: int
    errors: int
    retry_causes: dict[str, int]
    producer_cpu_s: float
    brokers_cpu_s: float
    request_latency_ms: float
    records_per_request: float

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds

    @property
    def megabytes_per_second(self) -> float:
        return self.records * self.record_bytes / self.seconds / (1024 * 1024)

    def line(self) -> str:
        average = sum(self.latencies_ms) / len(self.latencies_ms) if self.latencies_ms else 0.0
        worst = max(self.latencies_ms, default=0.0)
        return (
            f"{self.case:<13} {self.record_bytes:>5} B: {self.records} records sent, "
            f"{self.records_per_second:,.1f} records/sec ({self.megabytes_per_second:.2f} MB/sec), "
            f"{average:.1f} ms avg latency, {worst:.1f} ms max latency; "
            f"{self.retries} retries, {self.errors} errors; CPU s: producer {self.producer_cpu_s:.1f}, "
            f"brokers {self.brokers_cpu_s:.1f}; requests: {self.request_latency_ms:.1f} ms avg, "
            f"{self.records_per_request:.0f} records each"
            + (f"; retried on {self.retry_causes}" if self.retry_causes else "")
        )


# ------------------------------------------------------------------------------------- cluster


async def create_topics(cluster: LocalCluster, partitions: int) -> None:
    """``bench-rf1`` (each partition on one broker) and ``bench-rf3`` (three replicas, min ISR 2)."""
    brokers = sorted(cluster.processes)
    rf1 = {p: [brokers[p % len(brokers)]] for p in range(partitions)}
    rf3 = {
        p: [brokers[(p + i) % len(brokers)] for i in range(min(3, len(brokers)))] for p in range(partitions)
    }
    async with Admin(
        cluster.bootstrap_servers, secret=cluster.secret, command_config=cluster.client_properties_path
    ) as admin:
        await admin.create_topic("bench-rf1", replica_assignment=rf1)
        await admin.create_topic("bench-rf3", replica_assignment=rf3, configs={"min.insync.replicas": "2"})


# --------------------------------------------------------------------------------------- runs


async def run_case(
    bootstrap: str,
    secret: str,
    case: Case,
    record_bytes: int,
    records: int,
    args: argparse.Namespace,
    broker_pids: Sequence[int] = (),
    properties_file: Path | None = None,
) -> Result:
    config: dict[str, object] = {
        "acks": case.acks,
        "linger.ms": args.linger_ms,
        "batch.size": args.batch_size,
        "client.id": f"bench-{case.topic}-{case.acks}",
    }
    for setting in args.producer_property:
        key, _, setting_value = setting.partition("=")
        config[key.strip()] = setting_value.strip()
    value = os.urandom(record_bytes)
    latencies: list[float] = []
    async with Producer(bootstrap, secret=secret, config=config, properties_file=properties_file) as producer:
        await _send(producer, case.topic, value, max(records // 10, 1000), latencies)
        latencies.clear()
        before = producer.statistics()
        cpu_before, brokers_before = time.process_time(), total_cpu_seconds(broker_pids)
        started = time.perf_counter()
        await _send(producer, case.topic, value, records, latencies)
        seconds = time.perf_counter() - started
        cpu_after, brokers_after = time.process_time(), total_cpu_seconds(broker_pids)
        after = producer.statistics()
    assert before is not None
    assert after is not None
    causes = {
        cause: count - before.record_retries_by_error.get(cause, 0)
        for cause, count in after.record_retries_by_error.items()
        if count > before.record_retries_by_error.get(cause, 0)
    }
    return Result(
        case.name,
        record_bytes,
        records,
        seconds,
        latencies,
        after.record_retries_total - before.record_retries_total,
        after.record_errors_total - before.record_errors_total,
        causes,
        cpu_after - cpu_before,
        brokers_after - brokers_before,
        (after.request_latency.sum - before.request_latency.sum)
        * 1000
        / max(after.request_latency.count - before.request_latency.count, 1),
        records / max(after.requests_sent_total - before.requests_sent_total, 1),
    )


async def _send(producer: Producer, topic: str, value: bytes, count: int, latencies: list[float]) -> None:
    def sampler(started: float) -> Callable[[asyncio.Future[RecordMetadata]], None]:
        def sample(_: asyncio.Future[RecordMetadata]) -> None:
            latencies.append((time.perf_counter() - started) * 1000)

        return sample

    for number in range(count):
        future = await producer.enqueue(topic, value)
        if number % 16 == 0:
            future.add_done_callback(sampler(time.perf_counter()))
    await producer.flush()


async def main_async(args: argparse.Namespace) -> int:
    sizes = [int(size) for size in args.sizes.split(",")]
    cases = [CASES[name] for name in args.cases.split(",")]
    if args.bootstrap_server:
        results = [
            await run_case(args.bootstrap_server, args.secret, case, size, _count(args, size), args)
            for case in cases
            for size in sizes
        ]
    else:
        with tempfile.TemporaryDirectory(prefix="actorlog-producer-bench-") as base:
            async with LocalCluster(Path(base), brokers=args.brokers, base_port=0, tls=args.tls) as cluster:
                await create_topics(cluster, args.partitions)
                pids = [b.process.pid for b in cluster.processes.values() if b.process is not None]
                listeners = ", ".join(broker.url for broker in cluster.processes.values())
                print(f"cluster: {args.brokers} brokers at {listeners}, {args.partitions} partitions")
                results = []
                for case in cases:
                    for size in sizes:
                        result = await run_case(
                            cluster.bootstrap_servers,
                            cluster.secret,
                            case,
                            size,
                            _count(args, size),
                            args,
                            pids,
                            cluster.client_properties_path,
                        )
                        print(result.line(), flush=True)
                        results.append(result)
                return 0 if all(r.errors == 0 for r in results) else 1
    for result in results:
        print(result.line())
    return 0 if all(r.errors == 0 for r in results) else 1


def _count(args: argparse.Namespace, size: int) -> int:
    # Large records: fewer of them, for about the same bytes as --records of 100 B... capped.
    records: int = args.records
    return records if size <= 100 else max(records * 100 // size * 4, 10_000)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.bench.producer", description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16_384)
    parser.add_argument(
        "--producer-property", action="append", default=[], metavar="KEY=VALUE", help="any producer key"
    )
    parser.add_argument(
        "--tls", action="store_true", help="the cluster it starts has HTTPS listeners (TLS's cost)"
    )
    parser.add_argument("--bootstrap-server", default=None)
    parser.add_argument("--secret", default=os.environ.get("ACTORLOG_INTERNAL_AUTH_SECRET", ""))
    args = parser.parse_args(argv)
    if args.tls and args.bootstrap_server:
        parser.error(
            "--tls is for the cluster this benchmark starts; for yours give --producer-property "
            "security.protocol=SSL --producer-property ssl.truststore.location=CA.pem"
        )
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
