"""Fixtures of the interop harness (docs/interop.md): Kafka's jars, and the cluster a test runs on.

``target`` is module-scoped and parametrised over two clusters, so every test runs twice:

* ``real-kafka``: a real Apache Kafka 3.9 cluster in ZooKeeper mode
  (``ops.local.apache_kafka.RealKafkaCluster``), the twin that proves the harness itself: a check
  that fails there is the harness's bug;
* ``actorlog``: ``actorlog cluster up`` (``ops.local.cluster_up.ActorlogClusterUp``).

Both have three brokers and a ``client.properties`` of the same shape (SASL_PLAINTEXT,
SCRAM-SHA-256, the user ``admin``). ``make interop PYTEST_ARGS='-k real-kafka'`` runs one of them.

Without Java, Kafka's jars or ZooKeeper the tests skip with the reason, unless
``ACTORLOG_REQUIRE_INTEROP`` is set (``make interop`` sets it): then they fail, so that the target
cannot pass by skipping.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Final, NoReturn

import pytest

from ops.local.apache_kafka import RealKafkaCluster
from ops.local.cluster_up import ActorlogClusterUp
from ops.local.kafka_tools import KafkaDistribution, KafkaJarsMissingError, find_distribution
from ops.local.zookeeper import ZooKeeperInstallation, ZooKeeperNotInstalledError, find_installation
from tests.interop.targets import Target

BROKERS: Final = 3
PERF_RESULTS: Final = pytest.StashKey[list[str]]()


def _missing(reason: str) -> NoReturn:
    if os.environ.get("ACTORLOG_REQUIRE_INTEROP"):
        pytest.fail(f"ACTORLOG_REQUIRE_INTEROP is set but the interop harness cannot run: {reason}")
    pytest.skip(f"{reason} (`make interop` fetches the jars and makes this an error)")


@pytest.fixture(scope="session")
def kafka_distribution() -> KafkaDistribution:
    try:
        return find_distribution()
    except KafkaJarsMissingError as error:
        _missing(str(error))


@pytest.fixture(scope="session")
def zookeeper_installation() -> ZooKeeperInstallation:
    try:
        return find_installation()
    except ZooKeeperNotInstalledError as error:
        _missing(str(error))


@pytest.fixture(scope="module", params=["real-kafka", "actorlog"])
def target(
    request: pytest.FixtureRequest,
    kafka_distribution: KafkaDistribution,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Target]:
    name: str = request.param
    directory = tmp_path_factory.mktemp(f"interop-{name}")
    if name == "real-kafka":
        zookeeper = request.getfixturevalue("zookeeper_installation")
        with RealKafkaCluster(
            kafka_distribution, directory, brokers=BROKERS, zookeeper_installation=zookeeper
        ) as kafka:
            yield Target(
                name,
                kafka.bootstrap_servers,
                kafka.client_properties_path,
                BROKERS,
                tuple(kafka.broker_logs()),
            )
    else:
        with ActorlogClusterUp(directory, brokers=BROKERS) as cluster:
            yield Target(
                name,
                cluster.bootstrap_servers,
                cluster.client_properties_path,
                BROKERS,
                tuple(cluster.broker_logs()),
            )


@pytest.fixture
def perf_results(request: pytest.FixtureRequest) -> list[str]:
    """Lines for the run's closing summary (ProducerPerformance's figures per cluster)."""
    return request.config.stash.setdefault(PERF_RESULTS, [])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    lines = config.stash.get(PERF_RESULTS, [])
    if lines:
        terminalreporter.section("Kafka's ProducerPerformance (figures only; nothing asserts a rate)")
        for line in lines:
            terminalreporter.write_line(line)
