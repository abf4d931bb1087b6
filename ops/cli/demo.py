"""``actorlog demo``: the main job, end to end, on the embedded default. It ends by itself.

1. a local cluster (3 brokers, its own ZooKeeper; with ``--tls`` HTTPS listeners, certificates
   made as ``cluster up --tls`` makes them, and every client verifying them) and a metric-snapshot
   exporter;
2. a topic (3 partitions, RF 3, min.insync.replicas 2) and steady idempotent acks=all traffic;
3. a follower is stalled (SIGSTOP): its partitions' ISRs shrink after ``replica.lag.time.max.ms``;
   it is resumed (SIGCONT): it catches up and the ISRs expand;
4. a leader is killed (SIGKILL): the controller elects another within the ZooKeeper session
   timeout; the broker is restarted and rejoins as a follower;
5. traffic stops; everything acknowledged is read back (per partition, in order, no duplicates);
6. the PySpark rollup runs over the snapshots and prints its summary and report path; the demo
   then checks the rollup against its own timeline (``demo_reconcile.py``): each ISR state it saw
   appear has an interval in the rollup starting within a second of it, and the ISR shrinks and
   expands its metrics counted are the rollup's state-change events; a disagreement fails the demo;
7. everything stops; nothing is left running.

Every wait is on an event (a ZooKeeper watch on a partition state znode) with a timeout; the
timeline printed at the end says when each event happened and what the metrics showed then.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import shutil
import signal
import ssl
import subprocess
import sys
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from actors.clients.producer.protocol import RecordMetadata
from actors.common.errors import KafkaError
from actors.common.types import TopicPartition
from ops.cli.demo_reconcile import Observation, reconcile
from ops.clients.admin import Admin
from ops.clients.consumer import Consumer
from ops.clients.producer import Producer
from ops.local.cluster import ROOT, LocalCluster
from ops.local.zk_waits import read_partition_state, wait_for_partition_state
from ops.local.zookeeper import ZooKeeperNotInstalledError, ZooKeeperStartError
from ops.properties import ConfigError
from ops.snapshots import ExportOptions, RoundResult, run_export
from ops.snapshots import log as snapshots_log
from runtime.clock import LoopClock, wait_ms

__all__ = ["main"]

TOPIC = "demo-orders"
PARTITIONS = 3
# A stall longer than replica.lag.time.max.ms but shorter than the session timeout: the leader
# shrinks the ISR (a slow follower), the controller does not declare the broker dead.
LAG_MS = 3_000
SESSION_MS = 10_000
_MARKER = ".actorlog-demo"


# ------------------------------------------------------------------------------------ timeline


@dataclass
class Timeline:
    clock: LoopClock
    started_ms: int
    events: list[tuple[float, str, list[str]]] = field(default_factory=list)
    # The ISR states the demo watched appear, for the check against the rollup.
    observations: list[Observation] = field(default_factory=list)
    started_wall_ms: int = field(init=False)

    def __post_init__(self) -> None:
        self.started_wall_ms = self.clock.wall_clock_ms() - (self.clock.now_ms() - self.started_ms)

    def observe(
        self, what: str, tp: TopicPartition, isr: Sequence[int], *, leader_epoch: int | None = None
    ) -> None:
        """Note an ISR state the demo just saw in ZooKeeper (its watch fired now)."""
        self.observations.append(
            Observation(what, tp.topic, tp.partition, tuple(isr), self.clock.wall_clock_ms(), leader_epoch)
        )

    def now(self) -> int:
        return self.clock.now_ms()

    def add(self, title: str, details: list[str] | None = None, *, at_ms: int | None = None) -> None:
        """Record an event; ``at_ms`` is when it was observed (before the metrics were read)."""
        seconds = ((self.clock.now_ms() if at_ms is None else at_ms) - self.started_ms) / 1000
        self.events.append((seconds, title, details or []))
        print(f"[{seconds:6.1f}s] {title}", flush=True)
        for line in details or []:
            print(f"           {line}", flush=True)

    def render(self) -> str:
        lines = ["", "Timeline", "--------"]
        for seconds, title, details in self.events:
            lines.append(f"{seconds:7.1f} s  {title}")
            lines += [f"           {detail}" for detail in details]
        return "\n".join(lines)


@dataclass(frozen=True)
class MetricView:
    """The cluster-wide numbers the demo reports. Counters are totals since the cluster started,
    summed over every broker ever scraped (a killed broker keeps what it had counted, a restarted
    one adds to it); gauges sum the brokers that answered this scrape."""

    isr_shrinks: float
    isr_expands: float
    under_replicated: float
    offline: float
    active_controllers: float
    leader_elections: float
    propagations_written: float
    # Leader elections that gave the demo topic's partitions their first leaders (not a failover).
    initial_elections: float = 0

    def describe(self) -> str:
        return (
            f"metrics: isr shrinks {self.isr_shrinks:.0f}, isr expands {self.isr_expands:.0f}, "
            f"under-replicated partitions {self.under_replicated:.0f}, "
            f"offline partitions {self.offline:.0f}, active controllers {self.active_controllers:.0f}, "
            f"leader elections {self.leader_elections:.0f} "
            f"({self.initial_elections:.0f} for the new topic's first leaders), "
            f"ISR changes propagated {self.propagations_written:.0f}"
        )


_COUNTERS = {
    "kafka_server_replicamanager_isrshrinks_total": "isr_shrinks",
    "kafka_server_replicamanager_isrexpands_total": "isr_expands",
    "kafka_controller_controllerstats_leaderelection_duration_seconds_count": "leader_elections",
}
_GAUGES = {
    "kafka_server_replicamanager_underreplicatedpartitions": "under_replicated",
    "kafka_controller_kafkacontroller_offlinepartitionscount": "offline",
    "kafka_controller_kafkacontroller_activecontrollercount": "active_controllers",
}


@dataclass
class ClusterMetrics:
    """Scrapes every broker's ``/metrics`` and keeps counter totals that never go backwards: per
    broker and counter the last value seen, plus what earlier incarnations had counted (a value
    below the last one is a restart, as PromQL's ``increase`` treats a counter reset)."""

    cluster: LocalCluster
    initial_elections: float = 0
    # The cluster's CA with --tls; True: aiohttp's default (plain http:// brokers never use it).
    verify: ssl.SSLContext | bool = True
    _last: dict[tuple[int, str], float] = field(default_factory=dict)
    _before_restarts: dict[tuple[int, str], float] = field(default_factory=lambda: defaultdict(float))

    async def scrape(self) -> MetricView:
        gauges: dict[str, float] = defaultdict(float)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            for broker in self.cluster.processes.values():
                if not broker.running or broker.paused:
                    continue  # a stalled or dead broker answers nothing: its counters keep their last value
                try:
                    async with session.get(f"{broker.url}/metrics", ssl=self.verify) as response:
                        text = await response.text()
                except (aiohttp.ClientError, TimeoutError):
                    continue
                counters: dict[str, float] = defaultdict(float)
                for family in text_string_to_metric_families(text):
                    for sample in family.samples:
                        if sample.name in _COUNTERS:
                            counters[_COUNTERS[sample.name]] += sample.value
                        elif sample.name in _GAUGES:
                            gauges[_GAUGES[sample.name]] += sample.value
                        elif (
                            sample.name == "kafka_server_isrchangepropagation_checks_total"
                            and sample.labels.get("outcome") in ("written", "forced")
                        ):
                            counters["propagations_written"] += sample.value
                for name, value in counters.items():
                    key = (broker.broker_id, name)
                    last = self._last.get(key, 0.0)
                    if value < last:
                        self._before_restarts[key] += last
                    self._last[key] = value
        totals: dict[str, float] = defaultdict(float)
        for (broker_id, name), value in self._last.items():
            totals[name] += value + self._before_restarts[(broker_id, name)]
        return MetricView(
            isr_shrinks=totals["isr_shrinks"],
            isr_expands=totals["isr_expands"],
            under_replicated=gauges["under_replicated"],
            offline=gauges["offline"],
            active_controllers=gauges["active_controllers"],
            leader_elections=totals["leader_elections"],
            propagations_written=totals["propagations_written"],
            initial_elections=self.initial_elections,
        )

    async def settled(
        self, condition: Callable[[MetricView], bool], *, timeout_ms: int = 3_000
    ) -> MetricView:
        """Scrape until ``condition`` holds (or ``timeout_ms`` passes): a ZooKeeper watch can fire
        a moment before the broker that made the change counts it."""
        clock = LoopClock()
        deadline = clock.now_ms() + timeout_ms
        view = await self.scrape()
        while not condition(view) and clock.now_ms() < deadline:
            await wait_ms(clock, 100)
            view = await self.scrape()
        return view


# ------------------------------------------------------------------------------------ traffic


@dataclass
class Traffic:
    """Keyed, idempotent, acks=all records at a steady rate; what was acknowledged, per partition."""

    producer: Producer
    clock: LoopClock
    rate_per_s: int = 300
    sent: int = 0
    failed: int = 0
    acknowledged: dict[int, list[tuple[int, bytes]]] = field(default_factory=lambda: defaultdict(list))
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        started = self.clock.now_ms()
        while not self.stop.is_set():
            due = started + self.sent * 1000 // self.rate_per_s
            ahead = due - self.clock.now_ms()
            if ahead > 0:
                await wait_ms(self.clock, ahead)
            value = f"order-{self.sent:07d}".encode()
            future = await self.producer.enqueue(TOPIC, value, key=f"customer-{self.sent % 97}".encode())
            future.add_done_callback(self._on_done(value))
            self.sent += 1
        await self.producer.flush()

    def _on_done(self, value: bytes) -> Callable[[asyncio.Future[RecordMetadata]], None]:
        def done(future: asyncio.Future[RecordMetadata]) -> None:
            if future.cancelled() or future.exception() is not None:
                self.failed += 1
                return
            metadata = future.result()
            self.acknowledged[metadata.partition].append((metadata.offset, value))

        return done

    @property
    def acknowledged_count(self) -> int:
        return sum(len(records) for records in self.acknowledged.values())


# ------------------------------------------------------------------------------------ the run


async def run_demo(data_dir: Path, *, prometheus: bool, rollup: bool, tls: bool = False) -> int:
    clock = LoopClock()
    timeline = Timeline(clock, clock.now_ms())
    cluster = LocalCluster(
        data_dir,
        brokers=3,
        base_port=0,
        prometheus=prometheus,
        tls=tls,
        config={
            "replica.lag.time.max.ms": str(LAG_MS),
            "zookeeper.session.timeout.ms": str(SESSION_MS),
            "leader.imbalance.check.interval.seconds": "10",
            "controlled.shutdown.retry.backoff.ms": "1000",
        },
    )
    async with cluster:
        metrics = ClusterMetrics(cluster, verify=cluster.ssl_context or True)
        # Passed to every client even with the broker identity as the credential: it says the
        # security protocol (and the truststore), so no client reads another directory's.
        client_properties = cluster.client_properties_path
        controller = await cluster.controller_id()
        details = [f"broker {b.broker_id}: {b.url}" for b in cluster.processes.values()]
        details.append(f"controller: broker {controller}; ZooKeeper {cluster.zookeeper_connect}")
        if cluster.prometheus_url:
            details.append(f"Prometheus: {cluster.prometheus_url}")
        timeline.add(f"cluster up (3 brokers{', HTTPS' if tls else ''}, ZooKeeper)", details)

        stop_export = asyncio.Event()
        unreachable: dict[int, int] = defaultdict(int)
        export = asyncio.ensure_future(_export(cluster, data_dir / "snapshots", stop_export, unreachable))
        before_topic = await metrics.scrape()
        async with Admin(
            cluster.bootstrap_servers, secret=cluster.secret, command_config=client_properties
        ) as admin:
            await admin.create_topic(TOPIC, num_partitions=PARTITIONS, replication_factor=3)
            descriptions = await admin.describe_topics([TOPIC])
        created = await metrics.settled(lambda m: m.leader_elections > before_topic.leader_elections)
        metrics.initial_elections = created.leader_elections - before_topic.leader_elections
        timeline.add(
            f"topic {TOPIC} created",
            [
                f"partition {p.partition}: leader {p.leader}, replicas {list(p.replicas)}, isr {list(p.isr)}"
                for p in descriptions[0].partitions
            ],
        )
        async with Producer(
            cluster.bootstrap_servers, secret=cluster.secret, properties_file=client_properties
        ) as producer:
            traffic = Traffic(producer, clock)
            driving = asyncio.ensure_future(traffic.run())
            await _pause(clock, 5_000)
            timeline.add(
                f"steady traffic: {traffic.acknowledged_count} records acknowledged",
                [(await metrics.scrape()).describe()],
            )
            await _stall_and_resume(cluster, metrics, timeline, traffic)
            await _kill_a_leader(cluster, metrics, timeline, traffic)
            await _pause(clock, 3_000)
            traffic.stop.set()
            await driving
        timeline.add(
            f"traffic stopped: {traffic.sent} sent, {traffic.acknowledged_count} acknowledged, "
            f"{traffic.failed} failed (each failure was reported to its sender)",
        )
        lost, duplicates, read = await _read_back(cluster, traffic)
        final = await metrics.scrape()
        timeline.add(
            f"read back {read} records: {lost} acknowledged records lost, {duplicates} duplicated",
            [final.describe()],
        )
        await _pause(clock, 2_500)  # one more snapshot round after the last event
        stop_export.set()
        rounds = await export
        timeline.add(
            f"metric snapshots: {rounds} rounds in {data_dir / 'snapshots'}",
            [
                f"broker {broker_id} could not be scraped in {count} round{'s' if count > 1 else ''} "
                "(stalled or down, as planned)"
                for broker_id, count in sorted(unreachable.items())
            ],
        )
    timeline.add("cluster stopped (controlled shutdown of each broker, then ZooKeeper)")
    print(timeline.render(), flush=True)
    code = 0 if lost == 0 and duplicates == 0 else 1
    if rollup:
        code = max(code, _rollup(data_dir))
        if code == 0:
            counted = {"isr_shrink": round(final.isr_shrinks), "isr_expand": round(final.isr_expands)}
            code = _check_against_rollup(data_dir / "rollup", timeline, counted)
    return code


def _check_against_rollup(out: Path, timeline: Timeline, counted: dict[str, int]) -> int:
    """Print the rollup's intervals beside the timeline's observations; 1 if anything disagrees."""
    import pyarrow.parquet as pq  # here: only a demo that ran the rollup reads its tables

    intervals = pq.read_table(out / "tables" / "isr_intervals").to_pylist()
    totals = pq.read_table(out / "tables" / "state_change_totals").to_pylist()
    result = reconcile(timeline.observations, intervals, counted, totals, timeline.started_wall_ms)
    print("\nThe timeline against the rollup (ISR intervals from the brokers' state-change events):")
    for line in result.lines:
        print(f"  {line}")
    if not result.agreed:
        print("the rollup disagrees with what the demo saw", file=sys.stderr)
        return 1
    return 0


async def _pause(clock: LoopClock, ms: int) -> None:
    """Let traffic run for a while (the demo's pacing, not a synchronisation)."""
    await wait_ms(clock, ms)


async def _export(cluster: LocalCluster, out: Path, stop: asyncio.Event, unreachable: dict[int, int]) -> int:
    """The snapshot exporter beside the demo. The stalled and the killed broker cannot be scraped
    for a while, on purpose: those failures are counted for the timeline, not logged into it."""
    options = ExportOptions(
        bootstrap=tuple(b.url for b in cluster.processes.values()),
        out_dir=out,
        interval_ms=2_000,
        scrape_timeout_s=1.0,
        secret=cluster.secret,
        ssl_context=cluster.ssl_context,
    )

    def count_failures(result: RoundResult) -> None:
        for broker_id in result.failures:
            unreachable[broker_id] += 1

    exporter_log = snapshots_log
    level = exporter_log.level
    exporter_log.setLevel(logging.ERROR)
    try:
        return await run_export(options, stop, count_failures)
    finally:
        exporter_log.setLevel(level)


async def _stall_and_resume(
    cluster: LocalCluster, metrics: ClusterMetrics, timeline: Timeline, traffic: Traffic
) -> None:
    tp = TopicPartition(TOPIC, 0)
    state, _ = await read_partition_state(cluster.admin, tp)
    controller = await cluster.controller_id()
    followers = [b for b in state.isr if b != state.leader]
    follower = next((b for b in followers if b != controller), followers[0])
    before = await metrics.scrape()
    cluster.pause_broker(follower)
    timeline.add(f"broker {follower} stalled (SIGSTOP): it stops fetching as follower of {tp}")
    shrunk = await wait_for_partition_state(
        cluster.admin, tp, lambda s: follower not in s.isr, timeout_s=LAG_MS * 3 / 1000
    )
    seen = timeline.now()
    timeline.observe(f"ISR of {tp} shrank to {list(shrunk.isr)}", tp, shrunk.isr)
    timeline.add(
        at_ms=seen,
        title=f"ISR of {tp} shrank to {list(shrunk.isr)} (replica.lag.time.max.ms = {LAG_MS} ms); "
        f"acks=all writes continue with min.insync.replicas 2",
        details=[
            (await metrics.settled(lambda m: m.isr_shrinks > before.isr_shrinks)).describe(),
            f"{traffic.acknowledged_count} records acknowledged so far",
        ],
    )
    cluster.resume_broker(follower)
    timeline.add(f"broker {follower} resumed (SIGCONT): it catches up")
    expanded = await wait_for_partition_state(cluster.admin, tp, lambda s: follower in s.isr, timeout_s=60)
    seen = timeline.now()
    timeline.observe(f"ISR of {tp} expanded to {list(expanded.isr)}", tp, expanded.isr)
    view = await metrics.settled(lambda m: m.isr_expands > before.isr_expands)
    timeline.add(f"ISR of {tp} expanded to {list(expanded.isr)}", [view.describe()], at_ms=seen)
    # Leaders tell the controller about ISR changes through /isr_change_notification, at most
    # once per 5 s of quiet (or every 60 s while changes keep coming): watch it happen.
    propagated = await metrics.settled(
        lambda m: m.propagations_written > view.propagations_written, timeout_ms=12_000
    )
    timeline.add(
        "ISR changes propagated to the controller (isr_change_notification) after 5 s without changes",
        [propagated.describe()],
    )


async def _kill_a_leader(
    cluster: LocalCluster, metrics: ClusterMetrics, timeline: Timeline, traffic: Traffic
) -> None:
    # A leader that is not the controller: the controller's own failover is another story.
    controller = await cluster.controller_id()
    states = {
        p: (await read_partition_state(cluster.admin, TopicPartition(TOPIC, p)))[0] for p in range(PARTITIONS)
    }
    partition = next((p for p, s in states.items() if s.leader != controller), 0)
    tp, state = TopicPartition(TOPIC, partition), states[partition]
    victim = state.leader
    before = await metrics.scrape()
    await cluster.stop_broker(victim, signal.SIGKILL)
    timeline.add(f"broker {victim}, leader of {tp} (epoch {state.leader_epoch}), killed (SIGKILL)")
    elected = await wait_for_partition_state(
        cluster.admin, tp, lambda s: s.leader not in (victim, -1), timeout_s=(SESSION_MS + 15_000) / 1000
    )
    seen = timeline.now()
    timeline.observe(
        f"broker {elected.leader} elected leader of {tp} "
        f"(epoch {elected.leader_epoch}), ISR {list(elected.isr)}",
        tp,
        elected.isr,
        leader_epoch=elected.leader_epoch,
    )
    timeline.add(
        at_ms=seen,
        title=f"controller elected broker {elected.leader} leader of {tp} "
        f"(leader epoch {elected.leader_epoch}, ISR {list(elected.isr)}) "
        f"once broker {victim}'s ZooKeeper session expired",
        details=[
            (await metrics.settled(lambda m: m.leader_elections > before.leader_elections)).describe(),
            f"{traffic.acknowledged_count} records acknowledged so far",
        ],
    )
    await cluster.start_broker(victim)
    timeline.add(f"broker {victim} restarted")
    rejoined = await wait_for_partition_state(cluster.admin, tp, lambda s: victim in s.isr, timeout_s=60)
    seen = timeline.now()
    timeline.observe(f"broker {victim} rejoined the ISR of {tp}: {list(rejoined.isr)}", tp, rejoined.isr)
    timeline.add(
        f"broker {victim} caught up and rejoined the ISR of {tp}: {list(rejoined.isr)}",
        [(await metrics.scrape()).describe()],
        at_ms=seen,
    )


async def _read_back(cluster: LocalCluster, traffic: Traffic) -> tuple[int, int, int]:
    """(acknowledged records missing, values seen twice, records read)."""
    lost = duplicates = read = 0
    async with Consumer(
        cluster.bootstrap_servers,
        secret=cluster.secret,
        config={"auto.offset.reset": "earliest"},
        config_file=cluster.client_properties_path,
    ) as consumer:
        partitions = await consumer.partitions_for(TOPIC)
        ends = await consumer.end_offsets(partitions)
        consumer.assign(partitions)
        found: dict[int, dict[int, bytes | None]] = defaultdict(dict)
        remaining = sum(ends.values())
        while remaining > 0:
            records = await consumer.poll(timeout_ms=5_000)
            if not records:
                break
            for record in records:
                if record.offset < ends[TopicPartition(record.topic, record.partition)]:
                    found[record.partition][record.offset] = record.value
                    remaining -= 1
    values: list[bytes | None] = [v for partition in found.values() for v in partition.values()]
    read = len(values)
    duplicates = read - len(set(values))
    for partition, acknowledged in traffic.acknowledged.items():
        for offset, value in acknowledged:
            if found[partition].get(offset) != value:
                lost += 1
    return lost, duplicates, read


def _rollup(data_dir: Path) -> int:
    """The PySpark rollup over the demo's snapshots, in its own process (Spark's JVM and all)."""
    print("\nRollup (PySpark, local mode) over the demo's metric snapshots:", flush=True)
    completed = subprocess.run(
        [
            sys.executable, "-m", "ops", "rollup",
            "--snapshots", str(data_dir / "snapshots"), "--out", str(data_dir / "rollup"),
            "--window", "10s", "--scrape-interval", "2s", "--flap-span", "1m",
            "--conf", "spark.log.level=ERROR",
        ],
        cwd=ROOT,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
        check=False,
    )  # fmt: skip
    if completed.returncode != 0:
        print(f"rollup failed (exit {completed.returncode})", file=sys.stderr)
        return 1
    print(f"\nReport: {data_dir / 'rollup' / 'report' / 'index.html'}", flush=True)
    return 0


# ---------------------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="actorlog demo", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--data-dir", type=Path, default=Path("actorlog-demo"), help="(default ./actorlog-demo)"
    )
    parser.add_argument("--prometheus", action="store_true", help="also run Prometheus against the cluster")
    parser.add_argument("--no-rollup", action="store_true", help="skip the PySpark rollup at the end")
    parser.add_argument(
        "--tls",
        action="store_true",
        help="HTTPS listeners (certificates made in DATA_DIR/tls/ with openssl); every client verifies them",
    )
    arguments = parser.parse_args(argv)
    data_dir: Path = arguments.data_dir.resolve()
    if data_dir.exists() and any(data_dir.iterdir()):
        if not (data_dir / _MARKER).exists():
            parser.error(f"{data_dir} exists and is not a previous demo's directory; choose --data-dir")
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / _MARKER).write_text("written by `actorlog demo`; removed by the next run\n")
    try:
        return asyncio.run(
            _with_interrupt(
                run_demo(
                    data_dir,
                    prometheus=arguments.prometheus,
                    rollup=not arguments.no_rollup,
                    tls=arguments.tls,
                )
            )
        )
    except (ConfigError, ZooKeeperNotInstalledError, ZooKeeperStartError) as error:
        print(f"actorlog demo: {error}", file=sys.stderr)
        return 2
    except (KafkaError, TimeoutError, RuntimeError) as error:
        print(f"actorlog demo: failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1


async def _with_interrupt(work: Awaitable[int]) -> int:
    """Ctrl-C cancels the demo; leaving the cluster's block stops everything it started."""
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, task.cancel)
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        return await task
    except asyncio.CancelledError:
        print("\nactorlog demo: interrupted; everything it started has been stopped", file=sys.stderr)
        return 130
    finally:
        with contextlib.suppress(Exception):
            loop.remove_signal_handler(signal.SIGINT)
            loop.remove_signal_handler(signal.SIGTERM)
