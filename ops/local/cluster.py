"""A local cluster of real broker processes: what ``actorlog cluster up`` and the demo run.

Layout of the data directory (kept between runs, so a cluster restarted on the same directory
keeps its logs and its credentials)::

    DIR/cluster.json            broker ids, listeners (``HTTP://…``, ``KAFKA://…``), pids, ZooKeeper
                                address (while running)
    DIR/client.properties       bootstrap.servers (the Kafka listeners), security.protocol (with --tls
                                SASL_SSL and the CA as a PEM truststore) and the client user
                                ``admin``'s SCRAM credential, as Kafka's clients read it
                                (sasl.jaas.config), for Kafka's tools and actorlog's own (mode 0600)
    DIR/zookeeper/              the embedded ZooKeeper (when no --zookeeper is given)
    DIR/broker-N/server.properties, DIR/broker-N/logs/, DIR/broker-N/broker.log (the broker identity's
                                internal.auth.secret lives only in server.properties, mode 0600)
    DIR/prometheus/             the optional Prometheus (--prometheus)
    DIR/tls/                    with --tls: the CA (ca.pem, the truststore) and each broker's
                                keystore (broker-N.pem, 0600): ops/local/tls_certs.py

Rules kept:
* every broker's configuration is checked with the broker's own loader before anything starts, so
  a typo in ``--config`` is one clear error, not three crashed processes;
* a broker counts as started when its ``/brokers/ids/N`` znode appears (a ZooKeeper watch); a
  process that exits first is reported with the tail of its log;
* a port is free when the broker's own server could listen on it: the probe is the same
  ``loop.create_server`` call aiohttp makes (SO_REUSEADDR on POSIX), so the TIME_WAIT connections a
  cluster stopped a minute ago leaves behind do not move the next one off 9092; a port really taken
  is replaced by one the OS picks, for that broker only, and recorded (``requested_port``) so the
  command can say so;
* ``watch`` notices every child (brokers, ZooKeeper, Prometheus) that exits without this cluster
  having stopped it, the moment it does (it waits on the processes, no polling);
* every broker also has a Kafka protocol listener (``KAFKA://``, SASL_PLAINTEXT; with ``--tls``
  SASL_SSL, ``listener.security.protocol.map=HTTPS:SSL,KAFKA:SASL_SSL``, the broker's keystore), on
  the HTTP port + 10100 when the ports were asked for (9092 -> 19192), else on one the OS picks;
  ``bootstrap.servers`` in client.properties names them;
* stopping is Kafka's: SIGTERM, one broker at a time, so each controlled shutdown can move its
  leaderships to brokers still running; then ZooKeeper and Prometheus stop; nothing is left behind.
  When our ZooKeeper has died no controlled shutdown can succeed, so the brokers stop side by side.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
import ssl
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Final

import orjson

from actors.server import zk_data
from ops.clients.connection import ClientCredential, resolve_credential
from ops.config import BrokerSettings, settings_from_properties
from ops.local.prometheus import LocalPrometheus, ScrapeTarget
from ops.local.tls_certs import LocalCertificates
from ops.local.zookeeper import LocalZooKeeper
from ops.properties import ConfigError, parse_properties
from ops.security.users import UserStore
from ops.tls import SSL_KEYSTORE_LOCATION, SSL_TRUSTSTORE_LOCATION, SSL_TRUSTSTORE_TYPE, client_context
from runtime.clock import LoopClock
from runtime.coordination import WatchEvent
from runtime.coordination.zk import ZkCoordinator

__all__ = ["BrokerProcess", "ChildExit", "LocalCluster", "launch_broker", "port_is_free", "write_atomically"]

ROOT = Path(__file__).resolve().parents[2]
_REGISTRATION_TIMEOUT_S = 60.0
_HOST = "127.0.0.1"
KAFKA_PORT_OFFSET: Final = 10_100  # a broker's KAFKA port from its HTTP port: 9092 -> 19192
KAFKA_TLS_PROTOCOL: Final = "SASL_SSL"  # the KAFKA listeners' security protocol with --tls
_ZOOKEEPER = "ZooKeeper"  # the name of our ZooKeeper process in exit reports
CLIENT_USER: Final = "admin"  # the client user `cluster up` makes (docs/security.md)
EXIT_LOG_LINES = 20
"""How much of a dead child's log an exit report quotes."""


