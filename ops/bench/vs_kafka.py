"""actorlog beside Apache Kafka on the same machine: ``make bench-vs-kafka`` (issue 19).

    python -m ops.bench.vs_kafka [--records N] [--workloads NAME,PATTERN,...] [--clusters kafka,actorlog]
                                 [--idle-records N] [--warmup-records N] [--producer-props K=V ...]
                                 [--quick] [--output-dir DIR]

Two clusters, one after the other, never both at once, each three brokers and one ZooKeeper on
loopback, the same ZooKeeper package (``ops/local/zookeeper.py``, ``forceSync`` as ``cluster up``
sets it) for both:

1. Apache Kafka in ZooKeeper mode from Kafka's jars (``ops/local/apache_kafka.py``: ``make
   kafka-jars`` fetches them from Maven Central into ``build/kafka/<version>/lib``);
2. ``actorlog cluster up`` (``ops/local/cluster_up.py``).

On each, every workload gets fresh topics (RF 3, ``min.insync.replicas=2``, created and deleted
with kafka-python's admin client over the Kafka listener, created only once every partition has
a leader) and runs the same tools with the same options:

* on Kafka: Kafka's own ``ProducerPerformance`` (``kafka-producer-perf-test.sh``), then, for the
  acks=all workloads, its ``ConsumerPerformance`` reading those records back;
* on actorlog: ``actorlog perf produce`` (over the brokers' HTTP listeners), then, for the
  acks=all workloads, ``actorlog perf consume`` reading those records back (Kafka's
  ConsumerPerformance needs consumer groups, which actorlog does not have yet), then Kafka's
  ``ProducerPerformance`` over actorlog's Kafka listener (SASL_PLAINTEXT, SCRAM-SHA-256, the
  ``client.properties`` the cluster writes, as ``make interop`` connects).

Workloads (``--workloads`` takes names or shell patterns, ``100B-*``): 100 B and 1 KiB records,
1 and 6 partitions, acks=1 and acks=all, no rate limit, each producer with its defaults otherwise
(Kafka 3.9's and actorlog's are the same: batch.size 16384, linger.ms 0); 1 KiB workloads send a
quarter of ``--records``. ``paced-100B-6p-acksall``: 100 B on 6 partitions, acks=all, paced at
20,000 records/s (half of ``--records``): the latency at a rate both clusters sustain, where the
unpaced runs' latencies only say how long the producer's buffer is. ``idle-acksall``: one record
at a time, 100 B, 1 partition, acks=all, ``linger.ms=0``, at 50 records/s (so each record is alone
on the wire and the next leaves after the last was acknowledged), ``--idle-records`` of them. Both
tools pace with Kafka's throttler, which counts from before the first send: the first send waits for
the topic's metadata, and the records due meanwhile then leave in one burst (about that wait x 50 of
them). They are why the idle run is 2,000 records long: on a quiet machine the wait is a few hundred
ms, so the burst stays under 1 % of the records and out of the p99 (the tool's percentiles are all
there is; it has no warm-up option in Kafka 3.9). Before its workloads each cluster takes an
unmeasured warm-up of ``--warmup-records``, 100 B on 6 partitions, through every tool used on
it: a Kafka broker's JIT needs it (its first runs are about half as fast), and Kafka's first
consumer group creates ``__consumer_offsets`` (50 partitions, RF 3), a one-off cost that would
otherwise be charged to the first consume row.

What is measured, per run: records/s, MB/s and avg/p50/p99/max latency from the tool's own final
line (``ops/bench/perf_lines.py``), and CPU seconds per million records of each process (the
client, each broker, ZooKeeper) from ``/proc/<pid>/stat`` before and after the run
(``ops/bench/proc_cpu.py``, ``ops/bench/vs_kafka_runs.py``; the client is charged its whole life,
start-up included; ``cluster up``'s own process, which only waits on its children, is not). One
markdown table (``ops/bench/vs_kafka_table.py``) is printed with the date, the command and the
machine, and written with a JSON twin to ``DIR/<UTC stamp>/`` (default ``build/bench-vs-kafka``)
and to ``DIR/latest.md`` / ``DIR/latest.json``; every tool's stdout and stderr stay beside them in
``tools/``. A failed run is a row marked failed with its reason, the others still run, and the
exit code is 1.

The figures are only worth reading from a quiet machine: nothing else should run meanwhile.
``--quick`` shrinks everything (2,000 records, 20 idle, 500 warm-up) to check that the bench works.
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final, Literal

import orjson

from ops.bench.vs_kafka_runs import (
    Target,
    ToolOutcome,
    TopicAdmin,
    TopicAdminError,
    consumer_row,
    producer_row,
    run_measured,
)
from ops.bench.vs_kafka_table import Row, RunInfo, render_markdown, to_json
from ops.local.apache_kafka import RealKafkaCluster, RealKafkaStartError
from ops.local.cluster import ROOT
from ops.local.cluster_up import ActorlogClusterUp, ActorlogStartError
from ops.local.kafka_tools import (
    CONSUMER_PERFORMANCE,
    PRODUCER_PERFORMANCE,
    KafkaDistribution,
    KafkaJarsMissingError,
    find_distribution,
)
from ops.local.zookeeper import ZooKeeperInstallation, ZooKeeperNotInstalledError, find_installation
from ops.properties import ConfigError

__all__ = ["QUICK", "SIZES", "WORKLOADS", "Sizes", "Workload", "build_parser", "main", "select_workloads"]

ACTORLOG: Final = "actorlog"
BROKERS: Final = 3
CLUSTERS: Final = ("kafka", "actorlog")
IDLE_RATE: Final = 50  # records/s of the idle workload: 20 ms apart, well above either's latency
PACED_RATE: Final = 20_000  # records/s of the paced workload: below either's 6-partition rate here
CONSUMER_TIMEOUT_MS: Final = 60_000
PERF_TOOL_JVM_OPTIONS: Final = (
    "-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
)  # fmt: skip
"""What kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh run with (their -Xmx512M and
kafka-run-class.sh's default collector settings)."""
_TOOL_TIMEOUT_BASE_S: Final = 180.0
_TOOL_SLOWEST_RATE: Final = 2_000.0  # records/s below which a run is given up as stuck
_WARMUP_TOPIC: Final = "vs-warmup"
_WARMUP_PARTITIONS: Final = 6


# ------------------------------------------------------------------------------------ workloads


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    record_size: int
    partitions: int
    acks: Literal["1", "all"]
    idle: bool = False
    rate: int | None = None  # records/s the tools pace to; None: as fast as they can

    @property
    def consumes(self) -> bool:
        """The acks=all throughput workloads also read their records back."""
        return self.acks == "all" and self.rate is None


_ACKS: Final[tuple[tuple[Literal["1", "all"], str], ...]] = (("1", "acks1"), ("all", "acksall"))


def _throughput_workloads() -> Iterator[Workload]:
    for size, size_name in ((100, "100B"), (1024, "1KiB")):
        for partitions in (1, 6):
            for acks, acks_name in _ACKS:
                yield Workload(f"{size_name}-{partitions}p-{acks_name}", size, partitions, acks)


WORKLOADS: Final = {
    workload.name: workload
    for workload in (
        *_throughput_workloads(),
        Workload("paced-100B-6p-acksall", 100, 6, "all", rate=PACED_RATE),
        Workload("idle-acksall", 100, 1, "all", idle=True, rate=IDLE_RATE),
    )
}


@dataclass(frozen=True, slots=True)
class Sizes:
    records: int  # per 100 B throughput run; 1 KiB runs send a quarter
    idle_records: int
    warmup_records: int

    def records_for(self, workload: Workload) -> int:
        if workload.idle:
            return self.idle_records
        if workload.rate is not None:
            return max(self.records // 2, 1)
        return max(self.records // 4, 1) if workload.record_size >= 1024 else self.records

    def describe(self, workload: Workload) -> str:
        records = f"{self.records_for(workload):,} records"
        if workload.idle:
            return (
                f"{workload.record_size} B records one at a time ({IDLE_RATE} records/s, linger.ms 0), "
                f"1 partition, RF 3, acks=all, {records}"
            )
        partitions = "1 partition" if workload.partitions == 1 else f"{workload.partitions} partitions"
        reads = "; read back by the consumer tool" if workload.consumes else ""
        rate = "no rate limit" if workload.rate is None else f"paced at {workload.rate:,} records/s"
        return (
            f"{workload.record_size:,} B records, {partitions}, RF 3, min.insync.replicas 2, "
            f"acks={workload.acks}, {records}, {rate}{reads}"
        )


SIZES: Final = Sizes(records=300_000, idle_records=2_000, warmup_records=300_000)
"""The full run: 40 tool runs (each a JVM's or Python's start, 1-2 s), 3 idle runs of 40 s, 2 cluster
starts and stops; expected to take 8-10 minutes on a quiet 2-core machine (estimated from the tools'
rates on this project's machine; the run prints what it took). The warm-up is as long as a 100 B run:
Kafka's brokers reach their steady rate only after a few hundred thousand records."""
QUICK: Final = Sizes(records=2_000, idle_records=20, warmup_records=500)


def select_workloads(spec: str) -> list[Workload]:
    """Comma-separated names or shell patterns, in the table's order; ``all`` is every workload."""
    chosen: set[str] = set()
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        matched = list(WORKLOADS) if item == "all" else fnmatch.filter(WORKLOADS, item)
        if not matched:
            raise ValueError(f"no workload {item!r}; the workloads are {', '.join(WORKLOADS)}")
        chosen.update(matched)
    if not chosen:
        raise ValueError("no workload chosen")
    return [workload for name, workload in WORKLOADS.items() if name in chosen]


# ------------------------------------------------------------------------------------ the bench


@dataclass
class Bench:
    distribution: KafkaDistribution
    zookeeper: ZooKeeperInstallation
    workloads: Sequence[Workload]
    sizes: Sizes
    clusters: Sequence[str]
    producer_props: Sequence[str]
    logs: Path
    kafka_system: str

    def run(self, base: Path) -> tuple[list[Row], list[str]]:
        """Every chosen cluster in turn; the rows, and the notes (a cluster that did not start)."""
        rows: list[Row] = []
        notes: list[str] = []
        for cluster in self.clusters:
            try:
                with self._started(cluster, base / cluster) as target:
                    rows += self._run_on(target)
            except (RealKafkaStartError, ActorlogStartError, TopicAdminError) as error:
                first = str(error).splitlines()[0]
                print(f"bench-vs-kafka: {cluster}: {error}", file=sys.stderr, flush=True)
                notes.append(f"{cluster} stopped short: {first}")
        return rows, notes

    @contextmanager
    def _started(self, cluster: str, directory: Path) -> Iterator[Target]:
        print(f"\nstarting {cluster}: {BROKERS} brokers and a ZooKeeper", flush=True)
        if cluster == "kafka":
            with RealKafkaCluster(
                self.distribution,
                directory,
                brokers=BROKERS,
                zookeeper_installation=self.zookeeper,
                zookeeper_force_sync=True,  # what `cluster up` gives its ZooKeeper
            ) as kafka:

                def kafka_processes() -> dict[str, int]:
                    pids = {f"broker {i}": pid for i, pid in kafka.broker_pids().items()}
                    if kafka.zookeeper_pid is not None:
                        pids["ZooKeeper"] = kafka.zookeeper_pid
                    return pids

                yield Target(
                    self.kafka_system,
                    kafka.bootstrap_servers,
                    kafka.client_properties_path,
                    None,
                    kafka_processes,
                )
        else:
            with ActorlogClusterUp(directory, brokers=BROKERS) as up:

                def actorlog_processes() -> dict[str, int]:
                    pids = {f"broker {i}": pid for i, pid in up.broker_pids().items()}
                    zookeeper = up.zookeeper_pid
                    if zookeeper is not None:
                        pids["ZooKeeper"] = zookeeper
                    return pids

                yield Target(
                    ACTORLOG,
                    up.bootstrap_servers,
                    up.client_properties_path,
                    up.http_bootstrap_servers,
                    actorlog_processes,
                )

    def _run_on(self, target: Target) -> list[Row]:
        admin = TopicAdmin(target)
        rows: list[Row] = []
        try:
            self._warm_up(target, admin)
            for workload in self.workloads:
                rows += self._run_workload(target, admin, workload)
        finally:
            admin.close()
        return rows

    def _producers(self, target: Target) -> list[tuple[str, str]]:
        """(tool name, slug) of the producer tools run on this cluster, in order."""
        if target.http_bootstrap is None:
            return [("ProducerPerformance", "pp")]
        return [("actorlog perf produce", "perf"), ("ProducerPerformance (Kafka listener)", "pp")]

    def _warm_up(self, target: Target, admin: TopicAdmin) -> None:
        if self.sizes.warmup_records == 0:
            return
        admin.create(_WARMUP_TOPIC, _WARMUP_PARTITIONS, replication_factor=BROKERS)
        warmup = Workload("warm-up", 100, _WARMUP_PARTITIONS, "all")
        records = self.sizes.warmup_records
        for index, (tool, slug) in enumerate(self._producers(target)):
            outcome = self._produce(target, tool, _WARMUP_TOPIC, warmup, records, slug)
            self._report(producer_row(warmup.name, target.system, tool, records, outcome))
            if index == 0:
                # Kafka's first consumer group also creates __consumer_offsets (50 partitions, RF 3):
                # a cost of the first run only, paid here rather than charged to a workload.
                self._report(self._consume(target, _WARMUP_TOPIC, warmup, records))
        admin.delete(_WARMUP_TOPIC)

    def _run_workload(self, target: Target, admin: TopicAdmin, workload: Workload) -> list[Row]:
        rows: list[Row] = []
        records = self.sizes.records_for(workload)
        for index, (tool, slug) in enumerate(self._producers(target)):
            topic = f"vs-{workload.name}-{slug}"
            try:
                admin.create(topic, workload.partitions, replication_factor=BROKERS)
            except TopicAdminError as error:
                row = Row(
                    workload=workload.name, system=target.system, tool=tool, kind="produce", error=str(error)
                )
                self._report(row)
                rows.append(row)
                continue
            outcome = self._produce(target, tool, topic, workload, records, slug)
            row = producer_row(workload.name, target.system, tool, records, outcome)
            self._report(row)
            rows.append(row)
            if index == 0 and workload.consumes and row.error is None:
                consumed = self._consume(target, topic, workload, records)
                self._report(consumed)
                rows.append(consumed)
            admin.delete(topic)
        return rows

    def _report(self, row: Row) -> None:
        said = row.error or row.line
        print(f"[{row.system}] {row.workload}, {row.tool}: {said}", flush=True)

    def _produce(
        self, target: Target, tool: str, topic: str, workload: Workload, records: int, slug: str
    ) -> ToolOutcome:
        props = [f"acks={workload.acks}", *(["linger.ms=0"] if workload.idle else []), *self.producer_props]
        throughput = "-1" if workload.rate is None else str(workload.rate)
        common = ["--topic", topic, "--num-records", str(records), "--record-size", str(workload.record_size)]
        common += ["--throughput", throughput]
        if slug == "perf":
            assert target.http_bootstrap is not None
            argv = [
                sys.executable, "-m", "ops", "perf", "produce", *common,
                "--bootstrap-server", target.http_bootstrap,
                "--producer.config", str(target.client_properties), "--producer-props", *props,
            ]  # fmt: skip
        else:
            argv = self.distribution.java_command(
                PRODUCER_PERFORMANCE,
                [*common, "--producer.config", str(target.client_properties), "--producer-props", *props],
                jvm_options=PERF_TOOL_JVM_OPTIONS,
            )
        timeout_s = _TOOL_TIMEOUT_BASE_S + records / min(
            workload.rate or _TOOL_SLOWEST_RATE, _TOOL_SLOWEST_RATE
        )
        return run_measured(
            argv,
            name=_file_name(target.system, workload.name, slug),
            watched=target.processes(),
            timeout_s=timeout_s,
            logs=self.logs,
        )

    def _consume(self, target: Target, topic: str, workload: Workload, records: int) -> Row:
        common = ["--topic", topic, "--messages", str(records), "--timeout", str(CONSUMER_TIMEOUT_MS)]
        if target.http_bootstrap is not None:
            tool = "actorlog perf consume"
            argv = [
                sys.executable, "-m", "ops", "perf", "consume", "--bootstrap-server", target.http_bootstrap,
                *common, "--consumer.config", str(target.client_properties),
            ]  # fmt: skip
        else:
            tool = "ConsumerPerformance"
            argv = self.distribution.java_command(
                CONSUMER_PERFORMANCE,
                [
                    "--bootstrap-server", target.kafka_bootstrap, *common,
                    "--consumer.config", str(target.client_properties),
                ],
                jvm_options=PERF_TOOL_JVM_OPTIONS,
            )  # fmt: skip
        outcome = run_measured(
            argv,
            name=_file_name(target.system, workload.name, "consume"),
            watched=target.processes(),
            timeout_s=_TOOL_TIMEOUT_BASE_S + records / _TOOL_SLOWEST_RATE,
            logs=self.logs,
        )
        return consumer_row(workload.name, target.system, tool, records, outcome)


def _file_name(system: str, workload: str, slug: str) -> str:
    return "-".join(part.replace(" ", "_") for part in (system, workload, slug))


# ------------------------------------------------------------------------------- run description


def _machine() -> str:
    model = "unknown CPU"
    memory = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f", {int(line.split()[1]) / 1024 / 1024:.1f} GiB memory"
                break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs ({model}){memory}, {platform.system()} {platform.release()}"


def _load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def _software(distribution: KafkaDistribution, zookeeper: ZooKeeperInstallation) -> str:
    java = subprocess.run(
        [str(distribution.java), "-version"], capture_output=True, text=True, check=False, timeout=60
    )
    java_version = (java.stderr.splitlines() or ["java: unknown version"])[0]
    zookeeper_jar = next((path.name for path in zookeeper.classpath if "zookeeper" in path.name), "?")
    return (
        f"Python {platform.python_version()}; {java_version}; Kafka's jars in "
        f"{_shown(distribution.lib)}; ZooKeeper from the installed package ({zookeeper_jar}) for both"
    )


def kafka_version(lib: Path) -> str:
    """From the core jar's name, ``kafka_2.13-<version>.jar``."""
    for jar in sorted(lib.glob("kafka_2.13-*.jar")):
        version = jar.name.removeprefix("kafka_2.13-").removesuffix(".jar")
        if version and version[0].isdigit():
            return version
    return "?"


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


# ------------------------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ops.bench.vs_kafka", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument(
        "--records",
        type=int,
        help=f"records per 100 B run; 1 KiB runs send a quarter (default {SIZES.records:,}; --quick "
        f"{QUICK.records:,})",
    )
    parser.add_argument(
        "--idle-records", type=int, help=f"records of the idle workload (default {SIZES.idle_records:,})"
    )
    parser.add_argument(
        "--warmup-records",
        type=int,
        help="the unmeasured warm-up run on each cluster (default: as many as --records; 0: none)",
    )
    parser.add_argument(
        "--workloads",
        default="all",
        help=f"names or shell patterns, comma-separated (default all): {', '.join(WORKLOADS)}",
    )
    parser.add_argument(
        "--clusters",
        default=",".join(CLUSTERS),
        help="which clusters, in this order (default kafka,actorlog)",
    )
    parser.add_argument(
        "--producer-props",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="extra producer settings for every producer run, both tools, both clusters",
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks that the bench works")
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=ROOT / "build" / "bench-vs-kafka",
        help="where the table, its JSON and the tools' output go (default build/bench-vs-kafka)",
    )
    return parser


def _sizes(parser: argparse.ArgumentParser, arguments: argparse.Namespace) -> Sizes:
    """``--quick``'s or the full run's sizes, with the options given on top."""
    sizes = QUICK if arguments.quick else SIZES
    for name, least in (("records", 1), ("idle_records", 1), ("warmup_records", 0)):
        value = getattr(arguments, name)
        if value is None:
            continue
        if value < least:
            parser.error(f"--{name.replace('_', '-')} must be at least {least}")
        sizes = replace(sizes, **{name: value})
    if arguments.records is not None and arguments.warmup_records is None:
        sizes = replace(sizes, warmup_records=sizes.records)  # as long as a 100 B run, as by default
    return sizes


def _terminated(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    arguments_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    arguments = parser.parse_args(arguments_list)
    try:
        workloads = select_workloads(arguments.workloads)
    except ValueError as error:
        parser.error(str(error))
    clusters = [name.strip() for name in arguments.clusters.split(",") if name.strip()]
    unknown = [name for name in clusters if name not in CLUSTERS]
    if unknown or not clusters or len(set(clusters)) != len(clusters):
        parser.error(f"--clusters: one or both of {', '.join(CLUSTERS)}, each once")
    for prop in arguments.producer_props:
        if "=" not in prop:
            parser.error(f"--producer-props: {prop!r} is not KEY=VALUE")
    sizes = _sizes(parser, arguments)
    try:
        distribution = find_distribution()
        zookeeper = find_installation()
    except (KafkaJarsMissingError, ZooKeeperNotInstalledError) as error:
        print(f"bench-vs-kafka: {error}", file=sys.stderr)
        return 2

    # A SIGTERM (a CI job's timeout, `kill`) unwinds like Ctrl-C, so the cluster being measured is
    # stopped by its context manager instead of outliving the bench.
    signal.signal(signal.SIGTERM, _terminated)
    started = time.perf_counter()
    now = datetime.datetime.now(datetime.UTC)
    run_dir = arguments.output_dir / now.strftime("%Y%m%dT%H%M%SZ")
    logs = run_dir / "tools"
    logs.mkdir(parents=True, exist_ok=True)
    kafka_system = f"Kafka {kafka_version(distribution.lib)}"
    load_before = _load_average()
    bench = Bench(
        distribution=distribution,
        zookeeper=zookeeper,
        workloads=workloads,
        sizes=sizes,
        clusters=clusters,
        producer_props=arguments.producer_props,
        logs=logs,
        kafka_system=kafka_system,
    )
    try:
        with tempfile.TemporaryDirectory(prefix="actorlog-vs-kafka-") as base:
            rows, notes = bench.run(Path(base))
    except (ConfigError, OSError, subprocess.SubprocessError) as error:
        print(f"bench-vs-kafka: {error}", file=sys.stderr)
        return 1
    info = RunInfo(
        date=now.strftime("%Y-%m-%d %H:%M UTC"),
        command=shlex.join(["python", "-m", "ops.bench.vs_kafka", *arguments_list]),
        machine=f"{_machine()}; load average {load_before} before, {_load_average()} after",
        software=_software(distribution, zookeeper),
        baseline=kafka_system,
        workloads={workload.name: sizes.describe(workload) for workload in workloads},
        notes=[
            f"Clusters one after the other ({', '.join(clusters)}), never both at once: {BROKERS} brokers "
            "and one ZooKeeper each, on loopback; topics created fresh per run and deleted after it.",
            f"Each cluster first took an unmeasured warm-up of {sizes.warmup_records:,} records.",
            *(
                [
                    "idle-acksall: both tools pace with Kafka's throttler, which counts from before the "
                    "first send; the records due while that send waits for metadata leave in one burst, "
                    f"so p99 and max include the tool's start if that wait exceeds "
                    f"{sizes.idle_records / 100 / IDLE_RATE * 1000:.0f} ms (1 % of the records)."
                ]
                if any(workload.idle for workload in workloads)
                else []
            ),
            *notes,
        ],
        elapsed_s=time.perf_counter() - started,
    )
    markdown = render_markdown(rows, info)
    document = orjson.dumps(to_json(rows, info), option=orjson.OPT_INDENT_2)
    (run_dir / "table.md").write_text(markdown)
    (run_dir / "results.json").write_bytes(document)
    shutil.copyfile(run_dir / "table.md", arguments.output_dir / "latest.md")
    shutil.copyfile(run_dir / "results.json", arguments.output_dir / "latest.json")
    print()
    print(markdown)
    print(f"written to {run_dir / 'table.md'} and {run_dir / 'results.json'}")
    measured_everything = bool(rows) and not notes and all(row.error is None for row in rows)
    return 0 if measured_everything else 1


if __name__ == "__main__":
    raise SystemExit(main())
