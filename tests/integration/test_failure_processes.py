"""Failure paths on real broker processes and a real ZooKeeper, driven through the command line as
an operator does (``actorlog topics``, ``produce``, ``consume``): the topic config decides unclean
elections when they happen; a full log directory stops the broker without losing an acknowledged
record; a topic deleted while a replica is paused comes back empty. Every wait is a ZooKeeper watch,
a process exit or a reply, bounded by a timeout."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from actors.common.types import TopicPartition
from actors.server import zk_data
from ops.clients.connection import SECRET_ENV
from tests.support.process_cluster import SECRET, ProcessCluster

pytestmark = [pytest.mark.asyncio, pytest.mark.integration, pytest.mark.zk]

ROOT = Path(__file__).resolve().parents[2]
SESSION_MS = 4_000
PROPERTIES = {
    "zookeeper.session.timeout.ms": str(SESSION_MS),
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
}


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: str
    stderr: str


async def actorlog(*arguments: str, stdin: str | None = None, timeout_s: float = 120) -> Completed:
    """One CLI command as a user runs it (the credential from the environment)."""
    environment = dict(os.environ, PYTHONPATH=str(ROOT), **{SECRET_ENV: SECRET})
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ops", *arguments,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(
            process.communicate(stdin.encode() if stdin is not None else None), timeout_s
        )
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return Completed(process.returncode, out.decode(), err.decode())


def bootstrap(cluster: ProcessCluster, broker_id: int) -> str:
    return f"127.0.0.1:{cluster.brokers[broker_id].port}"


async def start_brokers(cluster: ProcessCluster) -> None:
    """Broker 3 starts first, so it is the controller: the tests stop brokers 1 and 2 only."""
    await cluster.start(3)
    await asyncio.gather(cluster.start(1), cluster.start(2))
    assert (await cluster.controller())[0] == 3


async def create_topic(cluster: ProcessCluster, tp: TopicPartition, *options: str) -> None:
    """``topics --create`` with replicas 1 (leader) and 2, then wait until both are in the ISR."""
    created = await actorlog("topics", "--bootstrap-server", bootstrap(cluster, 3), "--create",
                             "--topic", tp.topic, "--replica-assignment", "1:2", *options)  # fmt: skip
    assert created.returncode == 0, created.stderr
    await cluster.wait_for_partition_state(tp, lambda s: s.leader == 1 and set(s.isr) == {1, 2}, timeout_s=30)


@pytest_asyncio.fixture
async def cluster(zk_connect_string: str, tmp_path: Path) -> AsyncIterator[ProcessCluster]:
    async with ProcessCluster(zk_connect_string, tmp_path, dict(PROPERTIES)) as cluster:
        await start_brokers(cluster)
        yield cluster


async def wait_until_deregistered(cluster: ProcessCluster, broker_id: int) -> None:
    await cluster.wait_for_znode(
        zk_data.broker_id_path(broker_id), lambda data: data is None, timeout_s=SESSION_MS / 1000 + 10
    )


async def wait_for_controller_past(cluster: ProcessCluster, bootstrap_server: str, marker: str) -> None:
    """Until the controller has handled every event queued so far: it handles events in order, so
    once a topic created now has a leader, the events before it (a broker's start-up and the
    elections it triggers) are done."""
    created = await actorlog("topics", "--bootstrap-server", bootstrap_server, "--create", "--topic", marker,
                             "--replication-factor", "1")  # fmt: skip
    assert created.returncode == 0, created.stderr
    await cluster.wait_for_partition_state(TopicPartition(marker, 0), lambda s: s.leader >= 0, timeout_s=30)


async def test_unclean_election_follows_the_topic_config_altered_through_the_cli(
    cluster: ProcessCluster,
) -> None:
    """Item 1: the topic is created with unclean.leader.election.enable=true, then altered to false
    with ``topics --alter``. The ISR shrinks to broker 1 (broker 2 killed), records are acknowledged,
    broker 1 is killed and broker 2 comes back: the partition must stay offline (an unclean
    election would lose the acknowledged records). Altering the key back to true elects broker 2."""
    b = bootstrap(cluster, 3)
    tp = TopicPartition("ledger", 0)
    await create_topic(
        cluster, tp, "--config", "unclean.leader.election.enable=true", "--config", "min.insync.replicas=1"
    )
    altered = await actorlog("topics", "--bootstrap-server", b, "--alter", "--topic", tp.topic,
                             "--config", "unclean.leader.election.enable=false")  # fmt: skip
    assert altered.returncode == 0, altered.stderr

    await cluster.kill(2)
    await cluster.wait_for_partition_state(tp, lambda s: s.isr == (1,), timeout_s=SESSION_MS / 1000 + 10)
    produced = await actorlog("produce", "--bootstrap-server", b, "--topic", tp.topic, "--sync",
                              stdin="".join(f"acked-{n}\n" for n in range(5)))  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    await cluster.kill(1)
    await cluster.wait_for_partition_state(tp, lambda s: s.leader == -1, timeout_s=SESSION_MS / 1000 + 10)

    await cluster.start(2)
    await wait_for_controller_past(cluster, b, "after-broker-2-started")
    state, _ = await cluster.zk_partition_state(tp)
    assert (state.leader, state.isr) == (-1, (1,)), "an unclean election happened with the key off"
    described = await actorlog("topics", "--bootstrap-server", b, "--describe", "--topic", tp.topic)
    assert "\tLeader: none\t" in described.stdout, described.stdout

    enabled = await actorlog("topics", "--bootstrap-server", b, "--alter", "--topic", tp.topic,
                             "--config", "unclean.leader.election.enable=true")  # fmt: skip
    assert enabled.returncode == 0, enabled.stderr
    state = await cluster.wait_for_partition_state(tp, lambda s: s.leader == 2, timeout_s=30)
    assert state.isr == (2,)


async def test_a_topic_deleted_while_a_replica_is_paused_comes_back_empty(cluster: ProcessCluster) -> None:
    """Item 5: ``topics --delete`` while broker 2 (a replica) is paused, until its session expires:
    the topic stays marked for deletion (re-creating it is refused) until broker 2 returns and
    deletes its log; created again with broker 2 leading, the topic holds only what is written
    after."""
    b = bootstrap(cluster, 3)
    tp = TopicPartition("events", 0)
    await create_topic(cluster, tp)
    produced = await actorlog("produce", "--bootstrap-server", b, "--topic", tp.topic, "--sync",
                              stdin="".join(f"old-{n}\n" for n in range(10)))  # fmt: skip
    assert produced.returncode == 0, produced.stderr

    cluster.pause(2)
    deletion = asyncio.ensure_future(
        actorlog("topics", "--bootstrap-server", b, "--delete", "--topic", tp.topic)
    )
    marked = zk_data.delete_topic_path(tp.topic)
    await cluster.wait_for_znode(marked, lambda data: data is not None, timeout_s=30)
    # Broker 2 was live when the deletion began (its StopReplica is on its way); now it is dead.
    await wait_until_deregistered(cluster, 2)
    # Brokers 1 and 3 are live: only the pending deletion can refuse it.
    refused = await actorlog("topics", "--bootstrap-server", b, "--create", "--topic", tp.topic,
                             "--replica-assignment", "1:3")  # fmt: skip
    assert refused.returncode == 1
    assert "marked for deletion" in refused.stderr, refused.stderr

    cluster.resume(2)
    await cluster.wait_for_znode(marked, lambda data: data is None, timeout_s=60)
    deleted = await deletion
    assert (deleted.returncode, deleted.stdout) == (0, "Topic events is deleted.\n"), deleted.stderr

    again = await actorlog("topics", "--bootstrap-server", b, "--create", "--topic", tp.topic,
                           "--replica-assignment", "2:1")  # fmt: skip
    assert again.returncode == 0, again.stderr
    await cluster.wait_for_partition_state(tp, lambda s: s.leader == 2 and set(s.isr) == {1, 2}, timeout_s=30)
    produced = await actorlog(
        "produce", "--bootstrap-server", b, "--topic", tp.topic, "--sync", stdin="new-0\n"
    )
    assert produced.returncode == 0, produced.stderr
    consumed = await actorlog("consume", "--bootstrap-server", b, "--topic", tp.topic, "--from-beginning",
                              "--timeout-ms", "3000")  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["new-0"]


@pytest.fixture
def small_log_dir(tmp_path: Path) -> Iterator[Path]:
    """Broker 1's log dir on a 6 MiB tmpfs (needs the right to mount, as root in a container)."""
    directory = tmp_path / "broker-1" / "logs"
    directory.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem for the log dir: {mounted.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], capture_output=True, check=False)


