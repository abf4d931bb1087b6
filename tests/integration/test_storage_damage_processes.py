"""A follower whose files were damaged while it was stopped comes back and ends up holding exactly
what was acknowledged — on real broker processes and a real ZooKeeper, once per kind of damage.

This module owns that end-to-end promise of log loading (runtime/storage/log_loader.py, docs/log.md
§7): whatever a stopped replica's directory looks like (a stray copy of a segment, garbage in a
checkpoint, a log start offset beyond the log, a torn tail, a batch of the active segment corrupted
after a clean stop, a missing middle segment, missing or corrupt indexes), the broker starts,
repairs without losing or duplicating anything it keeps, says so at WARN naming the partition (or
the damaged log dir file), and re-fetches from the leader whatever it dropped, so that every
replica's files end as the same contiguous list of acknowledged records.

Scenario: brokers 1, 2, 3 (broker 1 started first: the controller and the leader), one partition on
[1, 2, 3] with small segments and min.insync.replicas=2; acks=all writes; broker 3 stopped (SIGTERM,
or SIGKILL for a torn tail), its files damaged, more acks=all writes; broker 3 restarted until the
ISR holds it again; every broker stopped and its segment files read (ops/verify/replica_logs.py).
Every wait is a ZooKeeper watch, a process exit or a reply, bounded by a timeout.
"""

from __future__ import annotations

import shutil
import signal
import struct
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from actors.common.errors import ErrorCode
from actors.common.protocol import ProducePartitionData, ProduceRequest, ProduceResponse
from actors.common.types import TopicPartition
from actors.server import zk_data
from ops.verify.replica_logs import read_replica_log
from runtime.storage.record_builder import SimpleRecord, build_batch
from tests.support.process_cluster import ProcessCluster

pytestmark = [pytest.mark.asyncio, pytest.mark.integration, pytest.mark.zk]

TP = TopicPartition("ledger", 0)
PARTITION = f"{TP.topic}-{TP.partition}"
LEADER = 1
DAMAGED = 3
SESSION_MS = 4_000
LAG_MS = 2_000
PROPERTIES = {
    "zookeeper.session.timeout.ms": str(SESSION_MS),
    "replica.lag.time.max.ms": str(LAG_MS),
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    # The last broker stopped leads with no one to hand over to: its controlled shutdown retries.
    "controlled.shutdown.retry.backoff.ms": "200",
}
TOPIC_CONFIG = {"segment.bytes": "4096", "min.insync.replicas": "2"}
RECORDS_PER_BATCH = 40  # about 1,000 bytes a batch: some 4 batches, 160 records, a segment
RECORDS_BEFORE = 2_000  # some 12 segments on the follower when it stops
RECORDS_WHILE_DOWN = 500
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
_BATCH_PREFIX = struct.Struct(">qi")  # base offset, batch length (the bytes after these 12)


# ------------------------------------------------------------------------------------ damage


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def log_files(partition_dir: Path) -> list[Path]:
    return sorted(partition_dir.glob("*.log"))


def batch_boundaries(data: bytes) -> set[int]:
    """Byte positions at which a batch starts or the complete batches end."""
    boundaries = {0}
    position = 0
    while len(data) - position >= _BATCH_PREFIX.size:
        _base_offset, length = _BATCH_PREFIX.unpack_from(data, position)
        position += _BATCH_PREFIX.size + length
        boundaries.add(position)
    return boundaries


def stray_copy(partition_dir: Path, _log_dir: Path) -> list[str]:
    """A copy of the first segment named after an offset inside it, without indexes."""
    first, following = log_files(partition_dir)[:2]
    assert first.name == segment_name(0, ".log")
    assert int(following.stem) > 5, "offset 5 must lie inside the first segment"
    copy = segment_name(5, ".log")
    shutil.copyfile(first, partition_dir / copy)
    return [copy]


def garbage_leader_epoch_checkpoint(partition_dir: Path, _log_dir: Path) -> list[str]:
    checkpoint = partition_dir / "leader-epoch-checkpoint"
    assert checkpoint.exists()
    checkpoint.write_bytes(b"not a checkpoint\n\x00\xff")
    return []


def log_start_beyond_end(_partition_dir: Path, log_dir: Path) -> list[str]:
    """A well-formed entry that contradicts the log: its start far beyond its end."""
    (log_dir / "log-start-offset-checkpoint").write_text(f"0\n1\n{TP.topic} {TP.partition} 1000000\n")
    return []


def garbage_recovery_point_checkpoint(_partition_dir: Path, log_dir: Path) -> list[str]:
    """Garbage recovery points and no clean-shutdown marker: nothing is known to be flushed."""
    (log_dir / "recovery-point-offset-checkpoint").write_bytes(b"not a checkpoint\n\x00\xff")
    (log_dir / CLEAN_SHUTDOWN_MARKER).unlink()
    return []


