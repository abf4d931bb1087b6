"""Apache Kafka's own Java programs, run as a user runs them: ``java -cp 'lib/*' <main class> ...``.

Used by ``make interop`` (tests/interop) and ``make bench-vs-kafka`` (ops/bench/vs_kafka.py). The
jars are Kafka's from Maven Central (``make kafka-jars``: tools/kafka/pom.xml copied into
``build/kafka/<version>/lib``; docs/interop.md). Main classes are those of Kafka 3.9, where some
tools moved from ``kafka.*`` (Scala, the core jar) to ``org.apache.kafka.tools.*`` (Java,
kafka-tools); the console producer is still in the core jar there.

Each tool run is one JVM with a small heap and the tools' log4j configuration (warnings on stderr,
stdout left to the tool's own output). A run that does not end within its timeout is killed and
reported as such; the result keeps the command line, the exit code and both streams, and
``describe()`` is what an assertion or an error message shows.
"""

from __future__ import annotations

import os
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
CONSUMER_PERFORMANCE: Final = "org.apache.kafka.tools.ConsumerPerformance"
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
