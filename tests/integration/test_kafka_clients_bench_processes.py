"""The Kafka clients benchmark (``python -m ops.bench.kafka_clients``) run small, as a user runs it:
its own three-broker cluster, actorlog's producer over HTTP and the three Kafka clients over the
Kafka listener, one table per workload. The figures are not asserted (timed assertions do not belong
in tests); that every client sent every record without an error is."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ops.bench.kafka_clients import CLIENTS
from ops.bench.kafka_clients import main as kafka_clients_benchmark
from ops.clients.connection import SECRET_ENV

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.integration
@pytest.mark.zk
def test_the_kafka_clients_benchmark_runs(tmp_path: Path, zk_connect_string: str) -> None:
    # Run from an empty directory: no actorlog-data/client.properties to fall back on.
    environment = {k: v for k, v in os.environ.items() if k != SECRET_ENV}
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "ops.bench.kafka_clients",
            "--records",
            "3000",
            "--workloads",
            "idempotent",
            "--zookeeper",
            zk_connect_string,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**environment, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    rows = {
        match[1]: (match[2], int(match[3]))
        for match in re.finditer(
            r"^(\S+)\s+(HTTP|Kafka)\s+[\d,]+\s.*\s(\d+)$", completed.stdout, re.MULTILINE
        )
    }
    assert rows == {
        "http": ("HTTP", 0),
        "kafka-python": ("Kafka", 0),
        "aiokafka": ("Kafka", 0),
        "confluent-kafka": ("Kafka", 0),
    }
    assert set(rows) == set(CLIENTS)
    assert "fastest Kafka client: " in completed.stdout


def test_unknown_clients_and_workloads_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert kafka_clients_benchmark(["--clients", "http,kafka-java", "--workloads", "fastest"]) == 2
    error = capsys.readouterr().err
    assert "unknown kafka-java, fastest" in error