@dataclass
class BrokerProcess:
    broker_id: int
    port: int
    directory: Path
    process: asyncio.subprocess.Process | None = None
    paused: bool = False  # SIGSTOPped: it answers nothing until resumed
    requested_port: int = 0  # the port asked for (base port + index); 0: any port was fine
    tls: bool = False  # an HTTPS listener
    kafka_port: int | None = None  # the KAFKA listener's port (None: no Kafka listener)

    @property
    def moved(self) -> bool:
        """The port asked for was taken, so this broker listens on another one."""
        return self.requested_port != 0 and self.port != self.requested_port

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / "broker.log"

    @property
    def address(self) -> str:
        return f"{_HOST}:{self.port}"

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.address}"

    @property
    def kafka_address(self) -> str | None:
        return None if self.kafka_port is None else f"{_HOST}:{self.kafka_port}"

    @property
    def listeners(self) -> list[str]:
        """The broker's listeners as Kafka writes them: ``HTTP://127.0.0.1:9092``..."""
        listeners = [f"{'HTTPS' if self.tls else 'HTTP'}://{self.address}"]
        if self.kafka_address is not None:
            listeners.append(f"KAFKA://{self.kafka_address}")
        return listeners

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    def log_tail(self, lines: int = 15) -> str:
        return log_tail(self.log_path, lines)


@dataclass(frozen=True, slots=True)
class ChildExit:
    """A child process of the cluster that exited without the cluster having stopped it."""

    name: str  # "broker 2", "ZooKeeper", "Prometheus"
    pid: int
    returncode: int
    log_path: Path

    @property
    def how(self) -> str:
        """``exited with status 1`` or ``killed by SIGKILL`` (asyncio's negative return codes)."""
        if self.returncode >= 0:
            return f"exited with status {self.returncode}"
        try:
            return f"killed by {signal.Signals(-self.returncode).name}"
        except ValueError:
            return f"killed by signal {-self.returncode}"

    def report(self, lines: int = EXIT_LOG_LINES) -> str:
        """One line naming the child, then the end of its log (indented), for a terminal."""
        header = f"{self.name} (pid {self.pid}) {self.how}; the end of {self.log_path}:"
        tail = log_tail(self.log_path, lines)
        body = "\n".join(f"    {line}" for line in tail.splitlines()) if tail else "    (the log is empty)"
        return f"{header}\n{body}"


