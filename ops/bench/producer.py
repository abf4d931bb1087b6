"""Producer benchmark: records/s and MB/s through real broker processes, as ``kafka-producer-perf-test``.

    python -m ops.bench.producer [--records 200000] [--cases rf1-acks1,rf3-acks1,rf3-acksall]
                                 [--sizes 100,1024] [--partitions 3] [--linger-ms 5]
                                 [--batch-size 16384] [--producer-property KEY=VALUE ...]
                                 [--bootstrap-server H:P --secret S]

Without ``--bootstrap-server`` it starts its own cluster in a temporary directory: a ZooKeeper from
the installed package and three broker processes (``python -m ops broker start``), topics
``bench-rf1`` (each partition on one broker) and ``bench-rf3`` (three replicas,
``min.insync.replicas=2``) created the way an admin does in ZooKeeper mode. With one it uses those
topics on that cluster (create them first).

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
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from actors import zk_data
from actors.producer_protocol import RecordMetadata
from ops.clients.producer import Producer
from ops.zookeeper import LocalZooKeeper
from runtime.coordination import WatchEvent
from runtime.coordination.zk import ZkCoordinator

SECRET = "producer-bench-secret-0123456789"
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


class BenchCluster:
    """ZooKeeper + broker processes in a temporary directory, stopped on exit."""

    def __init__(self, base: Path, brokers: int, partitions: int) -> None:
        self.base = base
        self.broker_count = brokers
        self.partitions = partitions
        self.zookeeper = LocalZooKeeper(base / "zookeeper", force_sync=False)
        self.processes: list[asyncio.subprocess.Process] = []
        self.ports: list[int] = []
        self.admin: ZkCoordinator | None = None

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.ports)

    async def __aenter__(self) -> BenchCluster:
        await self.zookeeper.start()
        self.admin = ZkCoordinator(self.zookeeper.connect_string, session_timeout_ms=10_000)
        await self.admin.start()
        for path in zk_data.PERSISTENT_ZK_PATHS:
            await self.admin.ensure_path(path)
        await asyncio.gather(
            *(self._start_broker(broker_id) for broker_id in range(1, self.broker_count + 1))
        )
        await self._create_topics()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        for process in self.processes:
            if process.returncode is None:
                process.terminate()
        for process in self.processes:
            try:
                await asyncio.wait_for(process.wait(), timeout=30)
            except TimeoutError:
                process.kill()
                await process.wait()
        if self.admin is not None:
            await self.admin.close()
        await self.zookeeper.stop()

    async def _start_broker(self, broker_id: int) -> None:
        assert self.admin is not None
        port = _free_port()
        self.ports.append(port)
        config = self.base / f"broker-{broker_id}.properties"
        config.write_text(
            "".join(
                f"{key}={value}\n"
                for key, value in {
                    "broker.id": broker_id,
                    "listeners": f"HTTP://127.0.0.1:{port}",
                    "log.dirs": self.base / f"broker-{broker_id}",
                    "zookeeper.connect": self.zookeeper.connect_string,
                    "internal.auth.secret": SECRET,
                    "min.insync.replicas": 2,
                }.items()
            )
        )
        registered = asyncio.get_running_loop().create_future()

        def on_event(event: WatchEvent) -> None:
            if not registered.done():
                registered.set_result(None)

        with (self.base / f"broker-{broker_id}.log").open("ab") as output:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "ops", "broker", "start", "--config", str(config),
                cwd=ROOT, stdout=output, stderr=output, env={**os.environ, "PYTHONPATH": str(ROOT)},
            )  # fmt: skip
        self.processes.append(process)
        if await self.admin.exists(zk_data.broker_id_path(broker_id), watch=on_event) is None:
            await asyncio.wait_for(registered, timeout=60)

    async def _create_topics(self) -> None:
        assert self.admin is not None
        brokers = list(range(1, self.broker_count + 1))
        rf1 = {p: (brokers[p % len(brokers)],) for p in range(self.partitions)}
        rf3 = {
            p: tuple(brokers[(p + i) % len(brokers)] for i in range(min(3, len(brokers))))
            for p in range(self.partitions)
        }
        for topic, assignment in (("bench-rf1", rf1), ("bench-rf3", rf3)):
            await self.admin.create(
                zk_data.topic_path(topic),
                zk_data.encode_topic_assignment(zk_data.TopicAssignment(partitions=assignment)),
            )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --------------------------------------------------------------------------------------- runs


async def run_case(
    bootstrap: str,
    secret: str,
    case: Case,
    record_bytes: int,
    records: int,
    args: argparse.Namespace,
    broker_pids: Sequence[int] = (),
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
    async with Producer(bootstrap, secret=secret, config=config) as producer:
        await _send(producer, case.topic, value, max(records // 10, 1000), latencies)
        latencies.clear()
        before = producer.statistics()
        cpu_before, brokers_before = time.process_time(), _cpu_seconds(broker_pids)
        started = time.perf_counter()
        await _send(producer, case.topic, value, records, latencies)
        seconds = time.perf_counter() - started
        cpu_after, brokers_after = time.process_time(), _cpu_seconds(broker_pids)
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


def _cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU time of processes, from /proc (0 where unavailable)."""
    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


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
            async with BenchCluster(Path(base), args.brokers, args.partitions) as cluster:
                print(f"cluster: {args.brokers} brokers at {cluster.bootstrap}, {args.partitions} partitions")
                results = []
                for case in cases:
                    for size in sizes:
                        result = await run_case(
                            cluster.bootstrap, SECRET, case, size, _count(args, size), args, cluster.pids
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
    parser.add_argument("--bootstrap-server", default=None)
    parser.add_argument("--secret", default=os.environ.get("ACTORLOG_INTERNAL_AUTH_SECRET", ""))
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