def garbage_replication_offset_checkpoint(_partition_dir: Path, log_dir: Path) -> list[str]:
    (log_dir / "replication-offset-checkpoint").write_bytes(b"not a checkpoint\n\x00\xff")
    return []


def torn_active_segment(partition_dir: Path, log_dir: Path) -> list[str]:
    """After a SIGKILL: the last segment holding batches cut in the middle of a batch."""
    assert not (log_dir / CLEAN_SHUTDOWN_MARKER).exists()
    segment = [path for path in log_files(partition_dir) if path.stat().st_size > 0][-1]
    data = segment.read_bytes()
    cut = len(data) // 2
    if cut in batch_boundaries(data):
        cut -= 1
    assert 0 < cut < len(data)
    assert cut not in batch_boundaries(data)
    with segment.open("r+b") as file:
        file.truncate(cut)
    return []


def corrupt_active_segment(partition_dir: Path, log_dir: Path) -> list[str]:
    """After a clean stop: one byte inside the first batch of the active segment flipped (the last
    byte of its records, under its CRC). A clean start used to serve it as it was."""
    assert (log_dir / CLEAN_SHUTDOWN_MARKER).exists()
    segment = log_files(partition_dir)[-1]
    data = bytearray(segment.read_bytes())
    assert data, "the active segment must hold a batch"
    _base_offset, length = _BATCH_PREFIX.unpack_from(data, 0)
    data[_BATCH_PREFIX.size + length - 1] ^= 0xFF
    segment.write_bytes(bytes(data))
    return []


def deleted_middle_segment(partition_dir: Path, _log_dir: Path) -> list[str]:
    """A middle segment's three files removed: a gap, with complete segments after it."""
    logs = log_files(partition_dir)
    assert len(logs) >= 3, [path.name for path in logs]
    middle = len(logs) // 2
    base = int(logs[middle].stem)
    for suffix in (".log", ".index", ".timeindex"):
        (partition_dir / segment_name(base, suffix)).unlink(missing_ok=True)
    return [path.name for path in logs[middle + 1 :]]


def missing_indexes(partition_dir: Path, _log_dir: Path) -> list[str]:
    indexes = [*partition_dir.glob("*.index"), *partition_dir.glob("*.timeindex")]
    assert indexes
    for path in indexes:
        path.unlink()
    return []


def corrupt_index(partition_dir: Path, _log_dir: Path) -> list[str]:
    """The first segment's offset index overwritten with bytes that are no whole number of entries."""
    garbage = bytes(range(251)) * 4
    assert len(garbage) % 8 != 0
    (partition_dir / segment_name(0, ".index")).write_bytes(garbage)
    return []


@dataclass(frozen=True)
class Damage:
    name: str
    apply: Callable[[Path, Path], list[str]]
    """(partition dir, log dir) -> names of ``.log`` files expected to be moved aside (``.stray``)."""
    stop_signal: signal.Signals = signal.SIGTERM
    warned_about: str = PARTITION
    """What a WARN line of the restarted broker must name: the partition, or for damage to a log dir
    file that concerns no partition in particular, that file."""


DAMAGES = (
    Damage("stray-copy", stray_copy),
    Damage("garbage-leader-epoch-checkpoint", garbage_leader_epoch_checkpoint),
    Damage("log-start-beyond-end", log_start_beyond_end),
    Damage("garbage-recovery-point-checkpoint", garbage_recovery_point_checkpoint),
    Damage(
        "garbage-replication-offset-checkpoint",
        garbage_replication_offset_checkpoint,
        warned_about="replication-offset-checkpoint",
    ),
    Damage("torn-active-segment", torn_active_segment, stop_signal=signal.SIGKILL),
    Damage("corrupt-active-segment", corrupt_active_segment),
    Damage("deleted-middle-segment", deleted_middle_segment),
    Damage("missing-indexes", missing_indexes),
    Damage("corrupt-index", corrupt_index),
)


# ----------------------------------------------------------------------------------- cluster


@pytest_asyncio.fixture
async def cluster(zk_connect_string: str, tmp_path: Path) -> AsyncIterator[ProcessCluster]:
    """Broker 1 first, so it is the controller: stopping broker 3 never moves the controller."""
    async with ProcessCluster(zk_connect_string, tmp_path, dict(PROPERTIES)) as cluster:
        await cluster.start(LEADER)
        await cluster.start(2)
        await cluster.start(DAMAGED)
        assert (await cluster.controller())[0] == LEADER
        await cluster.create_topic(TP.topic, {TP.partition: [LEADER, 2, DAMAGED]}, TOPIC_CONFIG)
        await cluster.wait_for_partition_state(
            TP, lambda s: s.leader == LEADER and set(s.isr) == {1, 2, 3}, timeout_s=30
        )
        yield cluster


