"""Failover benchmark (issue 6): unavailability after a hard kill and after a controlled shutdown.

    python -m ops.bench.failover [--partitions 1,200] [--faults kill,shutdown] [--tls]

For each (fault, partition count): a fresh cluster of three broker processes, a topic whose every
partition is led by broker 1 (replicas ``[1, 2, 3]``, RF 3, ``min.insync.replicas=2``), and one
writer per partition sending acks=all records back to back through one idempotent producer. Then
the fault hits broker 1 — SIGKILL (``kill``; the controller acts when its ZooKeeper session
expires, ``zookeeper.session.timeout.ms`` = Kafka's 6000 by default) or SIGTERM (``shutdown``;
Kafka's controlled shutdown moves the leaderships first). Per partition: the time from the fault
to its first write acknowledged by the new leader (an acknowledgement after the partition state
znode named another leader), and the longest pause between acknowledged writes around the fault
(the unavailability a writer sees). Printed: p50, p99 and max over the partitions. Nothing is
asserted. With ``--tls`` the brokers have HTTPS listeners (reconnecting after the fault costs a
TLS handshake).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import signal
import tempfile
import time
from pathlib import Path

from actors.common.types import TopicPartition
from ops.clients.admin import Admin
from ops.clients.producer import Producer
from ops.local.cluster import LocalCluster
from ops.local.zk_waits import wait_for_partition_state

TOPIC = "bench-failover"
VICTIM = 1


async def run_case(
    fault: str, partitions: int, session_timeout_ms: int, *, tls: bool = False
) -> tuple[list[float], list[float]]:
    with tempfile.TemporaryDirectory(prefix="actorlog-bench-failover-") as base:
        cluster = LocalCluster(
            Path(base),
            brokers=3,
            base_port=0,
            tls=tls,
            config={
                "zookeeper.session.timeout.ms": str(session_timeout_ms),
                "auto.leader.rebalance.enable": "false",
            },
        )
        async with cluster:
            properties = cluster.client_properties_path  # the security protocol for every client
            async with Admin(
                cluster.bootstrap_servers, secret=cluster.secret, command_config=properties
            ) as admin:
                await admin.create_topic(
                    TOPIC,
                    replica_assignment={p: [VICTIM, 2 + p % 2, 3 - p % 2] for p in range(partitions)},
                    configs={"min.insync.replicas": "2"},
                )
            acks: dict[int, list[float]] = {p: [] for p in range(partitions)}
            stop = asyncio.Event()
            async with Producer(
                cluster.bootstrap_servers,
                secret=cluster.secret,
                config={"linger.ms": 0, "retry.backoff.ms": 20},
                properties_file=properties,
            ) as producer:

                async def writer(partition: int) -> None:
                    while not stop.is_set():
                        try:
                            await producer.send(TOPIC, b"x" * 100, partition=partition)
                        except Exception:  # noqa: BLE001 - an expired record: keep writing
                            continue
                        acks[partition].append(time.perf_counter())

                moved: dict[int, float] = {}

                async def leadership_moves(partition: int) -> None:
                    await wait_for_partition_state(
                        cluster.admin,
                        TopicPartition(TOPIC, partition),
                        lambda state: state.leader not in (VICTIM, -1),
                        timeout_s=120,
                    )
                    moved[partition] = time.perf_counter()

                writers = [asyncio.ensure_future(writer(p)) for p in range(partitions)]
                await asyncio.sleep(3)  # steady state before the fault
                watches = [asyncio.ensure_future(leadership_moves(p)) for p in range(partitions)]
                fault_at = time.perf_counter()
                if fault == "kill":
                    await cluster.stop_broker(VICTIM, signal.SIGKILL)
                else:
                    exit_code = await cluster.stop_broker(VICTIM, signal.SIGTERM)
                    assert exit_code == 0, f"controlled shutdown exited {exit_code}"
                await asyncio.gather(*watches)
                await asyncio.sleep(2)  # writes on the new leaders
                stop.set()
                await asyncio.gather(*writers)
    first_on_new_leader = []
    longest_pause = []
    for partition in range(partitions):
        times = acks[partition]
        after = [t for t in times if t > moved[partition]]
        first_on_new_leader.append((after[0] - fault_at) * 1000)
        around = [t for t in times if t <= fault_at][-1:] + [t for t in times if t > fault_at]
        longest_pause.append(max((b - a) * 1000 for a, b in itertools.pairwise(around)))
    return first_on_new_leader, longest_pause


def summary(values: list[float]) -> str:
    ordered = sorted(values)

    def at(p: float) -> float:
        return ordered[min(int(p * len(ordered)), len(ordered) - 1)]

    return f"p50 {at(0.5):8.1f} ms   p99 {at(0.99):8.1f} ms   max {ordered[-1]:8.1f} ms"


async def main_async(arguments: argparse.Namespace) -> int:
    print(
        f"fault on broker {VICTIM}, leader of every partition; time from the fault to each partition's "
        f"first acknowledged acks=all write (zookeeper.session.timeout.ms={arguments.session_timeout_ms})"
    )
    for fault in arguments.faults.split(","):
        for partitions in (int(p) for p in arguments.partitions.split(",")):
            first, pauses = await run_case(fault, partitions, arguments.session_timeout_ms, tls=arguments.tls)
            name = "hard kill (SIGKILL)" if fault == "kill" else "controlled shutdown (SIGTERM)"
            label = f"{name:30} {partitions:4d} partition(s)"
            print(f"{label}, fault -> first ack by the new leader: {summary(first)}")
            print(
                f"{'':30} {partitions:4d} partition(s), longest pause between acks:         {summary(pauses)}"
            )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.bench.failover", description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", default="1,200")
    parser.add_argument("--faults", default="kill,shutdown")
    parser.add_argument("--session-timeout-ms", type=int, default=6_000)
    parser.add_argument("--tls", action="store_true", help="HTTPS listeners")
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
