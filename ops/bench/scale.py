"""Scale benchmark (issue 19): a cluster holding thousands of partitions, idle and through failovers.

    python -m ops.bench.scale [--partitions 3000] [--idle-minutes 10] [--session-timeout-ms 6000]
                              [--phases idle,shutdown,kill]

A fresh cluster of three broker processes and one topic of ``--partitions`` partitions, RF 3,
``min.insync.replicas=2``, leadership balanced: partition p's preferred leader is broker
``p % 3 + 1`` and the order of its two followers alternates, so when a broker goes its partitions
move to both survivors. No records are written. Once every partition is led, a preferred leader
election restores that balance (a broker whose ZooKeeper session expired while the partitions were
created has lost its leaderships; the table says how many moved back). Phases:

* ``idle``: for ``--idle-minutes``, the CPU of each broker process and of ZooKeeper (% of one
  core, from /proc), the follower fetch requests each broker answered and sent per second, and the
  ISR shrinks and expands each broker made (its ``/metrics`` counters, read before and after).
  Goal: no shrink.
* ``shutdown``: SIGTERM to broker 1 (Kafka's controlled shutdown); per partition it led, the time
  from the signal to the partition state znode naming another leader (a ZooKeeper watch per
  partition: the instant of the notification whose re-read shows it). Goal: all within 2 s. Then
  broker 1 starts again, rejoins every ISR, and a preferred leader election gives it its
  partitions back.
* ``kill``: SIGKILL to broker 1, the same measurement; the controller acts when broker 1's
  ZooKeeper session expires. Goal: all within ``zookeeper.session.timeout.ms`` + 1 s.

The failover figures are the controller's decisions as ZooKeeper records them; the new leaders
serve once their LeaderAndIsr arrives, which the controller sends right after the elections,
before the ISR removals that follow.

Printed: one markdown table (scale_figures.py), the goal beside each figure. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import aiohttp

from actors.common.errors import ErrorCode
from actors.common.types import TopicPartition
from actors.server import zk_data
from ops.bench.proc_cpu import cpu_used, sample
from ops.bench.scale_figures import (
    CounterSpec,
    Figure,
    RunInfo,
    counter_values,
    counters_used,
    fmt,
    markdown_table,
    per_broker,
    per_second,
    summarize,
)
from ops.clients.admin import Admin, ElectionType, NewTopic
from ops.local.cluster import LocalCluster
from ops.local.zk_waits import PartitionStateWatch, wait_for_partition_states
from runtime.clock import LoopClock, wait_ms

TOPIC = "bench-scale"
VICTIM = 1
BROKERS = (1, 2, 3)
PHASES = ("idle", "shutdown", "kill")


def replica_assignment(partitions: int) -> dict[int, list[int]]:
    """Preferred leader ``p % 3 + 1``; followers in alternating order (module docstring)."""
    assignment = {}
    for p in range(partitions):
        leader = p % 3 + 1
        first, second = leader % 3 + 1, (leader + 1) % 3 + 1
        assignment[p] = [leader, first, second] if (p // 3) % 2 == 0 else [leader, second, first]
    return assignment


async def wait_until(
    cluster: LocalCluster,
    partitions: Sequence[int],
    predicate: Callable[[int, zk_data.PartitionState], bool],
    timeout_s: float,
) -> None:
    await wait_for_partition_states(cluster.admin, TOPIC, partitions, predicate, timeout_s=timeout_s)


async def lead_preferred(cluster: LocalCluster, admin: Admin, partitions: Sequence[int]) -> int:
    """Once every replica is in sync, a preferred leader election for ``partitions``, again every
    second for those whose preferred replica the controller does not count live yet (a broker
    re-registering after its session expired); returns when each is led by its preferred replica.
    How many were elected."""
    preferred = {p: replicas[0] for p, replicas in replica_assignment(max(partitions) + 1).items()}
    await wait_until(cluster, partitions, lambda _, state: len(state.isr) == 3, timeout_s=900)
    elected, remaining = 0, list(partitions)
    for _ in range(300):
        results = await admin.elect_leaders(
            ElectionType.PREFERRED, [TopicPartition(TOPIC, p) for p in remaining]
        )
        elected += sum(1 for error in results.values() if error is None)
        errors = {e.error_code for e in results.values() if e is not None} - {ErrorCode.ELECTION_NOT_NEEDED}
        if errors - {ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}:
            raise RuntimeError(
                f"preferred leader election failed: {', '.join(sorted(e.name for e in errors))}"
            )
        remaining = [tp.partition for tp, e in results.items() if e is not None and e.error_code in errors]
        if not remaining:
            break
        await wait_ms(LoopClock(), 1000)
    await wait_until(cluster, partitions, lambda p, state: state.leader == preferred[p], timeout_s=300)
    return elected


async def scrape(cluster: LocalCluster) -> dict[int, dict[str, float | None]]:
    """Broker -> its idle-phase counters (scale_figures.COUNTERS)."""
    results = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        for broker_id in BROKERS:
            async with session.get(f"{cluster.processes[broker_id].url}/metrics") as answer:
                results[broker_id] = counter_values(await answer.text())
    return results


# What the brokers' event loops went through since each process started (runtime/loop_lag.py) and
# their ZooKeeper session expiries: a loop stalled past the session timeout loses the session.
LOOP_FIGURES: Final[Mapping[str, CounterSpec]] = {
    "loop_lag_max": CounterSpec("actorlog_event_loop_lag_max_seconds"),
    "loop_stalls": CounterSpec("actorlog_event_loop_stalls_total"),
    "session_expiries": CounterSpec("kafka_server_sessionexpirelistener_zookeeperexpires_total"),
}


async def loop_figures(cluster: LocalCluster, when: str) -> list[Figure]:
    """Per broker: the largest event-loop lag, the stalls of 1 s or more and the ZooKeeper session
    expiries, each since the broker process started."""
    values: dict[int, dict[str, float | None]] = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        for broker_id in BROKERS:
            async with session.get(f"{cluster.processes[broker_id].url}/metrics") as answer:
                values[broker_id] = counter_values(await answer.text(), LOOP_FIGURES)

    def column(name: str, scale: float = 1.0) -> dict[int, float | None]:
        return {b: None if (v := found[name]) is None else v * scale for b, found in values.items()}

    return [
        Figure(
            f"{when}: largest event-loop lag", per_broker(column("loop_lag_max", 1000), "ms", 0), "< 1000 ms"
        ),
        Figure(f"{when}: event-loop stalls ≥ 1 s", per_broker(column("loop_stalls"), "", 0), "0"),
        Figure(f"{when}: ZooKeeper session expiries", per_broker(column("session_expiries"), "", 0), "0"),
    ]


def pids(cluster: LocalCluster) -> dict[str, int]:
    found = {f"broker {b}": p.process.pid for b, p in cluster.processes.items() if p.process is not None}
    if cluster.zookeeper_pid is not None:
        found["ZooKeeper"] = cluster.zookeeper_pid
    return found


async def idle_phase(cluster: LocalCluster, minutes: float) -> list[Figure]:
    processes = pids(cluster)
    counters_before, cpu_before, started = await scrape(cluster), sample(processes), time.perf_counter()
    await wait_ms(LoopClock(), int(minutes * 60_000))
    cpu_after, counters_after = sample(processes), await scrape(cluster)
    seconds = time.perf_counter() - started
    cpu = {label: per_second(used, seconds) for label, used in cpu_used(cpu_before, cpu_after).items()}
    used = {b: counters_used(counters_before[b], counters_after[b]) for b in BROKERS}

    def each(name: str, rate: bool = False) -> dict[int, float | None]:
        return {b: per_second(used[b][name], seconds) if rate else used[b][name] for b in BROKERS}

    def percent(label: str) -> float | None:
        value = cpu.get(label)
        return None if value is None else value * 100

    label = f"idle {seconds / 60:.1f} min"
    return [
        Figure(f"{label}: CPU, % of one core", per_broker({b: percent(f"broker {b}") for b in BROKERS}, "%")),
        Figure(f"{label}: ZooKeeper CPU, % of one core", fmt(percent("ZooKeeper"), "%")),
        Figure(f"{label}: follower fetches answered/s", per_broker(each("follower_fetches_handled", True))),
        Figure(f"{label}: follower fetches sent/s", per_broker(each("follower_fetches_sent", True))),
        Figure(f"{label}: ISR shrinks", per_broker(each("isr_shrinks"), digits=0), "0"),
        Figure(f"{label}: ISR expands", per_broker(each("isr_expands"), digits=0)),
        Figure(f"{label}: failed ISR updates", per_broker(each("failed_isr_updates"), digits=0)),
    ]


def led_by_victim(partitions: int) -> list[int]:
    return [p for p, replicas in replica_assignment(partitions).items() if replicas[0] == VICTIM]


def moved(_partition: int, state: zk_data.PartitionState) -> bool:
    return state.leader not in (VICTIM, -1)


async def leaders_move(
    cluster: LocalCluster, partitions: int, sig: signal.Signals, timeout_s: float
) -> tuple[list[float], float]:
    """Signal broker 1; per partition it led, ms from the signal to another leader; and ms to its exit."""
    watch = PartitionStateWatch(cluster.admin, TOPIC, led_by_victim(partitions), moved)
    if already := await watch.arm():
        raise RuntimeError(f"{already} partition(s) meant to be led by broker {VICTIM} are not")
    clock = asyncio.get_running_loop()  # the watch's instants are the loop's clock
    signalled = clock.time()
    stopping = asyncio.ensure_future(cluster.stop_broker(VICTIM, sig))
    times = await watch.wait(timeout_s)
    await stopping
    exited = clock.time()
    return [(t - signalled) * 1000 for t in times.values()], (exited - signalled) * 1000


def move_figures(name: str, millis: list[float], goal_ms: int) -> list[Figure]:
    summary = summarize(millis)
    if summary is None:
        return [Figure(f"{name}: all leaderships moved", "n/a (no partitions)", f"≤ {goal_ms} ms")]
    return [
        Figure(
            f"{name}: all {summary.count} leaderships moved", fmt(summary.max, "ms", 0), f"≤ {goal_ms} ms"
        ),
        Figure(
            f"{name}: per partition p50 / p99", f"{fmt(summary.p50, 'ms', 0)} / {fmt(summary.p99, 'ms', 0)}"
        ),
    ]


async def shutdown_phase(cluster: LocalCluster, admin: Admin, partitions: int) -> list[Figure]:
    millis, exit_ms = await leaders_move(cluster, partitions, signal.SIGTERM, timeout_s=120)
    figures = move_figures("controlled shutdown (SIGTERM)", millis, 2000)
    figures.append(Figure("controlled shutdown: SIGTERM to process exit", fmt(exit_ms, "ms", 0)))
    started = time.perf_counter()
    await cluster.start_broker(VICTIM)
    await wait_until(cluster, range(partitions), lambda _, state: VICTIM in state.isr, timeout_s=900)
    rejoined = time.perf_counter()
    await lead_preferred(cluster, admin, led_by_victim(partitions))
    figures.append(Figure("restart: broker 1 back in every ISR", fmt((rejoined - started) * 1000, "ms", 0)))
    figures.append(
        Figure(
            "restart: preferred election, broker 1 leads again",
            fmt((time.perf_counter() - rejoined) * 1000, "ms", 0),
        )
    )
    return figures


async def kill_phase(cluster: LocalCluster, partitions: int, session_timeout_ms: int) -> list[Figure]:
    controller = await cluster.controller_id()
    millis, _ = await leaders_move(
        cluster, partitions, signal.SIGKILL, timeout_s=session_timeout_ms / 1000 + 120
    )
    name = f"hard kill (SIGKILL){' of the controller' if controller == VICTIM else ''}"
    return move_figures(name, millis, session_timeout_ms + 1000)


async def run(arguments: argparse.Namespace, command: str) -> str:
    partitions: int = arguments.partitions
    load_start = "/".join(f"{x:.2f}" for x in os.getloadavg())
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="actorlog-bench-scale-") as base:
        config = {
            "zookeeper.session.timeout.ms": str(arguments.session_timeout_ms),
            "auto.leader.rebalance.enable": "false",  # the benchmark runs the preferred election itself
        }
        async with (
            LocalCluster(Path(base), brokers=3, base_port=0, config=config) as cluster,
            Admin(
                cluster.bootstrap_servers,
                secret=cluster.secret,
                command_config=cluster.client_properties_path,
                default_api_timeout_ms=900_000,
                request_timeout_ms=900_000,
            ) as admin,
        ):
            started = time.perf_counter()
            topic = NewTopic(
                name=TOPIC,
                replica_assignment=replica_assignment(partitions),
                configs={"min.insync.replicas": "2"},
            )
            if (error := (await admin.create_topics([topic], timeout_ms=900_000))[TOPIC]) is not None:
                raise error
            await wait_until(cluster, range(partitions), lambda _, state: state.leader != -1, timeout_s=900)
            created_ms = (time.perf_counter() - started) * 1000
            figures.append(
                Figure(f"create the topic ({partitions} partitions, all led)", fmt(created_ms, "ms", 0))
            )
            # Leadership may have moved meanwhile (a broker whose ZooKeeper session expired).
            elected = await lead_preferred(cluster, admin, range(partitions))
            figures.append(
                Figure("then: partitions not led by their preferred replica (elected)", str(elected))
            )
            figures += await loop_figures(cluster, "topic created")
            try:
                if "idle" in arguments.phases:
                    figures += await idle_phase(cluster, arguments.idle_minutes)
                if "shutdown" in arguments.phases:
                    figures += await shutdown_phase(cluster, admin, partitions)
                if "kill" in arguments.phases:
                    figures += await kill_phase(cluster, partitions, arguments.session_timeout_ms)
            except RuntimeError as error:
                # The figures so far still say something (a failure often follows a stalled loop).
                figures.append(Figure("the run stopped", str(error)))
            if "kill" not in arguments.phases:
                # Every broker still runs (broker 1's figures are its restarted process's).
                figures += await loop_figures(cluster, "end of run, since each broker (re)started")
    load_end = "/".join(f"{x:.2f}" for x in os.getloadavg())
    info = RunInfo(
        date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        command=command,
        partitions=partitions,
        session_timeout_ms=arguments.session_timeout_ms,
        load=f"{load_start} at the start, {load_end} at the end (1/5/15 min)",
    )
    return markdown_table(info, figures)


def _phases(text: str) -> tuple[str, ...]:
    phases = tuple(p.strip() for p in text.split(",") if p.strip())
    if unknown := [p for p in phases if p not in PHASES]:
        raise argparse.ArgumentTypeError(
            f"unknown phase(s) {', '.join(unknown)}: choose from {','.join(PHASES)}"
        )
    return phases


def _positive(kind: Callable[[str], float | int]) -> Callable[[str], float | int]:
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text!r} must be positive")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ops.bench.scale", description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=_positive(int), default=3000)
    parser.add_argument("--idle-minutes", type=_positive(float), default=10.0)
    parser.add_argument("--session-timeout-ms", type=_positive(int), default=6_000)
    parser.add_argument("--phases", type=_phases, default=PHASES, help="comma-separated: idle,shutdown,kill")
    return parser


def main(argv: list[str] | None = None) -> int:
    arguments = build_parser().parse_args(argv)
    command = shlex.join(["python", "-m", "ops.bench.scale", *(sys.argv[1:] if argv is None else argv)])
    print(asyncio.run(run(arguments, command)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
