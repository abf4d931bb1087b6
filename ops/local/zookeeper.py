"""A local standalone ZooKeeper from the installed package, for users, the local cluster and tests.

What it owns: finding Java and the ZooKeeper jars, writing a ``zoo.cfg`` into its own data
directory, starting the server as a child process on a chosen or free loopback port, waiting
until it serves, and stopping it (SIGTERM, then SIGKILL after a grace period). The server's log
(stdout and stderr) goes to ``<data_dir>/zookeeper.log``.

Where the pieces come from:

* ``java``: ``$JAVA_HOME/bin/java`` when JAVA_HOME is set, else ``java`` on the PATH.
* ZooKeeper: ``$ZOOKEEPER_HOME`` (an Apache tarball: every jar in it and in its ``lib/``), else
  Debian's ``/usr/share/java/zookeeper.jar``, whose manifest names its dependency jars. A
  ``slf4j-simple`` binding is added when one is installed next to it, so that the server logs.

Rules kept here:

* A missing piece is a ``ZooKeeperNotInstalledError`` naming it and saying how to get it.
* The server answers only the four-letter words in ``FOUR_LETTER_WORDS`` (``ruok``, ``srvr``,
  ``mntr``; its ``4lw.commands.whitelist``), and its admin server is off: the other words (``dump``,
  ``wchc``, ``cons``, ``conf``, ``envi``...) tell anyone who reaches the port the sessions, the
  watched paths, the clients' addresses and the configuration (docs/operations.md §6).
* A taken port is refused before starting. Readiness is ``ruok`` -> ``imok``, a ``srvr`` that
  reports a version (aiozk's handshake needs exactly that; an early connection would put aiozk
  into a 4 s back-off), and, so that another server that took the port meanwhile never passes for
  ours, a listening socket on the port that is OUR child's (read from ``/proc``; where there is
  no ``/proc`` this last check is skipped).
  Waiting for an external process is the one place a bounded retry loop is acceptable: each
  attempt is an I/O call with its own timeout, and the pause between attempts is spent waiting
  for the child process to exit (so a server that dies is noticed at once), never a sleep.
* ``tick_time_ms`` is a parameter: ZooKeeper negotiates session timeouts into
  [2, 20] x tickTime, so tests use tickTime=500 for sessions of 1-10 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final

__all__ = [
    "FOUR_LETTER_WORDS",
    "LocalZooKeeper",
    "ZooKeeperInstallation",
    "ZooKeeperNotInstalledError",
    "ZooKeeperStartError",
    "find_installation",
]

_DEBIAN_JAVA_DIR = Path("/usr/share/java")
_MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
_PROBE_INTERVAL_S = 0.05  # how long each readiness attempt waits for the process before probing again
_TCP_LISTEN = "0A"  # the st column of /proc/net/tcp for a listening socket

FOUR_LETTER_WORDS: Final = ("ruok", "srvr", "mntr")
"""What the server answers: liveness, readiness (and aiozk's handshake), metrics (module docstring)."""


class ZooKeeperNotInstalledError(RuntimeError):
    """Java or ZooKeeper cannot be found. The message names the missing piece and the fix."""


class ZooKeeperStartError(RuntimeError):
    """The server did not come up (it exited, or did not serve before the deadline)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ZooKeeperInstallation:
    java: Path
    classpath: tuple[Path, ...]


def find_installation(
    environ: Mapping[str, str] | None = None, *, debian_java_dir: Path = _DEBIAN_JAVA_DIR
) -> ZooKeeperInstallation:
    """Locate java and the ZooKeeper jars, or raise ``ZooKeeperNotInstalledError``."""
    env = os.environ if environ is None else environ
    java_home = env.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        java = Path(java_home) / "bin" / "java"
    else:
        found = shutil.which("java", path=env.get("PATH"))
        if found is None:
            raise ZooKeeperNotInstalledError(
                "`java` not found: install a Java runtime (Debian: `apt-get install default-jre-headless`) "
                "or set JAVA_HOME"
            )
        java = Path(found)
    zookeeper_home = env.get("ZOOKEEPER_HOME")
    if zookeeper_home:
        home = Path(zookeeper_home)
        jars = sorted(home.glob("*.jar")) + sorted((home / "lib").glob("*.jar"))
        if not any(jar.name.startswith("zookeeper-") for jar in jars):
            raise ZooKeeperNotInstalledError(
                f"ZooKeeper jar not found in ZOOKEEPER_HOME={home} (nor in its lib/): point it at an "
                "unpacked ZooKeeper release, or unset it and install the `zookeeper` package"
            )
        return ZooKeeperInstallation(java=java, classpath=tuple(jars))
    jar = debian_java_dir / "zookeeper.jar"
    if not jar.is_file():
        raise ZooKeeperNotInstalledError(
            f"ZooKeeper jar not found ({jar}): install the `zookeeper` package "
            "(Debian: `apt-get install zookeeper`) or set ZOOKEEPER_HOME"
        )
    # The Debian jar's manifest Class-Path names its dependencies; add a logging binding.
    binding = debian_java_dir / "slf4j-simple.jar"
    classpath = (jar, binding) if binding.is_file() else (jar,)
    return ZooKeeperInstallation(java=java, classpath=classpath)


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def _port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # SO_REUSEADDR as the server sets it: a restart must not trip over TIME_WAIT.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
        return True


class LocalZooKeeper:
    """One standalone ZooKeeper. ``async with`` / ``with`` it, or call start/stop yourself.

    The port is chosen at the first start (a free one unless given) and kept, so ``stop()`` then
    ``start()`` restarts the same server on the same port and data (sessions survive a quick
    restart: ZooKeeper reloads them from its transaction log).
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        tick_time_ms: int = 2000,
        force_sync: bool = True,
        start_timeout_s: float = 30.0,
        stop_grace_s: float = 5.0,
        installation: ZooKeeperInstallation | None = None,
        extra_config: Mapping[str, str] | None = None,
    ) -> None:
        if tick_time_ms <= 0:
            raise ValueError("tick_time_ms must be positive")
        self.data_dir = Path(data_dir)
        self.host = host
        self.tick_time_ms = tick_time_ms
        self._port = port
        self._force_sync = force_sync
        self._start_timeout_s = start_timeout_s
        self._stop_grace_s = stop_grace_s
        self._installation = installation
        self._extra_config = dict(extra_config or {})
        self._process: subprocess.Popen[bytes] | None = None
        self._async_process: asyncio.subprocess.Process | None = None

    # ------------------------------------------------------------------------------ observing

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the port is chosen when the server first starts")
        return self._port

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.log"

    @property
    def config_path(self) -> Path:
        return self.data_dir / "zoo.cfg"

    @property
    def pid(self) -> int | None:
        if self._process is not None:
            return self._process.pid
        return None if self._async_process is None else self._async_process.pid

    @property
    def is_running(self) -> bool:
        if self._process is not None:
            return self._process.poll() is None
        return self._async_process is not None and self._async_process.returncode is None

    # ------------------------------------------------------------------------------ preparing

    def _prepare(self) -> list[str]:
        installation = self._installation or find_installation()
        if self._port is None:
            self._port = _free_port(self.host)
        elif not _port_is_free(self.host, self._port):
            raise ZooKeeperStartError(
                f"cannot start ZooKeeper on {self.host}:{self._port}: the port is already in use"
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = {
            "tickTime": str(self.tick_time_ms),
            "initLimit": "10",
            "syncLimit": "5",
            "dataDir": str((self.data_dir / "data").resolve()),
            "clientPort": str(self._port),
            "clientPortAddress": self.host,
            "maxClientCnxns": "0",
            "admin.enableServer": "false",
            "4lw.commands.whitelist": ",".join(FOUR_LETTER_WORDS),
            "forceSync": "yes" if self._force_sync else "no",
            **self._extra_config,
        }
        self.config_path.write_text("".join(f"{key}={value}\n" for key, value in config.items()))
        return [
            str(installation.java),
            "-Xms32m",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-Djava.net.preferIPv4Stack=true",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp",
            os.pathsep.join(str(jar) for jar in installation.classpath),
            _MAIN_CLASS,
            str(self.config_path.resolve()),
        ]

    def _start_error(self, reason: str) -> ZooKeeperStartError:
        tail = ""
        with contextlib.suppress(OSError):
            tail = "\n".join(self.log_path.read_text(errors="replace").splitlines()[-20:])
        return ZooKeeperStartError(
            f"ZooKeeper on {self.connect_string} {reason}; log {self.log_path}:\n{tail}"
        )

    # ----------------------------------------------------------------------------- async API

    async def start(self) -> None:
        if self.is_running:
            return
        argv = self._prepare()
        with self.log_path.open("ab") as log:
            # A new session: Ctrl-C in the user's terminal reaches us, and we stop the server.
            self._async_process = await asyncio.create_subprocess_exec(
                *argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        process = self._async_process
        try:
            async with asyncio.timeout(self._start_timeout_s):
                while not await self._serves_async():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(process.wait(), _PROBE_INTERVAL_S)
                    if process.returncode is not None:
                        raise self._start_error(f"exited with status {process.returncode}")
        except TimeoutError:
            await self.stop()
            raise self._start_error(f"did not serve within {self._start_timeout_s} s") from None
        except BaseException:
            await self.stop()
            raise

    async def _serves_async(self) -> bool:
        return (
            await self.four_letter_word(b"ruok") == b"imok"
            and (await self.four_letter_word(b"srvr")).startswith(b"Zookeeper version:")
            and self._is_ours()
        )

    async def four_letter_word(self, word: bytes) -> bytes:
        """Send a four-letter command (``ruok``, ``srvr``, ``mntr``...); b"" if unreachable."""
        try:
            async with asyncio.timeout(1.0):
                reader, writer = await asyncio.open_connection(self.host, self.port)
                try:
                    writer.write(word)
                    return await reader.read()
                finally:
                    writer.close()
                    with contextlib.suppress(OSError):
                        await writer.wait_closed()
        except (OSError, TimeoutError):
            return b""

    async def stop(self) -> None:
        process = self._async_process
        if process is None:
            self.stop_sync()
            return
        self._async_process = None
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), self._stop_grace_s)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()

    async def kill(self) -> None:
        """SIGKILL the server (a crash; fault campaigns): ``start`` brings it back on the same port
        and data, as after a machine restart."""
        process = self._async_process
        self._async_process = None
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()

    def pause(self) -> None:
        """SIGSTOP: the server answers nothing (sessions expire) until ``resume``."""
        pid = self.pid
        if pid is None:
            raise RuntimeError("ZooKeeper is not running")
        os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        pid = self.pid
        if pid is not None:
            os.kill(pid, signal.SIGCONT)

    async def __aenter__(self) -> LocalZooKeeper:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    # ------------------------------------------------------------------------------ sync API

    def start_sync(self) -> None:
        if self.is_running:
            return
        argv = self._prepare()
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        process = self._process
        try:
            deadline = _Deadline(self._start_timeout_s, process)
            while not self._serves_sync():
                if not deadline.wait_for_exit(_PROBE_INTERVAL_S):
                    raise self._start_error(f"did not serve within {self._start_timeout_s} s")
                if process.returncode is not None:
                    raise self._start_error(f"exited with status {process.returncode}")
        except BaseException:
            self.stop_sync()
            raise

    def _serves_sync(self) -> bool:
        return (
            self.four_letter_word_sync(b"ruok") == b"imok"
            and self.four_letter_word_sync(b"srvr").startswith(b"Zookeeper version:")
            and self._is_ours()
        )

    def _is_ours(self) -> bool:
        """The socket listening on our port is our child's: tells our server from another one."""
        pid = self.pid
        return pid is not None and _listener_owned_by(pid, self.port) is not False

    def four_letter_word_sync(self, word: bytes) -> bytes:
        """Send a four-letter command (``ruok``, ``srvr``, ``mntr``...); b"" if unreachable."""
        try:
            with socket.create_connection((self.host, self.port), timeout=1.0) as connection:
                connection.sendall(word)
                chunks = []
                while chunk := connection.recv(4096):
                    chunks.append(chunk)
                return b"".join(chunks)
        except OSError:
            return b""

    def stop_sync(self) -> None:
        process = self._process
        if process is None:
            return
        self._process = None
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(self._stop_grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                process.wait()

    def __enter__(self) -> LocalZooKeeper:
        self.start_sync()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop_sync()


def _listener_owned_by(pid: int, port: int) -> bool | None:
    """Whether a TCP socket listening on ``port`` is one of process ``pid``'s open files; None
    when ``/proc`` cannot tell (no ``/proc``: not Linux)."""
    if not Path("/proc/self/fd").is_dir():
        return None
    proc = Path("/proc") / str(pid)  # gone (the process exited): no socket of its own, False
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in (proc / "net" / table).read_text().splitlines()[1:]:
                # sl local_address rem_address st ... inode: "0100007F:0A8C" is 127.0.0.1:2700.
                fields = line.split()
                if fields[3] == _TCP_LISTEN and int(fields[1].rpartition(":")[2], 16) == port:
                    inodes.add(fields[9])
    sockets: set[str] = set()
    with contextlib.suppress(OSError):
        for fd in (proc / "fd").iterdir():
            with contextlib.suppress(OSError):  # closed meanwhile
                sockets.add(os.readlink(fd))
    return any(f"socket:[{inode}]" in sockets for inode in inodes)


class _Deadline:
    """Bounded waiting on a child process: each pause is a wait for the process to exit."""

    def __init__(self, total_s: float, process: subprocess.Popen[bytes]) -> None:
        self._remaining_s = total_s
        self._process = process

    def wait_for_exit(self, interval_s: float) -> bool:
        """Wait up to ``interval_s`` for the process to exit; False once the total is spent."""
        if self._remaining_s <= 0:
            return False
        pause = min(interval_s, self._remaining_s)
        self._remaining_s -= pause
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(pause)
        return True