@dataclass
class LocalCluster:
    """``async with LocalCluster(Path("actorlog-data"), brokers=3) as cluster:`` runs the cluster."""

    data_dir: Path
    brokers: int = 3
    zookeeper_connect: str | None = None
    config: Mapping[str, str] = field(default_factory=dict)
    base_port: int = 9092
    prometheus: bool = False
    # HTTPS listeners with certificates made in DIR/tls/, clients told SASL_SSL (ops/local/tls_certs.py).
    tls: bool = False
    processes: dict[int, BrokerProcess] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir).resolve()
        self._zookeeper: LocalZooKeeper | None = None
        self._admin: ZkCoordinator | None = None
        self._prometheus: LocalPrometheus | None = None
        self.secret = ""  # the broker identity's: operators and tests on this machine may use it
        self.client_credential = ClientCredential(CLIENT_USER, "")
        # Pids this cluster signalled itself: their exits are no news. A set of pids, not a flag,
        # so that a broker crashing while another one is being stopped is still reported.
        self._stopped_pids: set[int] = set()
        self._stopping = False
        self.unexpected_exits: list[ChildExit] = []

    # ------------------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> LocalCluster:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        if self.brokers < 1:
            raise ConfigError("--brokers must be at least 1")
        if self.base_port and not 1 <= self.base_port <= 65536 - self.brokers:
            raise ConfigError(
                f"--base-port must be 0 or 1-{65536 - self.brokers} for {self.brokers} broker(s)"
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.secret = self._load_or_make_secret()
        self.client_credential = ClientCredential(CLIENT_USER, self._load_or_make_client_password())
        requested = [self.base_port + index if self.base_port else 0 for index in range(self.brokers)]
        kafka_requested = [
            port + KAFKA_PORT_OFFSET if 0 < port <= 65535 - KAFKA_PORT_OFFSET else 0 for port in requested
        ]
        chosen = await _ports(requested + kafka_requested)
        ports, kafka_ports = chosen[: self.brokers], chosen[self.brokers :]
        for index, (port, wanted) in enumerate(zip(ports, requested, strict=True)):
            broker_id = index + 1
            self.processes[broker_id] = BrokerProcess(
                broker_id, port, self.data_dir / f"broker-{broker_id}", requested_port=wanted, tls=self.tls,
                kafka_port=kafka_ports[index],
            )  # fmt: skip
        if self.tls:
            self.certificates.ensure(list(self.processes))
        if self.zookeeper_connect is None:
            self._zookeeper = LocalZooKeeper(self.data_dir / "zookeeper")
            await self._zookeeper.start()
            self.zookeeper_connect = self._zookeeper.connect_string
        # Checked before any broker starts. The brokers share --config, so any one's ZooKeeper
        # security is all of theirs: the admin creates the persistent paths as they would.
        settings = [self._write_broker_config(broker) for broker in self.processes.values()]
        self._write_client_properties()
        self._admin = ZkCoordinator(
            self.zookeeper_connect, session_timeout_ms=10_000, security=settings[0].zookeeper_security
        )
        await self._admin.start()
        for path in zk_data.PERSISTENT_ZK_PATHS:
            await self._admin.ensure_path(path)
        # The client user before any broker: a client may connect as soon as one listens.
        await UserStore(self._admin, clock=LoopClock()).upsert(CLIENT_USER, self.client_credential.password)
        await asyncio.gather(*(self.start_broker(broker_id) for broker_id in self.processes))
        await self.wait_for_controller()
        if self.prometheus:
            await self._start_prometheus()
        self.write_cluster_file()

    async def stop(self) -> None:
        self._stopping = True
        running = [
            broker_id
            for broker_id in sorted(self.processes, reverse=True)
            if self.processes[broker_id].running
        ]
        if self.zookeeper_died:
            # No controlled shutdown can succeed without ZooKeeper: each broker spends its retries
            # (about half a minute) failing, so they fail side by side rather than in turn.
            await asyncio.gather(*(self.stop_broker(broker_id) for broker_id in running))
        else:
            for broker_id in running:
                await self.stop_broker(broker_id)
        if self._prometheus is not None:
            self._expect_exit(_service_process(self._prometheus))
            await self._prometheus.stop()
            self._prometheus = None
        if self._admin is not None:
            await self._admin.close()
            self._admin = None
        if self._zookeeper is not None:
            self._expect_exit(_service_process(self._zookeeper))
            await self._zookeeper.stop()
            self._zookeeper = None
        with contextlib.suppress(FileNotFoundError):
            (self.data_dir / "cluster.json").unlink()

    # -------------------------------------------------------------------------------- brokers

    def _load_or_make_secret(self) -> str:
        for path in sorted(self.data_dir.glob("broker-*/server.properties")):
            existing = parse_properties(path.read_text()).get("internal.auth.secret")
            if existing:
                return existing
        return secrets.token_urlsafe(24)

    def _load_or_make_client_password(self) -> str:
        path = self.data_dir / "client.properties"
        if path.is_file():
            with contextlib.suppress(ConfigError):
                credential = resolve_credential(parse_properties(path.read_text()), data_dir=self.data_dir)
                if credential.username == CLIENT_USER:
                    return credential.password
        return secrets.token_urlsafe(24)

    def _write_broker_config(self, broker: BrokerProcess) -> BrokerSettings:
        assert self.zookeeper_connect is not None
        properties = {
            "broker.id": str(broker.broker_id),
            "listeners": ",".join(broker.listeners),
            **self._tls_properties(broker.broker_id),
            "log.dirs": str(broker.directory / "logs"),
            "zookeeper.connect": self.zookeeper_connect,
            "internal.auth.secret": self.secret,
            # Fewer brokers than the project's RF 3 default: new topics use what there is.
            "default.replication.factor": str(min(3, self.brokers)),
            "min.insync.replicas": str(min(2, self.brokers)),
            **self.config,
        }
        settings = settings_from_properties(properties)  # raises ConfigError naming the bad key
        broker.directory.mkdir(parents=True, exist_ok=True)
        text = "".join(f"{key}={value}\n" for key, value in properties.items())
        write_atomically(broker.config_path, text.encode(), mode=0o600)
        return settings

    @property
    def certificates(self) -> LocalCertificates:
        return LocalCertificates(self.data_dir / "tls")

    @property
    def client_properties_path(self) -> Path:
        """``DIR/client.properties``: the client user, ``security.protocol`` and (with --tls) the
        truststore. Clients in this process pass it too (Admin's ``command_config``, the
        producer's ``properties_file``, the consumer's ``config_file``) even with the broker
        identity as ``secret``: without it they would read the ``client.properties`` of whatever
        ``actorlog-data`` is in the working directory for their security protocol."""
        return self.data_dir / "client.properties"

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        """What verifies this cluster's brokers for a plain HTTP client (aiohttp); None without TLS."""
        if not self.tls:
            return None
        return client_context({SSL_TRUSTSTORE_LOCATION: str(self.certificates.ca_path)})

    def _tls_properties(self, broker_id: int) -> dict[str, str]:
        if not self.tls:
            return {}
        return {
            # Kafka's model: the listener name KAFKA, its security protocol from the map.
            "listener.security.protocol.map": f"HTTPS:SSL,{zk_data.KAFKA_LISTENER_NAME}:{KAFKA_TLS_PROTOCOL}",
            SSL_KEYSTORE_LOCATION: str(self.certificates.keystore_path(broker_id)),
            SSL_TRUSTSTORE_LOCATION: str(self.certificates.ca_path),
        }

    @property
    def kafka_security_protocol(self) -> str:
        """What the KAFKA listeners speak: SASL_SSL with ``--tls``, else SASL_PLAINTEXT."""
        return KAFKA_TLS_PROTOCOL if self.tls else "SASL_PLAINTEXT"

    def _write_client_properties(self) -> None:
        # ssl.truststore.type=PEM: Kafka's Java clients read a PEM truststore only when told (JKS is
        # their default); kafka-python and librdkafka take the same file as ssl_cafile / ssl.ca.location.
        security = f"security.protocol={self.kafka_security_protocol}\n" + (
            f"{SSL_TRUSTSTORE_LOCATION}={self.certificates.ca_path}\n{SSL_TRUSTSTORE_TYPE}=PEM\n"
            if self.tls
            else ""
        )
        text = (
            "# Written by `actorlog cluster up`: pass with --command-config, or run from this\n"
            "# directory's parent, where clients find it on their own.\n"
            f"bootstrap.servers={self.kafka_bootstrap_servers or self.bootstrap_servers}\n"
            f"{security}"
            "sasl.mechanism=SCRAM-SHA-256\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{CLIENT_USER}" password="{self.client_credential.password}";\n'
        )
        write_atomically(self.client_properties_path, text.encode(), mode=0o600)

    async def start_broker(self, broker_id: int) -> BrokerProcess:
        broker = self.processes[broker_id]
        assert self._admin is not None
        broker.process = await launch_broker(
            broker_id, broker.config_path, broker.log_path, self._admin, timeout_s=_REGISTRATION_TIMEOUT_S
        )
        return broker

    async def stop_broker(
        self, broker_id: int, sig: signal.Signals = signal.SIGTERM, *, timeout_s: float = 120
    ) -> int:
        """Signal the broker and wait for it to exit; its exit code (SIGKILL after ``timeout_s``)."""
        broker = self.processes[broker_id]
        process = broker.process
        if process is None or process.returncode is not None:
            return process.returncode if process is not None and process.returncode is not None else 0
        self._expect_exit(process)
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGCONT)  # a paused broker must run to handle SIGTERM
            process.send_signal(sig)
        broker.paused = False
        try:
            return await asyncio.wait_for(process.wait(), timeout=timeout_s)
        except TimeoutError:
            process.kill()
            return await process.wait()

    @property
    def zookeeper_died(self) -> bool:
        """Our own ZooKeeper (not one given with ``zookeeper_connect``) exited on its own."""
        return any(exit_.name == _ZOOKEEPER for exit_ in self.unexpected_exits)

    def kill_brokers(self) -> None:
        """SIGKILL every running broker at once (a second Ctrl-C): no controlled shutdown."""
        for broker in self.processes.values():
            if broker.process is not None and broker.running:
                self._expect_exit(broker.process)
                with contextlib.suppress(ProcessLookupError):
                    broker.process.kill()

    def _expect_exit(self, process: asyncio.subprocess.Process | None) -> None:
        if process is not None:
            self._stopped_pids.add(process.pid)

    def pause_broker(self, broker_id: int) -> None:
        """SIGSTOP: the broker stops fetching and answering, as a stalled machine does."""
        os.kill(self._pid(broker_id), signal.SIGSTOP)
        self.processes[broker_id].paused = True

    def resume_broker(self, broker_id: int) -> None:
        os.kill(self._pid(broker_id), signal.SIGCONT)
        self.processes[broker_id].paused = False

    def _pid(self, broker_id: int) -> int:
        process = self.processes[broker_id].process
        if process is None or process.returncode is not None:
            raise RuntimeError(f"broker {broker_id} is not running")
        return process.pid

    # ------------------------------------------------------------------------------- watching

    def _children(self) -> list[tuple[str, asyncio.subprocess.Process, Path]]:
        """Every child process running now: name, process, log file."""
        children = [
            (f"broker {broker.broker_id}", broker.process, broker.log_path)
            for broker in self.processes.values()
            if broker.process is not None and broker.running
        ]
        for name, service in ((_ZOOKEEPER, self._zookeeper), ("Prometheus", self._prometheus)):
            if service is not None and (process := _service_process(service)) is not None:
                children.append((name, process, service.log_path))
        return children

    async def watch(self, report: Callable[[ChildExit], None]) -> None:
        """Call ``report`` the moment a child process running now (brokers, our ZooKeeper, our
        Prometheus) exits without this cluster having stopped it; it is also appended to
        ``unexpected_exits``. Returns once every one of them has exited (after ``stop``: at once).
        Processes started later (``start_broker`` again) are not watched by this call."""

        async def one(name: str, process: asyncio.subprocess.Process, log_path: Path) -> None:
            returncode = await process.wait()
            if process.pid in self._stopped_pids:
                return
            exit_ = ChildExit(name, process.pid, returncode, log_path)
            self.unexpected_exits.append(exit_)
            if not self._stopping:
                self.write_cluster_file()  # its pid is gone from the cluster file
            report(exit_)

        await asyncio.gather(*(one(*child) for child in self._children()))

    # ------------------------------------------------------------------------------ observing

    @property
    def bootstrap_servers(self) -> str:
        """The HTTP listeners: what actorlog's own clients and tools connect to."""
        return ",".join(broker.address for broker in self.processes.values())

    @property
    def kafka_bootstrap_servers(self) -> str:
        """The KAFKA listeners, for Kafka's clients and tools."""
        return ",".join(b.kafka_address for b in self.processes.values() if b.kafka_address is not None)

    @property
    def admin(self) -> ZkCoordinator:
        assert self._admin is not None
        return self._admin

    @property
    def zookeeper_pid(self) -> int | None:
        """Our own ZooKeeper's process id (None: an external one, or not running): what a
        benchmark charges ZooKeeper's CPU to."""
        return None if self._zookeeper is None else self._zookeeper.pid

    @property
    def prometheus_url(self) -> str | None:
        return None if self._prometheus is None else self._prometheus.url

    async def controller_id(self) -> int | None:
        try:
            data, _ = await self.admin.get(zk_data.CONTROLLER_PATH)
        except Exception:  # noqa: BLE001 - no controller (or no answer) right now
            return None
        return zk_data.decode_controller(data).broker_id

    async def wait_for_controller(self, *, timeout_s: float = 60) -> int:
        """Until /controller exists (a ZooKeeper exists-watch, no polling)."""
        elected: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def on_event(_event: WatchEvent) -> None:
            if not elected.done():
                elected.set_result(None)

        while True:
            if await self.admin.exists(zk_data.CONTROLLER_PATH, watch=on_event) is not None:
                controller = await self.controller_id()
                if controller is not None:
                    return controller
            await asyncio.wait_for(asyncio.shield(elected), timeout=timeout_s)
            elected = asyncio.get_running_loop().create_future()

    def describe(self) -> dict[str, object]:
        return {
            "zookeeper": self.zookeeper_connect,
            "bootstrap_servers": self.bootstrap_servers,
            "kafka_bootstrap_servers": self.kafka_bootstrap_servers or None,
            "kafka_security_protocol": self.kafka_security_protocol,
            "client_properties": str(self.data_dir / "client.properties"),
            "prometheus": self.prometheus_url,
            "brokers": [
                {
                    "broker_id": broker.broker_id,
                    "endpoint": broker.url,
                    "listeners": broker.listeners,
                    "pid": broker.process.pid if broker.running and broker.process else None,
                    "log_dir": str(broker.directory / "logs"),
                    "log_file": str(broker.log_path),
                }
                for broker in self.processes.values()
            ],
        }

    def write_cluster_file(self) -> None:
        write_atomically(
            self.data_dir / "cluster.json", orjson.dumps(self.describe(), option=orjson.OPT_INDENT_2) + b"\n"
        )

    async def _start_prometheus(self) -> None:
        rules = ROOT / "dashboards" / "alerts" / "actorlog-alerts.yaml"
        prometheus = LocalPrometheus(
            self.data_dir / "prometheus",
            scrape_interval_s=5,
            rule_files=[rules] if rules.is_file() else [],
            ca_file=self.certificates.ca_path if self.tls else None,
        )
        await prometheus.start()
        prometheus.set_targets(
            [
                ScrapeTarget(broker.address, {"broker": str(broker.broker_id)})
                for broker in self.processes.values()
            ]
        )
        self._prometheus = prometheus