async def produce(cluster: ProcessCluster, values: list[str], acknowledged: list[str]) -> None:
    """acks=all batches to the leader, one at a time; each must be acknowledged at the next offset."""
    for start in range(0, len(values), RECORDS_PER_BATCH):
        chunk = values[start : start + RECORDS_PER_BATCH]
        request = ProduceRequest(
            acks=-1,
            timeout_ms=10_000,
            partitions=(
                ProducePartitionData(
                    topic=TP.topic,
                    partition=TP.partition,
                    records=build_batch([SimpleRecord(value.encode()) for value in chunk]),
                ),
            ),
        )
        response = await cluster.client.ask(cluster.brokers[LEADER].ref, request, timeout_ms=20_000)
        assert isinstance(response, ProduceResponse)
        (result,) = response.partitions
        assert result.error_code is ErrorCode.NONE, result
        assert result.base_offset == len(acknowledged), result
        acknowledged.extend(chunk)


def output_since(cluster: ProcessCluster, broker_id: int, position: int) -> str:
    with cluster.brokers[broker_id].output_path.open("rb") as output:
        output.seek(position)
        return output.read().decode(errors="replace")


@pytest.mark.parametrize("damage", [pytest.param(d, id=d.name) for d in DAMAGES])
async def test_a_damaged_follower_restarts_and_every_replica_holds_what_was_acknowledged(
    cluster: ProcessCluster, damage: Damage
) -> None:
    acknowledged: list[str] = []
    await produce(cluster, [f"before-{n:05d}" for n in range(RECORDS_BEFORE)], acknowledged)

    # Broker 3 stops (a clean shutdown, or a kill for a torn tail) and leaves the ISR.
    follower = cluster.brokers[DAMAGED]
    code = await cluster.kill(DAMAGED, damage.stop_signal)
    if damage.stop_signal is signal.SIGTERM:
        assert code == 0, cluster.output(DAMAGED)
        assert (follower.log_dir / CLEAN_SHUTDOWN_MARKER).exists()
    await cluster.wait_for_partition_state(
        TP, lambda s: DAMAGED not in s.isr, timeout_s=(SESSION_MS + 1.5 * LAG_MS) / 1000 + 10
    )
    # After a kill the ISR may shrink (replica lag) before the session expires: the restart below
    # must not find the old registration, which would count as the new one's.
    await cluster.wait_for_znode(
        zk_data.broker_id_path(DAMAGED), lambda data: data is None, timeout_s=SESSION_MS / 1000 + 10
    )

    partition_dir = follower.log_dir / PARTITION
    assert len(log_files(partition_dir)) >= 3, "segment.bytes must give the follower several segments"
    moved_aside = damage.apply(partition_dir, follower.log_dir)

    await produce(cluster, [f"while-down-{n:05d}" for n in range(RECORDS_WHILE_DOWN)], acknowledged)

    # Broker 3 starts on its damaged files and catches up until the ISR holds it again.
    restarted_at = follower.output_path.stat().st_size
    await cluster.start(DAMAGED, timeout_s=30)
    await cluster.wait_for_partition_state(TP, lambda s: set(s.isr) == {1, 2, 3}, timeout_s=30)
    assert follower.process is not None
    assert follower.process.returncode is None

    # Stopped one at a time (the controller last), each cleanly; then their files are read.
    for broker_id in (DAMAGED, 2, LEADER):
        code = await cluster.kill(broker_id, signal.SIGTERM)
        assert code == 0, f"broker {broker_id} exited {code}:\n{cluster.output(broker_id)}"
    expected = list(enumerate(acknowledged))
    for broker_id in (LEADER, 2, DAMAGED):
        replica = read_replica_log(cluster.brokers[broker_id].log_dir, TP)
        missing = sorted(set(expected) - set(replica))
        assert replica == expected, (
            f"broker {broker_id}: {len(replica)} records, {len(expected)} acknowledged; "
            f"missing {missing[:3]}{'...' if len(missing) > 3 else ''}; "
            f"offsets {replica[0][0] if replica else None}..{replica[-1][0] if replica else None}"
        )
    for name in moved_aside:
        assert (partition_dir / f"{name}.stray").exists(), sorted(p.name for p in partition_dir.iterdir())

    # The repair was said at WARN (console format: "HH:MM:SS WARNING logger: message").
    restart_output = output_since(cluster, DAMAGED, restarted_at)
    warnings = [
        line for line in restart_output.splitlines() if " WARN" in line and damage.warned_about in line
    ]
    assert warnings, f"no WARN line naming {damage.warned_about} after the restart:\n{restart_output[-3000:]}"
