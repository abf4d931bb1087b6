"""A real Apache Kafka cluster in ZooKeeper mode, from Kafka's jars: the twin ``make interop``'s
harness is proven on, and the cluster ``make bench-vs-kafka`` measures actorlog beside.

``RealKafkaCluster`` starts its own ZooKeeper (``ops.local.zookeeper.LocalZooKeeper``, the one
actorlog installs), creates the client user's SCRAM-SHA-256 credential in it with Kafka's own
``kafka.admin.ConfigCommand --zookeeper`` (before any broker starts, as Kafka's documentation
says: the brokers authenticate to each other with it), then starts N brokers as
``java -cp 'lib/*' kafka.Kafka server.properties``, each with one ``SASL_PLAINTEXT`` listener on a
free loopback port offering SCRAM-SHA-256 and PLAIN (the mechanisms actorlog's Kafka listener
offers). It writes a ``client.properties`` shaped as ``actorlog cluster up`` writes its own
(``bootstrap.servers``, ``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``), so the
same tool invocations run against either.

Layout of the data directory::

    DIR/zookeeper/                  the ZooKeeper's data and log
    DIR/broker-N/server.properties  the broker's configuration
    DIR/broker-N/logs/              its log directory
    DIR/broker-N/broker.log         its stdout and stderr (log4j: tools/kafka/broker-log4j.properties)
    DIR/client.properties           for clients

Ready means: every broker's own metadata lists all N brokers and a controller (asked through each
broker in turn with kafka-python, authenticated as the client user). Kafka registers a broker in
ZooKeeper before the controller has told the other brokers about it, so a tool run just after the
registrations could see fewer brokers than there are. The wait is a bounded sequence of those
metadata requests; the pause between two is spent waiting for a broker process to exit, so a
broker that dies is reported at once with the end of its log, never after the deadline.

Stopping is Kafka's: SIGTERM, one broker at a time (controlled shutdown), then ZooKeeper.

``broker_pids()`` and ``zookeeper_pid`` name the processes, for a benchmark's CPU accounting.
kafka-python (a development dependency, as Kafka's jars are a build-time download) is imported
only when a cluster starts.
"""

from __future__ import annotations

import contextlib
import secrets
import signal
import socket
import subprocess
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final

from ops.local.kafka_tools import (
    BROKER_LOG4J,
    CONFIG_COMMAND,
    KAFKA_SERVER,
    KafkaDistribution,
    run_tool,
)
from ops.local.zookeeper import LocalZooKeeper, ZooKeeperInstallation
from runtime.clock import LoopClock

__all__ = ["RealKafkaCluster", "RealKafkaStartError"]

CLIENT_USER: Final = "admin"
BROKER_JVM_OPTIONS: Final = ("-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20")
_PROBE_PAUSE_S: Final = 0.25
_PROBE_REQUEST_TIMEOUT_MS: Final = 5_000
_STOP_GRACE_S: Final = 60.0
_LOG_TAIL_LINES: Final = 25