async def launch_broker(
    broker_id: int,
    config_path: Path,
    log_path: Path,
    coordinator: ZkCoordinator,
    *,
    timeout_s: float,
    extra_args: tuple[str, ...] = (),
    environment: Mapping[str, str] | None = None,
    module: tuple[str, ...] = ("ops",),
) -> asyncio.subprocess.Process:
    """Start ``actorlog broker start --config config_path`` (output appended to ``log_path``) and
    return once its ``/brokers/ids/N`` znode exists, created by this launch (a watch, no polling);
    RuntimeError with the end of its log if it exits or does not register within ``timeout_s``.
    ``environment`` adds to the launcher's environment; ``module``: what ``python -m`` runs before
    ``broker start`` (``ops.verify.faulty_broker`` and its options for a negative control).

    A killed incarnation's registration outlives it until its session expires, so the znode counts
    only once its czxid (the broker epoch) differs from the one found before the launch: returning on
    the old znode handed callers a broker whose listener was not up yet."""
    path = zk_data.broker_id_path(broker_id)
    previous = await coordinator.exists(path)
    previous_epoch = None if previous is None else previous.czxid
    with log_path.open("ab") as output:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", *module, "broker", "start", "--config", str(config_path), *extra_args,
            cwd=ROOT, stdout=output, stderr=output,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(environment or {})},
            start_new_session=True,  # Ctrl-C in a terminal reaches the launcher only
        )  # fmt: skip
    try:
        exited: asyncio.Future[object] = asyncio.ensure_future(process.wait())
        try:
            deadline = asyncio.get_running_loop().time() + timeout_s
            while True:
                changed: asyncio.Future[object] = asyncio.get_running_loop().create_future()

                def on_event(_event: WatchEvent, changed: asyncio.Future[object] = changed) -> None:
                    if not changed.done():
                        changed.set_result(None)

                stat = await coordinator.exists(path, watch=on_event)
                if stat is not None and stat.czxid != previous_epoch:
                    break
                remaining = deadline - asyncio.get_running_loop().time()
                waiting: set[asyncio.Future[object]] = {changed, exited}
                done, _ = await asyncio.wait(
                    waiting, timeout=max(remaining, 0), return_when=asyncio.FIRST_COMPLETED
                )
                if changed not in done:
                    reason = "exited" if process.returncode is not None else "did not register in time"
                    raise RuntimeError(
                        f"broker {broker_id} {reason}; the end of {log_path}:\n{log_tail(log_path)}"
                    )
        finally:
            exited.cancel()
    except BaseException:
        # Not returned, so nobody else will stop it: a broker left running in its own session
        # would outlive the caller (a cancelled start, a timeout, ZooKeeper unreachable).
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await asyncio.shield(process.wait())
        raise
    return process


