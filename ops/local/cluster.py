"""A local cluster of real broker processes: what ``actorlog cluster up`` and the demo run.

Layout of the data directory (kept between runs, so a cluster restarted on the same directory
keeps its logs and its secret)::

    DIR/cluster.json            broker ids, HTTP endpoints, pids, ZooKeeper address (while running)
    DIR/client.properties       bootstrap.servers and internal.auth.secret, for clients (mode 0600)
    DIR/zookeeper/              the embedded ZooKeeper (when no --zookeeper is given)
    DIR/broker-N/server.properties, DIR/broker-N/logs/, DIR/broker-N/broker.log
    DIR/prometheus/             the optional Prometheus (--prometheus)

Rules kept:
* every broker's configuration is checked with the broker's own loader before anything starts, so
  a typo in ``--config`` is one clear error, not three crashed processes;
* a broker counts as started when its ``/brokers/ids/N`` znode appears (a ZooKeeper watch); a
  process that exits first is reported with the tail of its log;
* stopping is Kafka's: SIGTERM, one broker at a time, so each controlled shutdown can move its
  leaderships to brokers still running; then ZooKeeper and Prometheus stop; nothing is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import orjson

from actors.server import zk_data
from ops.config import settings_from_properties
from ops.local.prometheus import LocalPrometheus, ScrapeTarget
from ops.local.zookeeper import LocalZooKeeper
from ops.properties import ConfigError, parse_properties
from runtime.coordination import WatchEvent
from runtime.coordination.zk import ZkCoordinator

__all__ = ["BrokerProcess", "LocalCluster", "launch_broker", "write_atomically"]

ROOT = Path(__file__).resolve().parents[2]
_REGISTRATION_TIMEOUT_S = 60.0


@dataclass
class BrokerProcess:
    broker_id: int
    port: int
    directory: Path
    process: asyncio.subprocess.Process | None = None
    paused: bool = False  # SIGSTOPped: it answers nothing until resumed

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / "broker.log"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    def log_tail(self, lines: int = 15) -> str:
        return log_tail(self.log_path, lines)


@dataclass
class LocalCluster:
    """``async with LocalCluster(Path("actorlog-data"), brokers=3) as cluster:`` runs the cluster."""

    data_dir: Path
    brokers: int = 3
    zookeeper_connect: str | None = None
    config: Mapping[str, str] = field(default_factory=dict)
    base_port: int = 9092
    prometheus: bool = False
    processes: dict[int, BrokerProcess] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir).resolve()
        self._zookeeper: LocalZooKeeper | None = None
        self._admin: ZkCoordinator | None = None
        self._prometheus: LocalPrometheus | None = None
        self.secret = ""

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
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.secret = self._load_or_make_secret()
        ports = _ports(self.base_port, self.brokers)
        for index, port in enumerate(ports):
            broker_id = index + 1
            self.processes[broker_id] = BrokerProcess(broker_id, port, self.data_dir / f"broker-{broker_id}")
        if self.zookeeper_connect is None:
            self._zookeeper = LocalZooKeeper(self.data_dir / "zookeeper")
            await self._zookeeper.start()
            self.zookeeper_connect = self._zookeeper.connect_string
        for broker in self.processes.values():
            self._write_broker_config(broker)  # checked before any broker starts
        self._write_client_properties()
        self._admin = ZkCoordinator(self.zookeeper_connect, session_timeout_ms=10_000)
        await self._admin.start()
        for path in zk_data.PERSISTENT_ZK_PATHS:
            await self._admin.ensure_path(path)
        await asyncio.gather(*(self.start_broker(broker_id) for broker_id in self.processes))
        await self.wait_for_controller()
        if self.prometheus:
            await self._start_prometheus()
        self.write_cluster_file()

    async def stop(self) -> None:
        for broker_id in sorted(self.processes, reverse=True):
            if self.processes[broker_id].running:
                await self.stop_broker(broker_id)
        if self._prometheus is not None:
            await self._prometheus.stop()
            self._prometheus = None
        if self._admin is not None:
            await self._admin.close()
            self._admin = None
        if self._zookeeper is not None:
            await self._zookeeper.stop()
            self._zookeeper = None
        with contextlib.suppress(FileNotFoundError):
            (self.data_dir / "cluster.json").unlink()

    # -------------------------------------------------------------------------------- brokers

    def _load_or_make_secret(self) -> str:
        path = self.data_dir / "client.properties"
        if path.is_file():
            existing = parse_properties(path.read_text()).get("internal.auth.secret")
            if existing:
                return existing
        return secrets.token_urlsafe(24)

    def _write_broker_config(self, broker: BrokerProcess) -> None:
        assert self.zookeeper_connect is not None
        properties = {
            "broker.id": str(broker.broker_id),
            "listeners": f"HTTP://127.0.0.1:{broker.port}",
            "log.dirs": str(broker.directory / "logs"),
            "zookeeper.connect": self.zookeeper_connect,
            "internal.auth.secret": self.secret,
            # Fewer brokers than the project's RF 3 default: new topics use what there is.
            "default.replication.factor": str(min(3, self.brokers)),
            "min.insync.replicas": str(min(2, self.brokers)),
            **self.config,
        }
        settings_from_properties(properties)  # raises ConfigError naming the bad key
        broker.directory.mkdir(parents=True, exist_ok=True)
        text = "".join(f"{key}={value}\n" for key, value in properties.items())
        write_atomically(broker.config_path, text.encode(), mode=0o600)

    def _write_client_properties(self) -> None:
        text = (
            "# Written by `actorlog cluster up`: pass with --command-config, or run from this\n"
            "# directory's parent, where clients find it on their own.\n"
            f"bootstrap.servers={self.bootstrap_servers}\n"
            f"internal.auth.secret={self.secret}\n"
        )
        write_atomically(self.data_dir / "client.properties", text.encode(), mode=0o600)

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
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGCONT)  # a paused broker must run to handle SIGTERM
            process.send_signal(sig)
        broker.paused = False
        try:
            return await asyncio.wait_for(process.wait(), timeout=timeout_s)
        except TimeoutError:
            process.kill()
            return await process.wait()

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

    # ------------------------------------------------------------------------------ observing

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(broker.address for broker in self.processes.values())

    @property
    def admin(self) -> ZkCoordinator:
        assert self._admin is not None
        return self._admin

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
            "client_properties": str(self.data_dir / "client.properties"),
            "prometheus": self.prometheus_url,
            "brokers": [
                {
                    "broker_id": broker.broker_id,
                    "endpoint": broker.url,
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
            self.data_dir / "prometheus", scrape_interval_s=5, rule_files=[rules] if rules.is_file() else []
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
    return once its ``/brokers/ids/N`` znode exists (a watch, no polling); RuntimeError with the
    end of its log if it exits or does not register within ``timeout_s``. ``environment`` adds to
    the launcher's environment; ``module``: what ``python -m`` runs before ``broker start``
    (``ops.verify.faulty_broker`` and its options for a negative control)."""
    registered: asyncio.Future[object] = asyncio.get_running_loop().create_future()

    def on_event(_event: WatchEvent) -> None:
        if not registered.done():
            registered.set_result(None)

    with log_path.open("ab") as output:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", *module, "broker", "start", "--config", str(config_path), *extra_args,
            cwd=ROOT, stdout=output, stderr=output,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(environment or {})},
            start_new_session=True,  # Ctrl-C in a terminal reaches the launcher only
        )  # fmt: skip
    try:
        if await coordinator.exists(zk_data.broker_id_path(broker_id), watch=on_event) is None:
            exited: asyncio.Future[object] = asyncio.ensure_future(process.wait())
            waiting: set[asyncio.Future[object]] = {registered, exited}
            done, _ = await asyncio.wait(waiting, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
            exited.cancel()
            if registered not in done:
                reason = "exited" if process.returncode is not None else "did not register in time"
                raise RuntimeError(
                    f"broker {broker_id} {reason}; the end of {log_path}:\n{log_tail(log_path)}"
                )
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


def _ports(base_port: int, count: int) -> list[int]:
    """``base_port``, ``base_port + 1``... when all are free; otherwise free ports the OS picks."""
    wanted = list(range(base_port, base_port + count)) if base_port else []
    if wanted and all(_free(port) for port in wanted):
        return wanted
    chosen: list[int] = []
    for _ in range(count):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            chosen.append(int(probe.getsockname()[1]))
    return chosen


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
