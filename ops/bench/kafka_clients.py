"""Kafka clients benchmark: actorlog's producer over HTTP against Kafka's clients over the Kafka listener.

    python -m ops.bench.kafka_clients [--records 200000] [--record-size 100] [--batch-size 16384]
                                      [--linger-ms 5] [--clients http,kafka-python,aiokafka,confluent-kafka]
                                      [--workloads idempotent,idempotent-1,acks-all] [--rounds 1]
                                      [--zookeeper HOST:PORT[/CHROOT]]

Issue 15's comparison, in one run on one cluster: a temporary ``LocalCluster`` (a ZooKeeper from the
installed package, or ``--zookeeper``'s, and three broker processes, each with its HTTP and KAFKA
listeners, as ``cluster up`` makes them) and, per client and workload, a topic of its own (one
partition, RF 3 led by broker 1, ``min.insync.replicas=2``, deleted after its run). Each client in
turn, in this process, sends ``--records`` records of ``--record-size`` random bytes (one payload, no
key, as Kafka's perf tool) with the same settings: acks=all, ``batch.size`` and ``linger.ms`` as
given, and per workload:

* ``idempotent``: ``enable.idempotence=true``, ``max.in.flight.requests.per.connection=5`` (issue
  15's setting). What each client makes of it on one partition differs: actorlog's producer keeps up
  to five batches of the partition in flight; aiokafka always sends one batch per partition at a
  time; kafka-python 3.0 does too when idempotent (``guarantee_message_order``); librdkafka counts
  the partition's in-flight *messages* against the idempotence window of five requests
  (``rd_kafka_toppar_producer_serve``), so with more than four records per batch it sends the next
  request only when the last is answered.
* ``idempotent-1``: the same with ``max.in.flight.requests.per.connection=1``: every client one
  request at a time, so the paths compare at the same pipelining.
* ``acks-all``: ``enable.idempotence=false``, five in flight: every client but aiokafka pipelines.

The clients:

* ``http``: ``actorlog perf produce``'s own loop (``ops.cli.perf.run_producer_perf``), actorlog's
  producer over the brokers' HTTP listeners, authenticated as ``client.properties``'s user;
* ``kafka-python``, ``aiokafka``, ``confluent-kafka`` (librdkafka): over the KAFKA listeners,
  SASL_PLAINTEXT with SCRAM-SHA-256 as the same user.

Each is timed from its first send to its last acknowledgement, connections made beforehand (its
first send still fetches the topic's metadata and, when idempotent, a producer id). Latency is per
record, from handing it to the client to its acknowledgement (as ``perf produce`` measures it).
Printed per workload: one table with records/s, MB/s, latency p50 and p99, the brokers' CPU seconds
(user + system, from ``/proc``) and this process's (the client's), and the fastest Kafka client's
throughput and brokers' CPU per record against HTTP's. ``--rounds N`` repeats everything (fresh
topics), so a loaded machine's noise shows.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ops.bench.proc_cpu import total_cpu_seconds
from ops.cli.perf import ProducerPerfStats, run_producer_perf
from ops.clients.admin import Admin
from ops.local.cluster import CLIENT_USER, LocalCluster
from runtime.clock import LoopClock

CLIENTS = ("http", "kafka-python", "aiokafka", "confluent-kafka")
# name -> (enable.idempotence, max.in.flight.requests.per.connection)
WORKLOADS = {"idempotent": (True, 5), "idempotent-1": (True, 1), "acks-all": (False, 5)}
_CLOCK = LoopClock()


@dataclass(frozen=True)
class Workload:
    records: int
    record_size: int
    batch_size: int
    linger_ms: int
    name: str = "idempotent"
    max_in_flight: int = 5
    idempotence: bool = True

    def describe(self) -> str:
        return (
            f"{self.name}: {self.records:,} records of {self.record_size} B, 1 partition, RF 3, acks=all, "
            f"enable.idempotence={str(self.idempotence).lower()}, batch.size {self.batch_size}, "
            f"linger.ms {self.linger_ms}, max.in.flight.requests.per.connection {self.max_in_flight}"
        )


@dataclass(frozen=True)
class Access:
    http_bootstrap: str
    kafka_bootstrap: str
    user: str
    password: str
    properties_file: Path


@dataclass
class Result:
    client: str
    path: str
    records: int
    record_size: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int
    brokers_cpu_s: float
    client_cpu_s: float

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds

    @property
    def megabytes_per_second(self) -> float:
        return self.records * self.record_size / self.seconds / (1024 * 1024)


# ------------------------------------------------------------------------------------ clients


async def run_http(access: Access, topic: str, workload: Workload) -> ProducerPerfStats:
    """``actorlog perf produce``: its loop, its producer, over HTTP."""
    return await run_producer_perf(
        topic=topic,
        num_records=workload.records,
        record_size=workload.record_size,
        throughput=-1,
        producer_config={
            "bootstrap.servers": access.http_bootstrap,
            "acks": "all",
            "enable.idempotence": workload.idempotence,
            "batch.size": workload.batch_size,
            "linger.ms": workload.linger_ms,
            "max.in.flight.requests.per.connection": workload.max_in_flight,
        },
        properties_file=str(access.properties_file),
        print_line=lambda _line: None,
    )


def _stats(workload: Workload) -> ProducerPerfStats:
    return ProducerPerfStats(
        record_size=workload.record_size, started_ns=_CLOCK.now_ns(), print_line=lambda _line: None
    )


def _acknowledged(stats: ProducerPerfStats, sent_ns: int) -> None:
    now_ns = _CLOCK.now_ns()
    stats.record((now_ns - sent_ns) / 1e6, now_ns)


def _failed(stats: ProducerPerfStats, error: object) -> None:
    stats.errors += 1
    if stats.errors <= 5:
        print(f"ERROR: {error}", file=sys.stderr)


def run_kafka_python(access: Access, topic: str, workload: Workload) -> ProducerPerfStats:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import kafka

    producer = kafka.KafkaProducer(
        bootstrap_servers=access.kafka_bootstrap.split(","),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username=access.user,
        sasl_plain_password=access.password,
        enable_idempotence=workload.idempotence,
        acks="all",
        batch_size=workload.batch_size,
        linger_ms=workload.linger_ms,
        max_in_flight_requests_per_connection=workload.max_in_flight,
    )
    try:
        payload = os.urandom(workload.record_size)
        stats = _stats(workload)
        for _ in range(workload.records):
            sent_ns = _CLOCK.now_ns()
            future = producer.send(topic, payload)
            future.add_callback(lambda _metadata, sent_ns=sent_ns: _acknowledged(stats, sent_ns))
            future.add_errback(lambda error: _failed(stats, error))
        producer.flush()
        stats.finished_ns = _CLOCK.now_ns()
    finally:
        producer.close()
    return stats


async def run_aiokafka(access: Access, topic: str, workload: Workload) -> ProducerPerfStats:
    import aiokafka

    producer = aiokafka.AIOKafkaProducer(
        bootstrap_servers=access.kafka_bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username=access.user,
        sasl_plain_password=access.password,
        enable_idempotence=workload.idempotence,
        acks="all",
        max_batch_size=workload.batch_size,
        linger_ms=workload.linger_ms,
    )
    await producer.start()

    def done(sent_ns: int) -> Callable[[asyncio.Future[Any]], None]:
        def finished(future: asyncio.Future[Any]) -> None:
            if future.cancelled() or future.exception() is not None:
                _failed(stats, future.exception())
            else:
                _acknowledged(stats, sent_ns)

        return finished

    try:
        payload = os.urandom(workload.record_size)
        stats = _stats(workload)
        for _ in range(workload.records):
            sent_ns = _CLOCK.now_ns()
            future = await producer.send(topic, payload)
            future.add_done_callback(done(sent_ns))
        await producer.flush()
        stats.finished_ns = _CLOCK.now_ns()
    finally:
        await producer.stop()
    return stats


def run_confluent_kafka(access: Access, topic: str, workload: Workload) -> ProducerPerfStats:
    import confluent_kafka

    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": access.kafka_bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": access.user,
            "sasl.password": access.password,
            "enable.idempotence": workload.idempotence,
            "acks": "all",
            "batch.size": workload.batch_size,
            "linger.ms": workload.linger_ms,
            "max.in.flight.requests.per.connection": workload.max_in_flight,
        }
    )
    payload = os.urandom(workload.record_size)
    producer.list_topics(topic, timeout=30)  # connected, as the others are before their first send
    stats = _stats(workload)

    def delivered(sent_ns: int) -> Callable[[Any, Any], None]:
        def report(error: Any, _message: Any) -> None:
            if error is not None:
                _failed(stats, error)
            else:
                _acknowledged(stats, sent_ns)

        return report

    for number in range(workload.records):
        sent_ns = _CLOCK.now_ns()
        while True:
            try:
                producer.produce(topic, payload, on_delivery=delivered(sent_ns))
                break
            except BufferError:
                producer.poll(0.05)  # the local queue is full: serve acknowledgements meanwhile
        if number % 1000 == 0:
            producer.poll(0)
    producer.flush()
    stats.finished_ns = _CLOCK.now_ns()
    return stats


# ---------------------------------------------------------------------------------- the run


def _percentile(stats: ProducerPerfStats, fraction: float) -> float:
    ordered = sorted(stats.latencies_ms)
    return ordered[min(int(fraction * len(ordered)), len(ordered) - 1)] if ordered else 0.0


async def run_client(
    client: str, access: Access, topic: str, workload: Workload, pids: Sequence[int]
) -> Result:
    brokers_before, client_before = total_cpu_seconds(pids), time.process_time()
    if client == "http":
        stats = await run_http(access, topic, workload)
    elif client == "kafka-python":
        stats = await asyncio.to_thread(run_kafka_python, access, topic, workload)
    elif client == "aiokafka":
        stats = await run_aiokafka(access, topic, workload)
    else:
        stats = await asyncio.to_thread(run_confluent_kafka, access, topic, workload)
    brokers_after, client_after = total_cpu_seconds(pids), time.process_time()
    return Result(
        client=client,
        path="HTTP" if client == "http" else "Kafka",
        records=stats.count,
        record_size=workload.record_size,
        seconds=max((stats.finished_ns - stats.started_ns) / 1e9, 1e-9),
        p50_ms=_percentile(stats, 0.5),
        p99_ms=_percentile(stats, 0.99),
        errors=stats.errors,
        brokers_cpu_s=brokers_after - brokers_before,
        client_cpu_s=client_after - client_before,
    )


def table(results: Sequence[Result]) -> str:
    header = (
        f"{'client':<16} {'path':<5} {'records/s':>10} {'MB/s':>6} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'brokers CPU s':>13} {'client CPU s':>12} {'errors':>6}"
    )
    lines = [header, "-" * len(header)]
    lines += [
        f"{r.client:<16} {r.path:<5} {r.records_per_second:>10,.0f} {r.megabytes_per_second:>6.2f} "
        f"{r.p50_ms:>7.1f} {r.p99_ms:>7.1f} {r.brokers_cpu_s:>13.1f} {r.client_cpu_s:>12.1f} {r.errors:>6}"
        for r in results
    ]
    return "\n".join(lines)


def comparison(results: Sequence[Result]) -> str | None:
    http = [r for r in results if r.path == "HTTP"]
    kafka = [r for r in results if r.path == "Kafka"]
    if not http or not kafka:
        return None
    fastest = max(kafka, key=lambda r: r.records_per_second)
    ratio = fastest.records_per_second / http[0].records_per_second
    return (
        f"fastest Kafka client: {fastest.client}, {ratio:.0%} of HTTP's records/s "
        f"({'not slower by more than 10 %' if ratio >= 0.9 else 'slower by more than 10 %'}); "
        f"brokers' CPU per 100k records: HTTP {http[0].brokers_cpu_s / http[0].records * 1e5:.2f} s, "
        f"{fastest.client} {fastest.brokers_cpu_s / fastest.records * 1e5:.2f} s"
    )


async def create_topic(cluster: LocalCluster, topic: str) -> None:
    async with Admin(
        cluster.bootstrap_servers, secret=cluster.secret, command_config=cluster.client_properties_path
    ) as admin:
        await admin.create_topic(
            topic, replica_assignment={0: [1, 2, 3]}, configs={"min.insync.replicas": "2"}
        )


async def delete_topic(cluster: LocalCluster, topic: str) -> None:
    """Gone before the next client starts: a follower's fetches carry every partition it follows
    (no fetch sessions), so topics left behind would make each later run's replication dearer."""
    async with Admin(
        cluster.bootstrap_servers, secret=cluster.secret, command_config=cluster.client_properties_path
    ) as admin:
        (error,) = (await admin.delete_topics([topic])).values()
    if error is not None:
        raise error