def log_tail(path: Path, lines: int = 15) -> str:
    """The last lines of a log file (empty when it cannot be read): what error messages quote."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def write_atomically(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Write ``path`` so that readers see the old file or the new one, never a part."""
    temporary = path.with_name(f".{path.name}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)


async def port_is_free(port: int, host: str = _HOST) -> bool:
    """Whether a broker's HTTP server could listen on ``host:port`` now.

    The probe is the call the server itself makes (aiohttp's TCPSite: ``loop.create_server`` with
    the default ``reuse_address``, i.e. SO_REUSEADDR on POSIX), bind and listen, closed at once. A
    plain ``bind`` would count the TIME_WAIT connections of a cluster stopped within the last
    minute as taken, although the server binds over them without trouble."""
    loop = asyncio.get_running_loop()
    try:
        server = await loop.create_server(asyncio.Protocol, host, port)
    except OSError:
        return False
    server.close()
    await server.wait_closed()
    return True


async def _ports(requested: list[int]) -> list[int]:
    """Each requested port when free; for a 0 or a taken one, a free port the OS picks."""
    with contextlib.ExitStack() as held:
        chosen: list[int] = []
        for port in requested:
            if port and await port_is_free(port):
                chosen.append(port)
                continue
            # Held open until all are chosen, so two brokers are never given the same port.
            probe = held.enter_context(socket.socket())
            probe.bind((_HOST, 0))
            chosen.append(int(probe.getsockname()[1]))
        return chosen


def _service_process(service: LocalZooKeeper | LocalPrometheus) -> asyncio.subprocess.Process | None:
    """The server process of our ZooKeeper or Prometheus. Their classes keep it private (they own
    starting and stopping it); the cluster only waits on it and reads its pid."""
    if isinstance(service, LocalZooKeeper):
        return service._async_process
    return service._process
