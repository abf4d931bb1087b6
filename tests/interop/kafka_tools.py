"""Apache Kafka's own Java tools, run as a user runs them: ``java -cp 'lib/*' <main class> ...``.

The jars are Kafka's from Maven Central (``make kafka-jars``: tools/kafka/pom.xml copied into
``build/kafka/<version>/lib``; docs/interop.md). Main classes are those of Kafka 3.9, where some
tools moved from ``kafka.*`` (Scala, the core jar) to ``org.apache.kafka.tools.*`` (Java,
kafka-tools); the console producer is still in the core jar there.

Each run is one JVM with a small heap and the tools' log4j configuration (warnings on stderr,
stdout left to the tool's own output). A run that does not end within its timeout is killed and
reported as such; the result keeps the command line, the exit code and both streams, and
``describe()`` is what an assertion message shows.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[2]
TOOLS_LOG4J: Final = ROOT / "tools" / "kafka" / "tools-log4j.properties"
BROKER_LOG4J: Final = ROOT / "tools" / "kafka" / "broker-log4j.properties"
KAFKA_VERSION: Final = "3.9.2"
"""The version `make kafka-jars` fetches by default (tools/kafka/pom.xml, the Makefile)."""
DEFAULT_LIB: Final = ROOT / "build" / "kafka" / KAFKA_VERSION / "lib"

# Kafka 3.9's main classes.
KAFKA_SERVER: Final = "kafka.Kafka"
CONFIG_COMMAND: Final = "kafka.admin.ConfigCommand"
TOPIC_COMMAND: Final = "org.apache.kafka.tools.TopicCommand"
CONSOLE_PRODUCER: Final = "kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER: Final = "org.apache.kafka.tools.consumer.ConsoleConsumer"
PRODUCER_PERFORMANCE: Final = "org.apache.kafka.tools.ProducerPerformance"
GET_OFFSET_SHELL: Final = "org.apache.kafka.tools.GetOffsetShell"
CONSUMER_GROUP_COMMAND: Final = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
REASSIGN_PARTITIONS_COMMAND: Final = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
LEADER_ELECTION_COMMAND: Final = "org.apache.kafka.tools.LeaderElectionCommand"

TOOL_JVM_OPTIONS: Final = ("-Xmx512m", "-XX:+UseSerialGC")
"""A tool is one short-lived client: a small heap, and the one-thread collector on 2 cores."""
_STREAM_TAIL_LINES: Final = 40


class KafkaJarsMissingError(RuntimeError):
    """Java or Kafka's jars are not there; the message says how to get them."""


@dataclass(frozen=True, slots=True)
class KafkaDistribution:
    """Where Kafka's jars and a ``java`` are."""

    lib: Path
    java: Path

    @property
    def classpath(self) -> str:
        # The JVM expands a directory's `*` itself (the form `java -cp 'lib/*'` users type).
        return str(self.lib / "*")

    def java_command(
        self,
        main_class: str,
        args: Sequence[str],
        *,
        jvm_options: Sequence[str] = TOOL_JVM_OPTIONS,
        log4j: Path = TOOLS_LOG4J,
    ) -> list[str]:
        return [
            str(self.java),
            *jvm_options,
            "-Djava.net.preferIPv4Stack=true",
            "-Djava.awt.headless=true",
            f"-Dlog4j.configuration={log4j.as_uri()}",
            "-cp",
            self.classpath,
            main_class,
            *args,
        ]


def find_distribution(environ: Mapping[str, str] | None = None) -> KafkaDistribution:
    """``ACTORLOG_KAFKA_LIB`` (set by ``make interop``) or the default build directory, and java
    from ``JAVA_HOME`` or the PATH; ``KafkaJarsMissingError`` when either is missing."""
    env = os.environ if environ is None else environ
    lib = Path(env.get("ACTORLOG_KAFKA_LIB") or DEFAULT_LIB)
    if not any(lib.glob("kafka_2.13-*.jar")) or not any(lib.glob("kafka-tools-*.jar")):
        raise KafkaJarsMissingError(f"Kafka's jars are not in {lib}: run `make kafka-jars` (Maven Central)")
    java_home = env.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return KafkaDistribution(lib, Path(java_home) / "bin" / "java")
    found = shutil.which("java", path=env.get("PATH"))
    if found is None:
        raise KafkaJarsMissingError("`java` not found: install a Java 17 runtime or set JAVA_HOME")
    return KafkaDistribution(lib, Path(found))


@dataclass(frozen=True, slots=True)
class ToolRun:
    """One finished (or killed) tool run."""

    argv: tuple[str, ...]
    returncode: int | None  # None: killed at the timeout
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()

    def describe(self) -> str:
        """The command, how it ended and the end of both streams: an assertion's message."""
        ended = "timed out (killed)" if self.returncode is None else f"exit code {self.returncode}"
        return (
            f"$ {shlex.join(self.argv)}\n{ended}\n"
            f"--- stdout (last {_STREAM_TAIL_LINES} lines) ---\n{_tail(self.stdout)}\n"
            f"--- stderr (last {_STREAM_TAIL_LINES} lines) ---\n{_tail(self.stderr)}"
        )


def _tail(text: str) -> str:
    return "\n".join(text.splitlines()[-_STREAM_TAIL_LINES:])


