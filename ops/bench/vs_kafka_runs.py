"""One measured run of a perf tool for ``make bench-vs-kafka``, and the topics it runs on.

* ``Target``: a running cluster as the bench drives it: its Kafka listeners, its
  ``client.properties``, actorlog's HTTP listeners (none on Kafka), and how to find its processes.
* ``TopicAdmin``: kafka-python's admin client over the Kafka listener, as the client user of
  ``client.properties``; a topic is handed over only once every partition has a leader, and a
  failure is a ``TopicAdminError`` naming the topic.
* ``run_measured``: one tool as a child process, its output in files (a pipe nobody reads while it
  runs would fill and stall it), killed at its timeout; the CPU of every watched process is sampled
  before it starts and after it exits, and the tool's own CPU is read from its exited process
  before it is reaped (``ops/bench/proc_cpu.py``).
* ``producer_row`` / ``consumer_row``: a run's ``Row``: the figures of its final line
  (``ops/bench/perf_lines.py``), or why there are none: its exit code or timeout and the last line
  of its stderr, no final line, or fewer records than were sent.

kafka-python is a development dependency (as Kafka's jars are a build-time download): it is
imported when a ``TopicAdmin`` is made, not with this module.
"""

from __future__ import annotations

import os
import subprocess
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ops.bench.perf_lines import parse_consumer_summary, parse_producer_summary
from ops.bench.proc_cpu import cpu_at_exit, cpu_used, sample
from ops.bench.vs_kafka_table import Row
from ops.clients.connection import load_client_properties, resolve_credential
from ops.local.cluster import ROOT