async def test_a_full_log_dir_halts_the_broker_and_loses_no_acknowledged_record(
    zk_connect_string: str, tmp_path: Path, small_log_dir: Path
) -> None:
    """Item 4: the leader's log dir fills up (ENOSPC) under acks=all writes. The failing produce is
    answered KAFKA_STORAGE_ERROR, the broker exits non-zero with a clear line, leadership moves to
    the follower, the producer's retries land there, and every acknowledged record is read back
    once, in order."""
    async with ProcessCluster(zk_connect_string, tmp_path, dict(PROPERTIES)) as cluster:
        await start_brokers(cluster)
        assert cluster.brokers[1].log_dir == small_log_dir
        b = bootstrap(cluster, 3)
        tp = TopicPartition("full", 0)
        await create_topic(
            cluster, tp, "--config", "min.insync.replicas=1", "--config", "segment.bytes=1048576"
        )

        lines = [f"{n:05d}-" + "x" * 20_000 for n in range(400)]  # 8 MB: more than the 6 MiB disk
        produced = await actorlog("produce", "--bootstrap-server", b, "--topic", tp.topic, "--sync",
                                  stdin="".join(f"{line}\n" for line in lines), timeout_s=180)  # fmt: skip
        assert produced.returncode == 0, produced.stderr

        process = cluster.brokers[1].process
        assert process is not None
        code = await asyncio.wait_for(process.wait(), timeout=30)
        assert code != 0
        output = cluster.output(1)
        assert "I/O error in log dir" in output, output
        assert "halting the broker" in output, output
        state, _ = await cluster.zk_partition_state(tp)
        assert state.leader == 2

        consumed = await actorlog("consume", "--bootstrap-server", b, "--topic", tp.topic, "--from-beginning",
                                  "--max-messages", str(len(lines)), "--timeout-ms", "10000")  # fmt: skip
        assert consumed.returncode == 0, consumed.stderr
        assert consumed.stdout.splitlines() == lines