def run_tool(
    distribution: KafkaDistribution,
    main_class: str,
    args: Sequence[str],
    *,
    stdin: str | None = None,
    timeout_s: float = 120.0,
) -> ToolRun:
    """Run one tool to its end (or kill it at ``timeout_s``): never raises for a tool's failure."""
    argv = distribution.java_command(main_class, args)
    try:
        completed = subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            cwd=ROOT,
            stdin=None if stdin is not None else subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as expired:
        return ToolRun(tuple(argv), None, _text(expired.stdout), _text(expired.stderr))
    return ToolRun(tuple(argv), completed.returncode, completed.stdout, completed.stderr)


def _text(stream: bytes | str | None) -> str:
    if stream is None:
        return ""
    return stream if isinstance(stream, str) else stream.decode(errors="replace")


# ------------------------------------------------------------------------------ reading output


@dataclass(frozen=True, slots=True)
class DescribedPartition:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DescribedTopic:
    """TopicCommand --describe: the topic line's columns and one entry per partition line."""

    topic: str
    columns: dict[str, str]
    partitions: tuple[DescribedPartition, ...]


_FIELD = re.compile(r"(\w+):\s*(\S*)")


def parse_describe(stdout: str) -> list[DescribedTopic]:
    """TopicCommand --describe's output, as Kafka prints it: per topic, a line of tab-separated
    ``Name: value`` columns (``Topic``, ``TopicId``, ``PartitionCount``, ``ReplicationFactor``,
    ``Configs``), then one indented line per partition (``Topic``, ``Partition``, ``Leader``,
    ``Replicas``, ``Isr``...). A line that fits neither raises ``ValueError``."""
    topics: list[DescribedTopic] = []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        columns = dict(_FIELD.findall(line))
        if "Partition" in columns and line[:1].isspace():
            if not topics or topics[-1].topic != columns.get("Topic"):
                raise ValueError(f"a partition line outside its topic: {line!r}")
            partition = DescribedPartition(
                partition=int(columns["Partition"]),
                leader=int(columns["Leader"]),
                replicas=_ids(columns["Replicas"]),
                isr=_ids(columns["Isr"]),
            )
            last = topics[-1]
            topics[-1] = DescribedTopic(last.topic, last.columns, (*last.partitions, partition))
        elif "PartitionCount" in columns:
            # Configs' value may be empty or hold commas: the rest of the line after "Configs:".
            columns["Configs"] = line.partition("Configs:")[2].strip()
            topics.append(DescribedTopic(columns["Topic"], columns, ()))
        else:
            raise ValueError(f"not a TopicCommand --describe line: {line!r}")
    return topics


def _ids(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part)


def parse_offsets(stdout: str) -> dict[tuple[str, int], int]:
    """GetOffsetShell's ``topic:partition:offset`` lines."""
    offsets: dict[tuple[str, int], int] = {}
    for line in stdout.splitlines():
        topic, partition, offset = line.rsplit(":", 2)
        offsets[topic, int(partition)] = int(offset)
    return offsets


@dataclass(frozen=True, slots=True)
class GroupOffsets:
    """One row of ConsumerGroupCommand --describe --group G."""

    topic: str
    partition: int
    current_offset: int | None  # "-": nothing committed
    log_end_offset: int
    lag: int | None


def parse_group_describe(stdout: str) -> list[GroupOffsets]:
    """The rows under ConsumerGroupCommand's header (``GROUP TOPIC PARTITION CURRENT-OFFSET
    LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID``); the lines before it (such as "Consumer group
    'G' has no active members.") are skipped."""
    rows: list[GroupOffsets] = []
    header: list[str] | None = None
    for line in stdout.splitlines():
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "GROUP":
            header = fields
            continue
        if header is None:
            continue
        row = dict(zip(header, fields, strict=False))
        rows.append(
            GroupOffsets(
                topic=row["TOPIC"],
                partition=int(row["PARTITION"]),
                current_offset=None if row["CURRENT-OFFSET"] == "-" else int(row["CURRENT-OFFSET"]),
                log_end_offset=int(row["LOG-END-OFFSET"]),
                lag=None if row["LAG"] == "-" else int(row["LAG"]),
            )
        )
    return rows


_PERF_SUMMARY = re.compile(
    r"^(?P<records>\d+) records sent, (?P<rate>[\d.]+) records/sec \((?P<mb>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, "
    r"(?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99.9th\.$"
)


@dataclass(frozen=True, slots=True)
class PerfSummary:
    """ProducerPerformance's final line."""

    records: int
    records_per_s: float
    mb_per_s: float
    avg_latency_ms: float
    max_latency_ms: float
    p99_ms: int
    line: str


def parse_perf_summary(stdout: str) -> PerfSummary | None:
    """The final summary line (the progress lines before it say ``records/sec`` too, but not the
    percentiles); None when there is none."""
    for line in reversed(stdout.splitlines()):
        match = _PERF_SUMMARY.match(line.strip())
        if match:
            return PerfSummary(
                records=int(match["records"]),
                records_per_s=float(match["rate"]),
                mb_per_s=float(match["mb"]),
                avg_latency_ms=float(match["avg"]),
                max_latency_ms=float(match["max"]),
                p99_ms=int(match["p99"]),
                line=line.strip(),
            )
    return None