async def main_async(args: argparse.Namespace) -> int:
    clients = [client.strip() for client in args.clients.split(",")]
    names = [name.strip() for name in args.workloads.split(",")]
    unknown = sorted(set(clients) - set(CLIENTS)) + sorted(set(names) - set(WORKLOADS))
    if unknown:
        print(
            f"unknown {', '.join(unknown)}: clients are {', '.join(CLIENTS)}; workloads "
            f"{', '.join(WORKLOADS)}",
            file=sys.stderr,
        )
        return 2
    workloads = [
        Workload(
            args.records,
            args.record_size,
            args.batch_size,
            args.linger_ms,
            name=name,
            idempotence=WORKLOADS[name][0],
            max_in_flight=WORKLOADS[name][1],
        )
        for name in names
    ]
    with tempfile.TemporaryDirectory(prefix="actorlog-kafka-clients-bench-") as base:
        async with LocalCluster(
            Path(base), brokers=3, base_port=0, zookeeper_connect=args.zookeeper
        ) as cluster:
            pids = [b.process.pid for b in cluster.processes.values() if b.process is not None]
            access = Access(
                http_bootstrap=cluster.bootstrap_servers,
                kafka_bootstrap=cluster.kafka_bootstrap_servers,
                user=CLIENT_USER,
                password=cluster.client_credential.password,
                properties_file=cluster.client_properties_path,
            )
            print(f"cluster: 3 brokers; HTTP {access.http_bootstrap}; KAFKA {access.kafka_bootstrap}")
            failed: list[Result] = []
            for round_number in range(1, args.rounds + 1):
                for workload in workloads:
                    print(
                        f"\n{workload.describe()}" + (f" (round {round_number})" if args.rounds > 1 else "")
                    )
                    results = []
                    for client in clients:
                        topic = f"bench-{workload.name}-{client}-{round_number}"
                        await create_topic(cluster, topic)
                        results.append(await run_client(client, access, topic, workload, pids))
                        await delete_topic(cluster, topic)
                    print(table(results))
                    line = comparison(results)
                    if line:
                        print(line)
                    sys.stdout.flush()
                    failed += [r for r in results if r.errors or r.records != workload.records]
            cluster.kill_brokers()  # the data is thrown away: no controlled shutdowns to wait for
    return 0 if not failed else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ops.bench.kafka_clients", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=16_384)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help=f"any of {', '.join(WORKLOADS)}")
    parser.add_argument("--clients", default=",".join(CLIENTS), help=f"any of {', '.join(CLIENTS)}")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--zookeeper",
        default=None,
        metavar="HOST:PORT[/CHROOT]",
        help="use this ZooKeeper instead of starting one",
    )
    args = parser.parse_args(argv)
    if args.records <= 0 or args.record_size <= 0 or args.rounds <= 0:
        parser.error("--records, --record-size and --rounds must be positive")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
