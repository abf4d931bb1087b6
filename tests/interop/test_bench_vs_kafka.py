"""``make bench-vs-kafka`` works end to end: ``--quick`` on one workload, against a real Apache Kafka
cluster and then ``actorlog cluster up``, run as the Makefile runs it (``python -m
ops.bench.vs_kafka``). What is checked is that every tool ran and every figure was measured, not
the figures themselves (timed assertions do not belong in tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from ops.local.kafka_tools import ROOT, KafkaDistribution
from ops.local.zookeeper import ZooKeeperInstallation

pytestmark = pytest.mark.interop

WORKLOAD = "100B-1p-acksall"
QUICK_RECORDS = 2_000


def test_the_quick_bench_measures_every_tool_on_both_clusters(
    kafka_distribution: KafkaDistribution, zookeeper_installation: ZooKeeperInstallation, tmp_path: Path
) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "ops.bench.vs_kafka",
            "--quick",
            "--workloads",
            WORKLOAD,
            "--output-dir",
            str(tmp_path),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "ACTORLOG_KAFKA_LIB": str(kafka_distribution.lib)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    said = f"stdout:\n{run.stdout}\nstderr:\n{run.stderr[-4000:]}"
    assert run.returncode == 0, said

    document = orjson.loads((tmp_path / "latest.json").read_bytes())
    kafka = document["baseline"]
    assert kafka.startswith("Kafka 3."), document["baseline"]
    rows = document["rows"]
    assert [(row["system"], row["tool"]) for row in rows] == [
        (kafka, "ProducerPerformance"),
        (kafka, "ConsumerPerformance"),
        ("actorlog", "actorlog perf produce"),
        ("actorlog", "actorlog perf consume"),
        ("actorlog", "ProducerPerformance (Kafka listener)"),
    ], said
    for row in rows:
        assert row["workload"] == WORKLOAD
        assert row["error"] is None, row
        assert row["records"] == QUICK_RECORDS, row
        assert row["records_per_s"] > 0, row
        assert row["mb_per_s"] > 0, row
        # Every process was found and read: the client, three brokers and ZooKeeper.
        assert None not in row["cpu_s"].values(), row
        assert set(row["cpu_s"]) == {"client", "broker 1", "broker 2", "broker 3", "ZooKeeper"}, row
        assert row["cpu_s"]["client"] > 0, row
        if row["kind"] == "produce":
            assert row["p99_ms"] is not None, row
            assert row["max_ms"] >= row["p99_ms"], row
        if row["system"] == "actorlog":
            assert row["versus_baseline"] is not None, row
            assert row["versus_baseline"] > 0, row
    # Kafka's brokers did the work of its rows: someone led the partition and two followed.
    assert sum(rows[0]["cpu_s"][f"broker {i}"] for i in (1, 2, 3)) > 0

    markdown = (tmp_path / "latest.md").read_text()
    assert markdown in run.stdout
    assert (
        f"Command: `python -m ops.bench.vs_kafka --quick --workloads {WORKLOAD} --output-dir {tmp_path}`"
        in (markdown)
    )
    assert f"| {WORKLOAD} | actorlog | actorlog perf produce | 2,000 |" in markdown
    assert list(tmp_path.glob("*/tools/actorlog-*-perf.out")), "the tools' output is kept"


def test_a_terminated_bench_stops_the_cluster_it_was_measuring(
    kafka_distribution: KafkaDistribution, zookeeper_installation: ZooKeeperInstallation, tmp_path: Path
) -> None:
    """SIGTERM (a job's timeout) unwinds the bench like Ctrl-C: the cluster it started stops with it
    instead of outliving it (it did, brokers and ZooKeeper, before the bench handled the signal)."""
    bench = subprocess.Popen(
        [sys.executable, "-m", "ops.bench.vs_kafka", "--quick", "--clusters", "actorlog",
         "--workloads", "idle-acksall", "--idle-records", "100000", "--output-dir", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "ACTORLOG_KAFKA_LIB": str(kafka_distribution.lib)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    assert bench.stdout is not None
    said: list[str] = []
    for line in bench.stdout:  # the warm-up is reported once the cluster is up and measured
        said.append(line)
        if line.startswith("[actorlog] warm-up"):
            break
    else:
        pytest.fail("".join(said))
    data_dirs = _cluster_processes()
    assert data_dirs, "no broker process found while the bench runs"
    bench.terminate()
    bench.stdout.read()  # what it says while stopping; the pipe is then closed
    bench.stdout.close()
    assert bench.wait(timeout=60) != 0
    assert _cluster_processes() == []


def _cluster_processes() -> list[str]:
    """Command lines of this machine's processes started for a bench-vs-kafka cluster."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "actorlog-vs-kafka-" in command and "server.properties" in command:
            found.append(command)
    return found
