"""``actorlog configs`` against a real local cluster (``actorlog cluster up`` in the background):
dynamic broker configs per broker and cluster-wide, topic throttle lists, Kafka's output lines,
one-line errors and exit codes, as a user types them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from ops.clients.connection import SECRET_ENV
from tests.support.cluster_up import start_cluster_up

pytestmark = [pytest.mark.integration, pytest.mark.zk]

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class RunningCluster:
    process: subprocess.Popen[str]
    workdir: Path

    @property
    def bootstrap(self) -> str:
        description = orjson.loads((self.workdir / "actorlog-data" / "cluster.json").read_bytes())
        return str(description["bootstrap_servers"]).split(",")[0]

    def run(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        environment = {k: v for k, v in os.environ.items() if k != SECRET_ENV}
        environment["PYTHONPATH"] = str(ROOT)
        return subprocess.run(
            [sys.executable, "-m", "ops", *arguments],
            cwd=self.workdir,
            capture_output=True,
            text=True,
            timeout=120,
            env=environment,
            check=False,
        )

    def configs(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        return self.run("configs", "--bootstrap-server", self.bootstrap, *arguments)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper_server: object) -> Iterator[RunningCluster]:
    workdir = tmp_path_factory.mktemp("configs")
    process, _ = start_cluster_up(["--base-port", "0", "--brokers", "2"], workdir)
    try:
        yield RunningCluster(process, workdir)
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=120)


def test_broker_throttle_rates_per_broker_and_cluster_wide(cluster: RunningCluster) -> None:
    described = cluster.configs("--entity-type", "brokers", "--entity-name", "1", "--describe")
    assert described.returncode == 0, described.stderr
    assert described.stdout == "Dynamic configs for broker 1 are:\n"

    altered = cluster.configs(
        "--entity-type", "brokers", "--entity-default", "--alter",
        "--add-config", "follower.replication.throttled.rate=50000,leader.replication.throttled.rate=60000",
    )  # fmt: skip
    assert altered.returncode == 0, altered.stderr
    assert altered.stdout == "Completed updating default config for brokers in the cluster.\n"
    altered = cluster.configs(
        "--entity-type", "brokers", "--entity-name", "1", "--alter",
        "--add-config", "leader.replication.throttled.rate=1000000",
    )  # fmt: skip
    assert altered.returncode == 0, altered.stderr
    assert altered.stdout == "Completed updating config for broker 1.\n"

    described = cluster.configs("--entity-type", "brokers", "--entity-name", "1", "--describe")
    assert described.returncode == 0, described.stderr
    assert described.stdout.splitlines() == [
        "Dynamic configs for broker 1 are:",
        "  leader.replication.throttled.rate=1000000 sensitive=false "
        "synonyms={DYNAMIC_BROKER_CONFIG:leader.replication.throttled.rate=1000000, "
        "DYNAMIC_DEFAULT_BROKER_CONFIG:leader.replication.throttled.rate=60000}",
    ]
    described = cluster.configs("--entity-type", "brokers", "--entity-default", "--describe")
    assert described.stdout.splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  follower.replication.throttled.rate=50000 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:follower.replication.throttled.rate=50000}",
        "  leader.replication.throttled.rate=60000 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:leader.replication.throttled.rate=60000}",
    ]

    for entity in (("--entity-name", "1"), ("--entity-default",)):
        keys = (
            "leader.replication.throttled.rate"
            if entity[0] == "--entity-name"
            else ("leader.replication.throttled.rate,follower.replication.throttled.rate")
        )
        deleted = cluster.configs("--entity-type", "brokers", *entity, "--alter", "--delete-config", keys)
        assert deleted.returncode == 0, deleted.stderr
    described = cluster.configs("--entity-type", "brokers", "--entity-default", "--describe")
    assert described.stdout == "Default configs for brokers in the cluster are:\n"


def test_topic_throttled_replicas(cluster: RunningCluster) -> None:
    created = cluster.run(
        "topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", "throttled",
        "--partitions", "2", "--replication-factor", "2",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    altered = cluster.configs(
        "--entity-type", "topics", "--entity-name", "throttled", "--alter",
        "--add-config", "leader.replication.throttled.replicas=[0:1,1:2],retention.ms=600000",
    )  # fmt: skip
    assert altered.returncode == 0, altered.stderr
    assert altered.stdout == "Completed updating config for topic throttled.\n"
    described = cluster.configs("--entity-type", "topics", "--entity-name", "throttled", "--describe")
    assert described.stdout.splitlines() == [
        "Dynamic configs for topic throttled are:",
        "  leader.replication.throttled.replicas=0:1,1:2 sensitive=false "
        "synonyms={DYNAMIC_TOPIC_CONFIG:leader.replication.throttled.replicas=0:1,1:2}",
        "  retention.ms=600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=600000}",
    ]
    refused = cluster.configs(
        "--entity-type", "topics", "--entity-name", "throttled", "--alter",
        "--add-config", "follower.replication.throttled.replicas=all",
    )  # fmt: skip
    assert refused.returncode == 1
    assert len(refused.stderr.splitlines()) == 1
    assert "follower.replication.throttled.replicas must be the literal '*'" in refused.stderr


def test_errors_are_one_line_with_kafkas_words(cluster: RunningCluster) -> None:
    refused = cluster.configs(
        "--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config", "num.partitions=3"
    )
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [
        "Error while executing config command with args '--bootstrap-server "
        f"{cluster.bootstrap} --entity-type brokers --entity-name 1 --alter --add-config num.partitions=3': "
        "Invalid config value for resource ConfigResource(type=BROKER, name='1'): "
        "Cannot update these configs dynamically: Set(num.partitions)"
    ]
    missing = cluster.configs(
        "--entity-type",
        "brokers",
        "--entity-name",
        "2",
        "--alter",
        "--delete-config",
        "leader.replication.throttled.rate",
    )
    assert (missing.returncode, missing.stderr) == (
        1,
        "Invalid config(s): leader.replication.throttled.rate\n",
    )
    named = cluster.configs("--entity-type", "brokers", "--entity-name", "one", "--describe")
    assert (named.returncode, named.stderr) == (
        1,
        "The entity name for brokers must be a valid integer broker id, found: one\n",
    )
    malformed = cluster.configs(
        "--entity-type", "brokers", "--entity-default", "--alter", "--add-config", "x"
    )
    assert malformed.returncode == 1
    assert (
        malformed.stderr
        == 'Invalid entity config: all configs to be added must be in the format "key=val".\n'
    )
    nothing = cluster.configs("--entity-type", "brokers", "--entity-default", "--alter")
    assert nothing.returncode == 2
    assert "At least one of --add-config or --delete-config must be specified with --alter" in nothing.stderr
