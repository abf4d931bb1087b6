"""``launch_broker`` (ops/local/cluster.py) never leaves a broker process behind: one that does not
register in time is stopped before the error is raised, since the broker runs in its own session
and would otherwise outlive its launcher."""

from __future__ import annotations

import signal
import socket
import subprocess
from pathlib import Path

import pytest

from actors.server import zk_data
from ops.local.cluster import launch_broker
from runtime.coordination.zk import ZkCoordinator
from tests.support.process_cluster import ProcessCluster

pytestmark = [pytest.mark.asyncio, pytest.mark.integration, pytest.mark.zk]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _running(pattern: str) -> bool:
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True, check=False).returncode == 0


async def test_a_broker_that_does_not_register_in_time_is_stopped(
    zk_connect_string: str, tmp_path: Path
) -> None:
    coordinator = ZkCoordinator(zk_connect_string, session_timeout_ms=10_000)
    await coordinator.start()
    try:
        for path in zk_data.PERSISTENT_ZK_PATHS:
            await coordinator.ensure_path(path)
        config = tmp_path / "never-registers.properties"
        # Its ZooKeeper is a closed port: it keeps trying to connect and never registers.
        config.write_text(
            "broker.id=7\n"
            f"listeners=HTTP://127.0.0.1:{_closed_port()}\n"
            f"log.dirs={tmp_path / 'logs'}\n"
            f"zookeeper.connect=127.0.0.1:{_closed_port()}\n"
            "zookeeper.connection.timeout.ms=600000\n"
            "internal.auth.secret=a-secret-of-enough-characters\n"
        )
        with pytest.raises(RuntimeError, match="did not register in time"):
            await launch_broker(7, config, tmp_path / "broker.log", coordinator, timeout_s=3)
        assert not _running(str(config)), "the broker process outlived its failed launch"
    finally:
        await coordinator.close()


async def test_a_relaunch_after_a_kill_waits_for_the_new_incarnation(
    zk_connect_string: str, tmp_path: Path
) -> None:
    """A SIGKILLed broker's registration lives on until its session expires (6 s here): the
    relaunch must not take that znode for the new process's registration, or its caller talks to
    a listener that is not up yet (met on a clean clone by test_readiness_processes)."""
    async with ProcessCluster(zk_connect_string, tmp_path) as cluster:
        await cluster.start(1)
        first = await cluster.admin.exists(zk_data.broker_id_path(1))
        assert first is not None
        await cluster.kill(1, signal.SIGKILL)
        await cluster.start(1)
        second = await cluster.admin.exists(zk_data.broker_id_path(1))
        assert second is not None
        assert second.czxid != first.czxid
        # The listener answers at once: registration comes after it in the broker's start.
        with socket.create_connection(("127.0.0.1", cluster.brokers[1].port), timeout=5):
            pass