class RealKafkaStartError(RuntimeError):
    """The cluster did not come up; the message says which step failed and quotes its output."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _tail(path: Path) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:])
    except OSError:
        return ""


@dataclass
class _Broker:
    broker_id: int
    port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / "broker.log"


class RealKafkaCluster:
    """``with RealKafkaCluster(distribution, tmp_path) as kafka:`` runs it; see the module docstring."""

    def __init__(
        self,
        distribution: KafkaDistribution,
        data_dir: Path,
        *,
        brokers: int = 3,
        zookeeper_installation: ZooKeeperInstallation | None = None,
        zookeeper_force_sync: bool = False,
        start_timeout_s: float = 120.0,
    ) -> None:
        if brokers < 1:
            raise ValueError("brokers must be at least 1")
        self.distribution = distribution
        self.data_dir = data_dir.resolve()
        self.brokers = brokers
        self.password = secrets.token_hex(16)  # hex: nothing ConfigCommand's [k=v,...] syntax reads
        self._zookeeper = LocalZooKeeper(
            self.data_dir / "zookeeper", force_sync=zookeeper_force_sync, installation=zookeeper_installation
        )
        self._start_timeout_s = start_timeout_s
        self._brokers: list[_Broker] = []

    # ------------------------------------------------------------------------------ observing

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(broker.address for broker in self._brokers)

    @property
    def client_properties_path(self) -> Path:
        return self.data_dir / "client.properties"

    @property
    def zookeeper_connect(self) -> str:
        return self._zookeeper.connect_string

    def broker_logs(self) -> list[Path]:
        return [broker.log_path for broker in self._brokers]

    def broker_pids(self) -> Mapping[int, int]:
        """Broker id -> pid of each broker process still running."""
        return {
            broker.broker_id: broker.process.pid
            for broker in self._brokers
            if broker.process is not None and broker.process.poll() is None
        }

    @property
    def zookeeper_pid(self) -> int | None:
        return self._zookeeper.pid

    # ------------------------------------------------------------------------------ lifecycle

    def __enter__(self) -> RealKafkaCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._zookeeper.start_sync()
        self._create_client_user()
        self._brokers = [
            _Broker(broker_id, _free_port(), self.data_dir / f"broker-{broker_id}")
            for broker_id in range(1, self.brokers + 1)
        ]
        self._write_client_properties()
        for broker in self._brokers:
            self._write_broker_config(broker)
            argv = self.distribution.java_command(
                KAFKA_SERVER,
                [str(broker.config_path)],
                jvm_options=(*BROKER_JVM_OPTIONS, f"-Dkafka.logs.dir={broker.directory}"),
                log4j=BROKER_LOG4J,
            )
            with broker.log_path.open("ab") as log:
                broker.process = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
                )
        self._wait_until_ready()

    def stop(self) -> None:
        for broker in reversed(self._brokers):
            process = broker.process
            broker.process = None
            if process is None or process.poll() is not None:
                continue
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                process.wait()
        self._zookeeper.stop_sync()

    # ---------------------------------------------------------------------------------- steps

    def _create_client_user(self) -> None:
        """Kafka's way in ZooKeeper mode: the credential is stored in /config/users/admin."""
        run = run_tool(
            self.distribution,
            CONFIG_COMMAND,
            [
                "--zookeeper", self._zookeeper.connect_string,
                "--alter", "--add-config", f"SCRAM-SHA-256=[iterations=4096,password={self.password}]",
                "--entity-type", "users", "--entity-name", CLIENT_USER,
            ],
        )  # fmt: skip
        if not run.ok:
            raise RealKafkaStartError(f"could not create the SCRAM user {CLIENT_USER}:\n{run.describe()}")

    def _write_client_properties(self) -> None:
        self.client_properties_path.write_text(
            "# Written by ops/local/apache_kafka.py, shaped as `actorlog cluster up` writes its own.\n"
            f"bootstrap.servers={self.bootstrap_servers}\n"
            "security.protocol=SASL_PLAINTEXT\n"
            "sasl.mechanism=SCRAM-SHA-256\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{CLIENT_USER}" password="{self.password}";\n'
        )
        self.client_properties_path.chmod(0o600)

    def _write_broker_config(self, broker: _Broker) -> None:
        replication = min(3, self.brokers)
        min_isr = min(2, self.brokers)
        scram = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{CLIENT_USER}" password="{self.password}";'
        )
        plain = (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{CLIENT_USER}" password="{self.password}" user_{CLIENT_USER}="{self.password}";'
        )
        properties = {
            "broker.id": str(broker.broker_id),
            "listeners": f"SASL_PLAINTEXT://{broker.address}",
            "advertised.listeners": f"SASL_PLAINTEXT://{broker.address}",
            "security.inter.broker.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN",
            # The SCRAM login is also what this broker presents to the others.
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": scram,
            # PLAIN's users live in the JAAS configuration (user_<name>="<password>").
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain,
            "zookeeper.connect": self._zookeeper.connect_string,
            "log.dirs": str(broker.directory / "logs"),
            # What `actorlog cluster up` sets for its brokers, so topics get the same defaults.
            "default.replication.factor": str(replication),
            "min.insync.replicas": str(min_isr),
            "offsets.topic.replication.factor": str(replication),
            "transaction.state.log.replication.factor": str(replication),
            "transaction.state.log.min.isr": str(min_isr),
            "group.initial.rebalance.delay.ms": "0",
        }
        broker.directory.mkdir(parents=True, exist_ok=True)
        broker.config_path.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
        broker.config_path.chmod(0o600)

    # ------------------------------------------------------------------------------ readiness

    def _wait_until_ready(self) -> None:
        clock = LoopClock()
        deadline_ms = clock.now_ms() + int(self._start_timeout_s * 1000)
        pending = list(self._brokers)
        last_view = "no answer yet"
        while pending:
            self._raise_if_a_broker_died()
            view = self._brokers_seen_by(pending[0])
            if isinstance(view, set) and len(view) == self.brokers:
                pending.pop(0)
                continue
            last_view = f"broker {pending[0].broker_id} answered {view}"
            if clock.now_ms() >= deadline_ms:
                raise RealKafkaStartError(
                    f"the Kafka cluster was not ready within {self._start_timeout_s} s ({last_view}); "
                    f"the end of {pending[0].log_path}:\n{_tail(pending[0].log_path)}"
                )
            self._pause()

    def _brokers_seen_by(self, broker: _Broker) -> set[int] | str:
        """The broker ids in this broker's metadata when it also names a controller, else why not."""
        try:
            # Not listening yet: say so at once (kafka-python would retry until its own timeout).
            with socket.create_connection(("127.0.0.1", broker.port), timeout=1.0):
                pass
        except OSError as error:
            return f"not listening: {error}"
        with warnings.catch_warnings():
            # kafka-python 3.0 loads its protocol schemas with the deprecated importlib.resources.read_text.
            warnings.simplefilter("ignore", DeprecationWarning)
            from kafka import KafkaAdminClient
        try:
            admin = KafkaAdminClient(
                bootstrap_servers=broker.address,
                security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="SCRAM-SHA-256",
                sasl_plain_username=CLIENT_USER,
                sasl_plain_password=self.password,
                request_timeout_ms=_PROBE_REQUEST_TIMEOUT_MS,
                bootstrap_timeout_ms=_PROBE_REQUEST_TIMEOUT_MS,
                reconnect_backoff_max_ms=500,
                client_id="interop-readiness",
            )
        except Exception as error:  # noqa: BLE001 - not listening yet, not authenticating yet
            return f"{type(error).__name__}: {error}"
        try:
            cluster = admin.describe_cluster()
        except Exception as error:  # noqa: BLE001
            return f"{type(error).__name__}: {error}"
        finally:
            admin.close()
        if cluster.get("controller_id") in (None, -1):
            return "no controller yet"
        return {int(node["broker_id"]) for node in cluster.get("brokers", [])}

    def _raise_if_a_broker_died(self) -> None:
        for broker in self._brokers:
            if broker.process is not None and broker.process.poll() is not None:
                raise RealKafkaStartError(
                    f"Kafka broker {broker.broker_id} exited with status {broker.process.returncode}; "
                    f"the end of {broker.log_path}:\n{_tail(broker.log_path)}"
                )

    def _pause(self) -> None:
        """Wait for a broker to exit, up to the probe pause: no sleep, and a death is seen at once."""
        for broker in self._brokers:
            if broker.process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    broker.process.wait(_PROBE_PAUSE_S / len(self._brokers))
