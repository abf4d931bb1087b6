"""The cluster a fault campaign runs against: real broker processes, a real ZooKeeper, real disks,
and a fault-injecting proxy on every link a fault can cut.

Layout (one loopback address per broker, so a proxy knows who connects by the source address)::

    broker N   listens on 127.0.0.(10+N):<private port>, binds its outgoing connections to
               127.0.0.(10+N) (ACTORLOG_SOURCE_ADDRESS), advertises 127.0.0.(10+N):<proxy port>
    proxy N    127.0.0.(10+N):<proxy port> → the broker: every broker and client reaches broker N
               through it (cut by source: another broker 127.0.0.(10+M), or clients 127.0.0.1)
    zk proxy N 127.0.0.1:<port> → ZooKeeper: broker N's ``zookeeper.connect`` (cut alone)

With ``tls`` the brokers listen and advertise ``HTTPS://`` (certificates from
``ops/local/tls_certs.py`` in ``DIR/tls/``, each naming its broker's 127.0.0.(10+N) beside
127.0.0.1, so host names are verified through the proxies) and ``DIR/client.properties`` says
``security.protocol=SSL`` with the truststore. A proxy forwards bytes, so TLS passes through it
unchanged, end to end between the client and the broker: a cut stalls handshakes and records
alike, a heal aborts the TLS connections it touched and they are made again.

Rules kept here:

* A broker process that exits when no fault asked for it (a halt on a full disk, a failed
  registration) is started again after ``restart_backoff_s``, as Kubernetes or ``cluster up``'s
  supervisor would; one stopped by a fault is started again when the fault heals.
* ``heal_all`` undoes every fault: proxies forward, paused processes run, ZooKeeper serves, the
  ballast that filled a log dir is gone, every broker is started.
* Log dirs are on their own small filesystems (tmpfs) when this process may mount them, so a
  disk can be filled; otherwise the DISK_FULL fault is unavailable (``disk_faults``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from actors.common.types import TopicPartition
from actors.server import zk_data
from ops.local.cluster import launch_broker, log_tail, write_atomically
from ops.local.tls_certs import LocalCertificates
from ops.local.zk_waits import read_partition_state
from ops.local.zookeeper import LocalZooKeeper
from ops.tls import SECURITY_PROTOCOL, SSL_KEYSTORE_LOCATION, SSL_TRUSTSTORE_LOCATION, client_context
from ops.verify.proxy import FaultProxy
from runtime.clock import LoopClock, wait_ms
from runtime.coordination.zk import ZkCoordinator

__all__ = ["CampaignBroker", "CampaignCluster"]

_log = logging.getLogger("actorlog.verify")
CLIENT_HOST = "127.0.0.1"
# Each log dir's filesystem: large enough for a long campaign, small enough to fill at once.
_LOG_DIR_BYTES = 512 * 1024 * 1024
_REGISTRATION_TIMEOUT_S = 60.0


def broker_host(broker_id: int) -> str:
    return str(ipaddress.IPv4Address("127.0.0.10") + broker_id)


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


@dataclass
class CampaignBroker:
    broker_id: int
    directory: Path
    port: int
    proxy: FaultProxy
    zookeeper_proxy: FaultProxy
    process: asyncio.subprocess.Process | None = None
    # A fault holds it down (killed, or its disk is full): the supervisor leaves it alone.
    held_down: bool = False
    paused: bool = False
    restarts: int = 0
    supervisor: asyncio.Task[None] | None = None
    # Set while no fault holds it down; one start at a time.
    released: asyncio.Event = field(default_factory=asyncio.Event)
    starting: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def host(self) -> str:
        return broker_host(self.broker_id)

    @property
    def advertised(self) -> str:
        return f"{self.host}:{self.proxy.port}"

    @property
    def log_dir(self) -> Path:
        return self.directory / "logs"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None


class CampaignCluster:
    """``async with CampaignCluster(directory, brokers=3, properties={...}) as cluster:``."""

    def __init__(
        self,
        directory: Path,
        *,
        brokers: int = 3,
        properties: dict[str, str] | None = None,
        restart_backoff_s: float = 1.0,
        small_disks: bool = True,
        protocol_faults: tuple[str, ...] = (),
        tls: bool = False,
    ) -> None:
        self.directory = Path(directory).resolve()
        self.tls = tls
        self.certificates = LocalCertificates(self.directory / "tls")
        self.broker_ids = tuple(range(1, brokers + 1))
        self.properties = dict(properties or {})
        self.restart_backoff_s = restart_backoff_s
        self.secret = secrets.token_urlsafe(24)
        self.zookeeper = LocalZooKeeper(self.directory / "zookeeper")
        self.brokers: dict[int, CampaignBroker] = {}
        self._admin: ZkCoordinator | None = None
        self._want_small_disks = small_disks
        self.disk_faults = False
        self._mounted: list[Path] = []
        self._closing = False
        self._clock = LoopClock()
        # A negative control's brokers carry a deliberate bug (ops/verify/faulty_broker.py).
        self._module: tuple[str, ...] = ("ops",)
        if protocol_faults:
            flags = [part for name in protocol_faults for part in ("--protocol-fault", name)]
            self._module = ("ops.verify.faulty_broker", *flags)

    # ------------------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> CampaignCluster:
        try:
            await self.start()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        await self.zookeeper.start()
        self._admin = ZkCoordinator(self.zookeeper.connect_string, session_timeout_ms=30_000)
        await self._admin.start()
        for path in zk_data.PERSISTENT_ZK_PATHS:
            await self._admin.ensure_path(path)
        for broker_id in self.broker_ids:
            host = broker_host(broker_id)
            directory = self.directory / f"broker-{broker_id}"
            directory.mkdir(parents=True, exist_ok=True)
            port = _free_port(host)
            proxy = FaultProxy((host, port), host=host, name=f"broker-{broker_id}")
            zookeeper_proxy = FaultProxy(
                (self.zookeeper.host, self.zookeeper.port), host=CLIENT_HOST, name=f"zookeeper-{broker_id}"
            )
            await proxy.start()
            await zookeeper_proxy.start()
            self.brokers[broker_id] = CampaignBroker(broker_id, directory, port, proxy, zookeeper_proxy)
            self.brokers[broker_id].released.set()
        if self.tls:
            self.certificates.ensure(
                list(self.broker_ids),
                hosts={broker_id: [broker_host(broker_id)] for broker_id in self.broker_ids},
            )
        self._write_client_properties()
        self.disk_faults = self._want_small_disks and all(
            self._mount_small_disk(broker.log_dir) for broker in self.brokers.values()
        )
        for broker in self.brokers.values():
            self._write_config(broker)
        await asyncio.gather(*(self.start_broker(broker_id) for broker_id in self.broker_ids))
        for broker in self.brokers.values():
            broker.supervisor = asyncio.ensure_future(self._supervise(broker))

    async def close(self) -> None:
        await self._stop_supervisors()
        for broker in self.brokers.values():
            await self._signal_and_wait(broker, signal.SIGKILL)
            await broker.proxy.close()
            await broker.zookeeper_proxy.close()
        if self._admin is not None:
            with contextlib.suppress(Exception):
                await self._admin.close()
            self._admin = None
        self.zookeeper.resume()
        await self.zookeeper.stop()
        self._unmount_small_disks()

    def _unmount_small_disks(self) -> None:
        # Lazy: a file still open somewhere must not keep the mount (and the memory) behind.
        for mount in self._mounted:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)
        self._mounted.clear()

    async def _stop_supervisors(self) -> None:
        self._closing = True
        for broker in self.brokers.values():
            if broker.supervisor is not None:
                broker.supervisor.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await broker.supervisor
                broker.supervisor = None

    def _mount_small_disk(self, path: Path) -> bool:
        path.mkdir(parents=True, exist_ok=True)
        if shutil.which("mount") is None:
            return False
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={_LOG_DIR_BYTES}", "tmpfs", str(path)],
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            return False
        self._mounted.append(path)
        return True

    def _write_config(self, broker: CampaignBroker) -> None:
        listener = "HTTPS" if self.tls else "HTTP"
        tls = (
            {
                SSL_KEYSTORE_LOCATION: str(self.certificates.keystore_path(broker.broker_id)),
                SSL_TRUSTSTORE_LOCATION: str(self.certificates.ca_path),
            }
            if self.tls
            else {}
        )
        properties = {
            "broker.id": str(broker.broker_id),
            "listeners": f"{listener}://{broker.host}:{broker.port}",
            "advertised.listeners": f"{listener}://{broker.advertised}",
            **tls,
            "log.dirs": str(broker.log_dir),
            "zookeeper.connect": f"{CLIENT_HOST}:{broker.zookeeper_proxy.port}",
            "internal.auth.secret": self.secret,
            **self.properties,
        }
        text = "".join(f"{key}={value}\n" for key, value in properties.items())
        write_atomically(broker.directory / "server.properties", text.encode(), mode=0o600)

    # -------------------------------------------------------------------------------- clients

    @property
    def client_config(self) -> dict[str, str]:
        """The connection keys every client of the campaign takes beside the broker identity's
        secret. PLAINTEXT is said, not left out: a client told nothing would look for the
        working directory's ``actorlog-data/client.properties``."""
        if not self.tls:
            return {SECURITY_PROTOCOL: "PLAINTEXT"}
        return {SECURITY_PROTOCOL: "SSL", SSL_TRUSTSTORE_LOCATION: str(self.certificates.ca_path)}

    @property
    def client_properties_path(self) -> Path:
        """``client_config`` as a file, for the clients that read one (Admin's ``command_config``)."""
        return self.directory / "client.properties"

    def _write_client_properties(self) -> None:
        text = "".join(f"{key}={value}\n" for key, value in self.client_config.items())
        write_atomically(self.client_properties_path, text.encode())

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        """What verifies the brokers for a plain HTTP client (aiohttp); None without TLS."""
        return client_context(self.client_config) if self.tls else None

    def base_url(self, broker_id: int) -> str:
        """Where clients reach broker ``broker_id``: its proxy, at http:// or https://."""
        return f"{'https' if self.tls else 'http'}://{self.brokers[broker_id].advertised}"

    # -------------------------------------------------------------------------------- brokers

    @property
    def admin(self) -> ZkCoordinator:
        assert self._admin is not None
        return self._admin

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(broker.advertised for broker in self.brokers.values())

    async def start_broker(self, broker_id: int) -> None:
        """Start it unless it runs; returns once it registered (RuntimeError if it exited)."""
        broker = self.brokers[broker_id]
        async with broker.starting:
            if broker.running:
                return
            broker.process = await launch_broker(
                broker_id,
                broker.directory / "server.properties",
                broker.directory / "broker.log",
                self.admin,
                timeout_s=_REGISTRATION_TIMEOUT_S,
                extra_args=("--log-format", "console"),
                environment={"ACTORLOG_SOURCE_ADDRESS": broker.host},
                module=self._module,
            )

    async def kill_broker(self, broker_id: int) -> None:
        """SIGKILL, held down until ``release_broker``."""
        broker = self.brokers[broker_id]
        broker.held_down = True
        broker.released.clear()
        await self._signal_and_wait(broker, signal.SIGKILL)

    async def release_broker(self, broker_id: int) -> None:
        """End a hold: start the broker again (if it is not running)."""
        broker = self.brokers[broker_id]
        broker.held_down = False
        broker.released.set()
        try:
            await self.start_broker(broker_id)
        except RuntimeError as error:
            # It exited at start (its disk may still be full): the supervisor tries again.
            _log.warning("broker %d did not start again: %s", broker_id, str(error).splitlines()[0])

    def pause_broker(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        if broker.running and broker.process is not None:
            os.kill(broker.process.pid, signal.SIGSTOP)
            broker.paused = True

    def resume_broker(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        if broker.paused and broker.running and broker.process is not None:
            os.kill(broker.process.pid, signal.SIGCONT)
        broker.paused = False

    async def _signal_and_wait(self, broker: CampaignBroker, sig: signal.Signals) -> None:
        process = broker.process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGCONT)
            process.send_signal(sig)
        broker.paused = False
        await process.wait()

    async def _supervise(self, broker: CampaignBroker) -> None:
        """Start again a broker that exited on its own (module rules)."""
        while not self._closing:
            process = broker.process
            if process is not None and process.returncode is None:
                code = await process.wait()
                if not broker.held_down and not self._closing:
                    _log.warning(
                        "broker %d exited (code %d); starting it again: %s",
                        broker.broker_id,
                        code,
                        log_tail(broker.directory / "broker.log", 3).replace("\n", " | "),
                    )
            if broker.held_down:
                await broker.released.wait()  # the fault's end starts it (release_broker)
                continue
            await wait_ms(self._clock, int(self.restart_backoff_s * 1000))
            if not self._restart_wanted(broker):  # a fault may have taken it meanwhile
                continue
            broker.restarts += 1
            try:
                await self.start_broker(broker.broker_id)
            except RuntimeError as error:
                _log.warning("broker %d did not start: %s", broker.broker_id, str(error).splitlines()[0])

    def _restart_wanted(self, broker: CampaignBroker) -> bool:
        return not (broker.held_down or broker.running or self._closing)

    # ---------------------------------------------------------------------------- the network

    def cut_between(self, first: int, second: int) -> None:
        """``first`` and ``second`` cannot reach each other (both ways)."""
        self._set_link(first, second, cut=True)

    def heal_between(self, first: int, second: int) -> None:
        """Undo ``cut_between``."""
        self._set_link(first, second, cut=False)

    def isolate(self, broker_id: int) -> None:
        """Nobody reaches ``broker_id`` and it reaches nobody (ZooKeeper stays reachable)."""
        self._set_isolated(broker_id, cut=True)

    def heal_isolation(self, broker_id: int) -> None:
        """Undo ``isolate``."""
        self._set_isolated(broker_id, cut=False)

    def _set_link(self, first: int, second: int, *, cut: bool) -> None:
        for target, source in ((second, first), (first, second)):
            self._set_source(self.brokers[target].proxy, broker_host(source), cut=cut)

    def _set_isolated(self, broker_id: int, *, cut: bool) -> None:
        own = self.brokers[broker_id].proxy
        if cut:
            own.cut_all()  # clients and brokers alike
        else:
            own.heal_all()
        for other in self.brokers.values():
            if other.broker_id != broker_id:
                self._set_source(other.proxy, broker_host(broker_id), cut=cut)

    @staticmethod
    def _set_source(proxy: FaultProxy, source: str, *, cut: bool) -> None:
        if cut:
            proxy.cut(source)
        else:
            proxy.heal(source)

    def cut_zookeeper(self, broker_id: int) -> None:
        self.brokers[broker_id].zookeeper_proxy.cut_all()

    def heal_zookeeper(self, broker_id: int) -> None:
        self.brokers[broker_id].zookeeper_proxy.heal_all()

    def heal_network(self) -> None:
        for broker in self.brokers.values():
            broker.proxy.heal_all()
            broker.zookeeper_proxy.heal_all()

    # ------------------------------------------------------------------------------- the disks

    def fill_disk(self, broker_id: int) -> None:
        """Take every free byte of the broker's log dir with a ballast file."""
        path = self.brokers[broker_id].log_dir / ".ballast"
        free = shutil.disk_usage(path.parent).free
        with path.open("wb") as ballast, contextlib.suppress(OSError):
            os.posix_fallocate(ballast.fileno(), 0, max(free, 1))

    def free_disk(self, broker_id: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.brokers[broker_id].log_dir / ".ballast").unlink()

    # ------------------------------------------------------------------------------- observing

    async def stop_brokers(self) -> None:
        """SIGTERM every broker, one at a time (Kafka's controlled shutdown), so their files are
        complete for reading; the supervisors stand down first."""
        await self._stop_supervisors()
        for broker_id in sorted(self.brokers, reverse=True):
            broker = self.brokers[broker_id]
            process = broker.process
            if process is None or process.returncode is not None:
                continue
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGCONT)
                process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), timeout=60)
            except TimeoutError:
                await self._signal_and_wait(broker, signal.SIGKILL)

    async def replica_high_watermarks(self, topic: str, partitions: int) -> dict[tuple[int, int], int]:
        """(broker, partition) -> the replica's high watermark, from each running broker's
        ``kafka_log_log_highwatermark`` gauge."""
        found: dict[tuple[int, int], int] = {}
        timeout = aiohttp.ClientTimeout(total=10)
        connector = aiohttp.TCPConnector(ssl=self.ssl_context or True)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            for broker in self.brokers.values():
                try:
                    async with session.get(f"{self.base_url(broker.broker_id)}/metrics") as answer:
                        text = await answer.text()
                except (aiohttp.ClientError, TimeoutError):
                    continue
                for family in text_string_to_metric_families(text):
                    if family.name != "kafka_log_log_highwatermark":
                        continue
                    for sample in family.samples:
                        if (
                            sample.labels.get("topic") == topic
                            and int(sample.labels["partition"]) < partitions
                        ):
                            found[(broker.broker_id, int(sample.labels["partition"]))] = int(sample.value)
        return found

    async def controller_id(self) -> int | None:
        try:
            data, _ = await self.admin.get(zk_data.CONTROLLER_PATH)
        except Exception:  # noqa: BLE001 - no controller (or no answer from ZooKeeper) right now
            return None
        return zk_data.decode_controller(data).broker_id

    async def leader_of(self, tp: TopicPartition) -> int | None:
        try:
            state, _ = await read_partition_state(self.admin, tp)
        except Exception:  # noqa: BLE001 - no state (or no answer from ZooKeeper) right now
            return None
        return state.leader if state.leader >= 0 else None
