"""Replication benchmark (issue 5): replicated produce throughput and idle acks=all latency.

    python -m ops.bench.replication [--records 200000] [--sizes 100,1024] [--partitions 9] [--tls]

Three broker processes and a ZooKeeper (``ops.local.cluster``; with ``--tls`` HTTPS listeners, so
replication and the producer run over TLS and the figures with and without it are its cost), a
topic with RF 3 and ``min.insync.replicas=2`` whose partitions spread over the three leaders, so
each produce request carries several 16 KiB batches (one per partition led by that broker):

* throughput: ``ops.cli.perf.run_producer_perf`` (what ``actorlog perf produce`` runs) with acks=all,
  ``batch.size=16384``, ``linger.ms=5``, idempotent — records/s and MB/s for each size;
* idle latency: one acks=all record at a time (the next sent when the previous is acknowledged),
  ``--latency-records`` of them — p50, p99 and max in milliseconds.

The figures are printed; nothing is asserted (timed assertions do not belong in tests).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from ops.cli.perf import run_producer_perf
from ops.clients.admin import Admin
from ops.clients.producer import Producer
from ops.local.cluster import LocalCluster

TOPIC = "bench-replicated"


async def idle_latency(bootstrap: str, secret: str, count: int, properties_file: Path) -> list[float]:
    latencies: list[float] = []
    async with Producer(
        bootstrap, secret=secret, config={"linger.ms": 0}, properties_file=properties_file
    ) as producer:
        for number in range(count + 100):
            started = time.perf_counter()
            await producer.send(TOPIC, os.urandom(100), partition=number % 3)
            if number >= 100:  # the first ones warm up metadata, the producer id and connections
                latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(p * len(ordered)), len(ordered) - 1)]


async def main_async(arguments: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="actorlog-bench-replication-") as base:
        async with LocalCluster(Path(base), brokers=3, base_port=0, tls=arguments.tls) as cluster:
            # The cluster's client.properties says the security protocol (and truststore) to every
            # client; the credential is the broker identity's.
            properties = cluster.client_properties_path
            async with Admin(
                cluster.bootstrap_servers, secret=cluster.secret, command_config=properties
            ) as admin:
                await admin.create_topic(
                    TOPIC,
                    num_partitions=arguments.partitions,
                    replication_factor=3,
                    configs={"min.insync.replicas": "2"},
                )
            listeners = ", ".join(b.url for b in cluster.processes.values())
            print(
                f"cluster: 3 broker processes at {listeners}, topic {TOPIC}: "
                f"{arguments.partitions} partitions, RF 3, "
                "min.insync.replicas 2; producer acks=all, idempotent, batch.size 16384, linger.ms 5"
            )
            for size in (int(s) for s in arguments.sizes.split(",")):
                records = arguments.records if size <= 100 else max(arguments.records // 4, 20_000)
                config: dict[str, object] = {
                    "bootstrap.servers": cluster.bootstrap_servers,
                    "batch.size": 16_384,
                    "linger.ms": 5,
                    "acks": "all",
                }
                # Warm-up (metadata, producer id, connections), not reported.
                await run_producer_perf(
                    topic=TOPIC, num_records=records // 10, record_size=size, throughput=-1,
                    producer_config=config, secret=cluster.secret, print_line=lambda _line: None,
                    properties_file=str(properties),
                )  # fmt: skip
                stats = await run_producer_perf(
                    topic=TOPIC, num_records=records, record_size=size, throughput=-1,
                    producer_config=config, secret=cluster.secret, print_line=lambda _line: None,
                    properties_file=str(properties),
                )  # fmt: skip
                print(f"throughput, {size} B records: {stats.final_line(stats.finished_ns)}")
            latencies = await idle_latency(
                cluster.bootstrap_servers, cluster.secret, arguments.latency_records, properties
            )
            print(
                f"idle acks=all latency over {len(latencies)} sequential records: "
                f"p50 {percentile(latencies, 0.5):.2f} ms, p99 {percentile(latencies, 0.99):.2f} ms, "
                f"max {max(latencies):.2f} ms"
            )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ops.bench.replication", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--partitions", type=int, default=9)
    parser.add_argument("--latency-records", type=int, default=2_000)
    parser.add_argument("--tls", action="store_true", help="HTTPS listeners (TLS's cost)")
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