__all__ = [
    "Target", "ToolOutcome", "TopicAdmin", "TopicAdminError", "consumer_row", "producer_row", "run_measured",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Target:
    """A running cluster as the bench drives it."""

    system: str
    kafka_bootstrap: str
    client_properties: Path
    http_bootstrap: str | None  # actorlog's own clients' listeners; None on Kafka
    processes: Callable[[], dict[str, int]]  # process label -> pid (brokers, ZooKeeper)


class TopicAdminError(RuntimeError):
    """A topic could not be created or deleted; the message says which and why."""


class TopicAdmin:
    """kafka-python's admin client over the cluster's Kafka listener, as the client user."""

    def __init__(self, target: Target) -> None:
        with warnings.catch_warnings():
            # kafka-python 3.0 loads its protocol schemas with the deprecated importlib.resources.read_text.
            warnings.simplefilter("ignore", DeprecationWarning)
            from kafka import KafkaAdminClient
            from kafka.errors import KafkaError

        properties = load_client_properties(target.client_properties)
        credential = resolve_credential(properties)
        try:
            self._client = KafkaAdminClient(
                bootstrap_servers=target.kafka_bootstrap.split(","),
                security_protocol=properties.get("security.protocol", "SASL_PLAINTEXT"),
                sasl_mechanism=properties.get("sasl.mechanism", "SCRAM-SHA-256"),
                sasl_plain_username=credential.username,
                sasl_plain_password=credential.password,
                client_id="bench-vs-kafka",
            )
        except KafkaError as error:
            raise TopicAdminError(f"no admin connection to {target.kafka_bootstrap}: {error}") from error

    def create(self, topic: str, partitions: int, *, replication_factor: int) -> None:
        """Created, and every partition has a leader (kafka-python waits on the metadata)."""
        from kafka.errors import KafkaError

        try:
            self._client.create_topics(
                {
                    topic: {
                        "num_partitions": partitions,
                        "replication_factor": replication_factor,
                        "configs": {"min.insync.replicas": "2"},
                    }
                },
                wait_for_metadata=True,
            )
        except KafkaError as error:
            raise TopicAdminError(f"could not create topic {topic}: {error}") from error

    def delete(self, topic: str) -> None:
        """Gone before the next run: a follower fetches every partition it follows, so topics left
        behind would make each later run dearer (on actorlog, which has no fetch sessions, more so)."""
        from kafka.errors import KafkaError

        try:
            self._client.delete_topics([topic])
        except KafkaError as error:
            raise TopicAdminError(f"could not delete topic {topic}: {error}") from error

    def close(self) -> None:
        self._client.close()


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    argv: tuple[str, ...]
    returncode: int | None  # None: killed at its timeout
    stdout: str
    stderr: str
    cpu_s: dict[str, float | None]
    output: Path  # where stdout and stderr were kept (.out / .err)

    def failure(self) -> str | None:
        if self.returncode == 0:
            return None
        how = "timed out (killed)" if self.returncode is None else f"exit code {self.returncode}"
        last = [line for line in self.stderr.splitlines() if line.strip()][-1:]
        return f"{how}{': ' + last[0].strip() if last else ''} (output in {self.output}.err)"


def run_measured(
    argv: Sequence[str], *, name: str, watched: Mapping[str, int], timeout_s: float, logs: Path
) -> ToolOutcome:
    """Run one tool to its end, charging CPU to it and to every watched process (module docstring);
    its stdout and stderr are kept in ``logs/name.out`` and ``.err``."""
    output = logs / name
    before = sample(watched)
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        process.kill()

    with _with(output, ".out").open("wb") as stdout, _with(output, ".err").open("wb") as stderr:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        timer = threading.Timer(timeout_s, kill)
        timer.daemon = True
        timer.start()
        try:
            client_s = cpu_at_exit(process)
        finally:
            timer.cancel()
    used = cpu_used(before, sample(watched))
    used["client"] = client_s
    return ToolOutcome(
        argv=tuple(argv),
        returncode=None if killed.is_set() else process.returncode,
        stdout=_with(output, ".out").read_text(errors="replace"),
        stderr=_with(output, ".err").read_text(errors="replace"),
        cpu_s=used,
        output=output,
    )


def _with(path: Path, extension: str) -> Path:
    """``path`` + ``extension``: the names hold dots (``Kafka_3.9.2-...``), so no ``with_suffix``."""
    return path.with_name(path.name + extension)


def producer_row(workload: str, system: str, tool: str, expected: int, outcome: ToolOutcome) -> Row:
    """The row of a producer tool's run: its final line's figures, or why there are none."""
    base = Row(workload=workload, system=system, tool=tool, kind="produce", cpu_s=outcome.cpu_s)
    summary = parse_producer_summary(outcome.stdout)
    failure = outcome.failure()
    if summary is None:
        return replace(base, error=failure or f"no final line in its output ({outcome.output}.out)")
    if failure is None and summary.records != expected:
        failure = f"{summary.records:,} of {expected:,} records acknowledged"
    return replace(
        base,
        records=summary.records,
        records_per_s=summary.records_per_s,
        mb_per_s=summary.mb_per_s,
        avg_ms=summary.avg_latency_ms,
        p50_ms=summary.p50_ms,
        p99_ms=summary.p99_ms,
        max_ms=summary.max_latency_ms,
        line=summary.line,
        error=failure,
    )


def consumer_row(workload: str, system: str, tool: str, expected: int, outcome: ToolOutcome) -> Row:
    """The row of a consumer tool's run: its result line's rates, or why there are none."""
    base = Row(workload=workload, system=system, tool=tool, kind="consume", cpu_s=outcome.cpu_s)
    try:
        summary = parse_consumer_summary(outcome.stdout)
    except ValueError as error:
        return replace(base, error=str(error))
    failure = outcome.failure()
    if summary is None:
        return replace(base, error=failure or f"no result line in its output ({outcome.output}.out)")
    if failure is None and summary.records < expected:
        failure = f"{summary.records:,} of {expected:,} records read"
    return replace(
        base,
        records=summary.records,
        records_per_s=summary.records_per_s,
        mb_per_s=summary.mb_per_s,
        line=summary.line,
        error=failure,
    )
