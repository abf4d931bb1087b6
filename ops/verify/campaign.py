"""A fault campaign: a live workload against real processes, a seeded fault schedule, then the
final read and the checker.

Phases (each logged with its start time, so a run can be read afterwards):

1. The cluster starts (``cluster.py``; with ``tls`` over HTTPS) and the topic is created:
   ``partitions`` partitions, RF 3, ``min.insync.replicas`` and ``unclean.leader.election.enable``
   as the options say.
2. Writers and readers start (``workload.py``); the first ``warmup_s`` seconds have no fault (the
   fault-free throughput the report compares with).
3. The fault window: the schedule (``faults.py``) runs; each fault heals after its duration. A
   fault holds its targets (brokers, ZooKeeper) while it lasts, and one whose target is held waits,
   so every heal undoes exactly its own fault. A fault the harness fails to start or undo is a
   ``fault error`` in the result, not an injected fault; step 4 repairs what it left.
4. Healing: everything heals; every partition must have its whole replica set in the ISR again
   within ``heal_bound_s`` (recorded, and a violation if not).
5. Writers stop and their outstanding sends complete; the final read takes every partition from
   the beginning to its high watermark; every replica's log is read from its files (after the
   brokers stopped, so nothing moves under the reader).
6. The checker reads the history back from disk (the same path ``actorlog verify check`` takes).

The history is kept at ``<directory>/history.jsonl`` whatever the outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from actors.common.types import TopicPartition
from ops.clients.admin import Admin
from ops.local.zk_waits import wait_for_partition_state
from ops.verify.checker import CheckResult, check_history
from ops.verify.cluster import CampaignCluster
from ops.verify.faults import ROLE_FAULTS, ZOOKEEPER_FAULTS, Fault, FaultKind, describe_fault, plan_faults
from ops.verify.history import HistoryWriter, read_history
from ops.verify.replica_logs import read_replica_log
from ops.verify.workload import JsonApiWriter, ProducerWriter, Reader, WorkloadStats, final_read, history_key
from runtime.clock import LoopClock, wait_ms

__all__ = ["CampaignOptions", "CampaignResult", "run_campaign"]

_log = logging.getLogger("actorlog.verify")
TOPIC = "verify"
SESSION_TIMEOUT_MS = 6_000


@dataclass(frozen=True)
class CampaignOptions:
    seed: int
    faults: int = 20
    duration_s: float = 60.0
    warmup_s: float = 5.0
    brokers: int = 3
    partitions: int = 3
    kinds: tuple[FaultKind, ...] = tuple(FaultKind)
    acks: str = "all"
    min_insync_replicas: int = 2
    unclean_leader_election: bool = False
    producer_writers: int = 2
    json_api_writers: int = 1
    readers: int = 1
    in_flight: int = 100
    heal_bound_s: float = 120.0
    # Negative controls only: brokers built with these deliberate bugs (ProtocolFault values).
    protocol_faults: tuple[str, ...] = ()
    # HTTPS listeners; every client verifies the brokers' certificates and host names.
    tls: bool = False


@dataclass
class CampaignResult:
    options: CampaignOptions
    history_path: Path
    check: CheckResult
    faults: Counter[str] = field(default_factory=Counter)
    skipped: list[str] = field(default_factory=list)
    acknowledged: int = 0
    fault_free_rate: float = 0.0  # acknowledgements per second before the first fault
    faulty_rate: float = 0.0  # during the fault window
    isr_restored_s: float | None = None  # after healing; None if not within the bound
    broker_restarts: int = 0
    # Faults the harness failed to start or undo (a ZooKeeper that would not start again in time):
    # reported, never counted as injected; healing everything at the end repairs what they left.
    fault_errors: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return self.check.valid and self.isr_restored_s is not None


async def run_campaign(
    options: CampaignOptions, directory: Path, *, echo: Callable[[str], None] | None = None
) -> CampaignResult:
    history_path = _prepare(directory)
    say = echo or (lambda line: None)
    clock = LoopClock()
    loop = asyncio.get_running_loop()
    properties = {
        "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
        "replica.lag.time.max.ms": "5000",
        "default.replication.factor": str(min(3, options.brokers)),
        "min.insync.replicas": str(options.min_insync_replicas),
        "unclean.leader.election.enable": str(options.unclean_leader_election).lower(),
        "controlled.shutdown.retry.backoff.ms": "500",
    }
    result_faults: Counter[str] = Counter()
    skipped: list[str] = []
    fault_errors: list[str] = []
    stats = WorkloadStats()
    with HistoryWriter(history_path) as history:
        async with CampaignCluster(
            directory / "cluster",
            brokers=options.brokers,
            properties=properties,
            protocol_faults=options.protocol_faults,
            tls=options.tls,
        ) as cluster:
            kinds = tuple(k for k in options.kinds if k is not FaultKind.DISK_FULL or cluster.disk_faults)
            if len(kinds) < len(options.kinds):
                skipped.append("disk-full: this process may not mount a small filesystem for the log dirs")
            schedule = plan_faults(
                options.seed,
                count=options.faults,
                window_s=options.duration_s,
                brokers=cluster.broker_ids,
                partitions=options.partitions,
                kinds=kinds,
                session_timeout_s=SESSION_TIMEOUT_MS / 1000,
            )
            async with Admin(
                cluster.bootstrap_servers,
                secret=cluster.secret,
                command_config=cluster.client_properties_path,
            ) as admin:
                await admin.create_topic(
                    TOPIC,
                    num_partitions=options.partitions,
                    replication_factor=min(3, options.brokers),
                    configs={
                        "min.insync.replicas": str(options.min_insync_replicas),
                        "unclean.leader.election.enable": str(options.unclean_leader_election).lower(),
                    },
                )
            say(
                f"cluster up: {options.brokers} brokers over {'HTTPS' if options.tls else 'HTTP'}, "
                f"topic {TOPIC} ({options.partitions} partitions)"
            )
            processes = itertools.count()
            writers, readers = _clients(history, cluster, options, stats, processes)
            tasks = [asyncio.ensure_future(client.run()) for client in [*writers, *readers]]
            try:
                await wait_ms(clock, int(options.warmup_s * 1000))
                window_started = loop.time()
                acked_at_window = stats.acknowledged
                fault_free_rate = acked_at_window / options.warmup_s if options.warmup_s > 0 else 0.0

                targets = _Targets()

                async def inject(fault: Fault) -> None:
                    await wait_ms(clock, max(0, int((window_started + fault.at_s - loop.time()) * 1000)))
                    brokers = await _resolve(cluster, fault)
                    async with contextlib.AsyncExitStack() as held:
                        await held.enter_async_context(targets.held(_resources(fault, brokers)))
                        try:
                            what = await _apply(cluster, fault, brokers)
                        except Exception as error:  # noqa: BLE001 - the harness failed, not the system
                            fault_errors.append(f"starting {describe_fault(fault)}: {error}")
                            return
                        if fault.kind is FaultKind.KILL_LEADERS_IN_TURN:
                            successor = await _kill_successor(cluster, fault, brokers[0], targets, held)
                            if successor is not None:
                                brokers = (*brokers, successor)
                                what += f", then its successor, broker {successor}"
                        result_faults[fault.kind.value] += 1
                        history.fault({"kind": fault.kind.value, "what": what})
                        say(f"{loop.time() - window_started:7.1f} s  {what}")
                        await wait_ms(clock, int(fault.duration_s * 1000))
                        try:
                            await _heal(cluster, fault, brokers)
                        except Exception as error:  # noqa: BLE001 - healing everything at the end repairs it
                            fault_errors.append(f"healing {what}: {error}")
                        history.heal({"kind": fault.kind.value, "what": what})

                await asyncio.gather(*(inject(fault) for fault in schedule))
                window_s = loop.time() - window_started
                faulty_rate = (stats.acknowledged - acked_at_window) / window_s if window_s > 0 else 0.0

                await _heal_everything(cluster, fault_errors)
                history.heal({"kind": "all", "what": "everything healed"})
                isr_restored_s = await _wait_isr_full(cluster, options, timeout_s=options.heal_bound_s)
                say(
                    "ISR full again "
                    + (
                        f"{isr_restored_s:.1f} s after healing"
                        if isr_restored_s is not None
                        else "NOT within the bound"
                    )
                )
                for writer in writers:
                    writer.stop()
                for reader in readers:
                    reader.stop()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=90)
            finally:
                # Interrupted (an error, Ctrl-C, SIGTERM): the clients stop while the cluster is
                # still there to close against.
                await _cancel(tasks)
            await final_read(
                history,
                next(processes),
                bootstrap_servers=cluster.bootstrap_servers,
                secret=cluster.secret,
                topic=TOPIC,
                partitions=options.partitions,
                timeout_s=60,
                connection=cluster.client_config,
            )
            high_watermarks = await cluster.replica_high_watermarks(TOPIC, options.partitions)
            restarts = sum(b.restarts for b in cluster.brokers.values())
            log_dirs = {b.broker_id: b.log_dir for b in cluster.brokers.values()}
            await cluster.stop_brokers()
            for broker_id, log_dir in log_dirs.items():
                for partition in range(options.partitions):
                    tp = TopicPartition(TOPIC, partition)
                    history.replica_log(
                        broker_id,
                        history_key(tp),
                        read_replica_log(log_dir, tp),
                        high_watermark=high_watermarks.get((broker_id, partition)),
                    )
    check = check_history(read_history(history_path))
    return CampaignResult(
        options=options,
        history_path=history_path,
        check=check,
        faults=result_faults,
        skipped=skipped,
        acknowledged=stats.acknowledged,
        fault_free_rate=fault_free_rate,
        faulty_rate=faulty_rate,
        isr_restored_s=isr_restored_s,
        broker_restarts=restarts,
        fault_errors=fault_errors,
    )


def _clients(
    history: HistoryWriter,
    cluster: CampaignCluster,
    options: CampaignOptions,
    stats: WorkloadStats,
    processes: itertools.count[int],
) -> tuple[list[ProducerWriter | JsonApiWriter], list[Reader]]:
    """The writers (idempotent producers, JSON API writers) and readers the options ask for."""
    servers, secret, partitions = cluster.bootstrap_servers, cluster.secret, options.partitions
    writers: list[ProducerWriter | JsonApiWriter] = [
        ProducerWriter(
            history,
            next(processes),
            f"p{n}",
            bootstrap_servers=servers,
            secret=secret,
            topic=TOPIC,
            partitions=partitions,
            acks=options.acks,
            in_flight=options.in_flight,
            stats=stats,
            connection=cluster.client_config,
        )
        for n in range(options.producer_writers)
    ]
    base_urls = [cluster.base_url(broker_id) for broker_id in cluster.broker_ids]
    writers += [
        JsonApiWriter(
            history,
            next(processes),
            f"j{n}",
            base_urls=base_urls,
            secret=secret,
            topic=TOPIC,
            partitions=partitions,
            acks=options.acks,
            batch=5,
            stats=stats,
            ssl_context=cluster.ssl_context,
        )
        for n in range(options.json_api_writers)
    ]
    readers = [
        Reader(
            history,
            processes,
            bootstrap_servers=servers,
            secret=secret,
            topic=TOPIC,
            partitions=partitions,
            connection=cluster.client_config,
        )
        for _ in range(options.readers)
    ]
    return writers, readers


async def _cancel(tasks: Sequence[asyncio.Future[None]]) -> None:
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=15)


def _prepare(directory: Path) -> Path:
    """The run's directory (made if missing) and its history's path."""
    directory.mkdir(parents=True, exist_ok=True)
    return directory / "history.jsonl"


_KILLS = frozenset(
    {
        FaultKind.KILL_LEADER,
        FaultKind.KILL_LEADERS_IN_TURN,
        FaultKind.KILL_CONTROLLER,
        FaultKind.KILL_BROKER,
        FaultKind.KILL_TWO,
    }
)


class _Targets:
    """One fault at a time per target (a broker, ZooKeeper): a fault whose target another fault
    holds starts when that one healed, so every heal undoes exactly its own fault."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}

    async def try_hold(self, name: str, timeout_s: float) -> asyncio.Lock | None:
        """The target's lock, acquired within ``timeout_s`` (the caller releases it), or None."""
        lock = self._locks.setdefault(name, asyncio.Lock())
        try:
            await asyncio.wait_for(lock.acquire(), timeout_s)
        except TimeoutError:
            return None
        return lock

    @contextlib.asynccontextmanager
    async def held(self, names: Sequence[str]) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            for name in sorted(set(names)):  # one order for everyone: no deadlock
                await stack.enter_async_context(self._locks.setdefault(name, asyncio.Lock()))
            yield


def _resources(fault: Fault, brokers: tuple[int, ...]) -> list[str]:
    if fault.kind in ZOOKEEPER_FAULTS:
        return ["zookeeper"]
    return [f"broker-{broker_id}" for broker_id in brokers]


async def _resolve(cluster: CampaignCluster, fault: Fault) -> tuple[int, ...]:
    """The brokers ``fault`` targets: its own, or the partition's leader or the controller now
    (looked up again every half second for up to the fault's duration: ZooKeeper may be paused),
    else the broker the schedule named for it."""
    if fault.kind not in ROLE_FAULTS:
        return fault.brokers
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(fault.duration_s, 1.0)
    while True:
        if fault.kind is FaultKind.KILL_LEADER:
            found = await cluster.leader_of(TopicPartition(TOPIC, fault.partition))
        else:
            found = await cluster.controller_id()
        if found is not None:
            return (found,)
        if loop.time() >= deadline:
            return fault.brokers
        await wait_ms(LoopClock(), 500)


async def _kill_successor(
    cluster: CampaignCluster,
    fault: Fault,
    first: int,
    targets: _Targets,
    held: contextlib.AsyncExitStack,
) -> int | None:
    """For KILL_LEADERS_IN_TURN: once ZooKeeper names a leader other than ``first`` (the controller
    elects one when ``first``'s session expires), SIGKILL it at once, before the last replica has
    fetched from it. None when no successor came within three session timeouts, or another fault
    holds it."""
    tp = TopicPartition(TOPIC, fault.partition)
    try:
        state = await wait_for_partition_state(
            cluster.admin,
            tp,
            lambda s: s.leader >= 0 and s.leader != first,
            timeout_s=3 * SESSION_TIMEOUT_MS / 1000,
        )
    except Exception:  # noqa: BLE001 - no successor in time (or ZooKeeper unreachable): one kill only
        return None
    lock = await targets.try_hold(f"broker-{state.leader}", timeout_s=0.1)
    if lock is None:
        return None
    held.callback(lock.release)
    await cluster.kill_broker(state.leader)
    return state.leader


async def _apply(cluster: CampaignCluster, fault: Fault, brokers: tuple[int, ...]) -> str:
    """Start ``fault`` against ``brokers``; the line that says what it did."""
    await _set_fault(cluster, fault.kind, brokers, on=True)
    if fault.kind in ROLE_FAULTS:
        return f"{describe_fault(fault)}: broker {brokers[0]}"
    return describe_fault(fault)


async def _heal(cluster: CampaignCluster, fault: Fault, brokers: tuple[int, ...]) -> None:
    """Undo ``fault`` (and only it: ``_Targets`` keeps faults on one target apart)."""
    await _set_fault(cluster, fault.kind, brokers, on=False)


async def _set_fault(
    cluster: CampaignCluster, kind: FaultKind, brokers: tuple[int, ...], *, on: bool
) -> None:
    """Start (``on``) or undo one fault of ``kind``."""
    first = brokers[0] if brokers else -1
    if kind in _KILLS:
        change = cluster.kill_broker if on else cluster.release_broker
        await asyncio.gather(*(change(broker_id) for broker_id in brokers))
    elif kind in (FaultKind.PAUSE_SHORT, FaultKind.PAUSE_LONG):
        (cluster.pause_broker if on else cluster.resume_broker)(first)
    elif kind is FaultKind.ZOOKEEPER_PAUSE:
        (cluster.zookeeper.pause if on else cluster.zookeeper.resume)()
    elif kind is FaultKind.ZOOKEEPER_KILL:
        await (cluster.zookeeper.kill() if on else cluster.zookeeper.start())
    elif kind is FaultKind.PARTITION:
        (cluster.cut_between if on else cluster.heal_between)(*brokers)
    elif kind is FaultKind.ISOLATE:
        (cluster.isolate if on else cluster.heal_isolation)(first)
    elif kind is FaultKind.ZOOKEEPER_CUT:
        (cluster.cut_zookeeper if on else cluster.heal_zookeeper)(first)
    elif kind is FaultKind.DISK_FULL:
        (cluster.fill_disk if on else cluster.free_disk)(first)


async def _heal_everything(cluster: CampaignCluster, fault_errors: list[str]) -> None:
    """Undo every fault, whatever is left: links forward, processes run, ZooKeeper serves (started
    again if a fault left it down), disks have room, every broker is started."""
    cluster.heal_network()
    cluster.zookeeper.resume()
    for attempt in range(3):
        try:
            await cluster.zookeeper.start()  # nothing to do when it runs
            break
        except Exception as error:  # noqa: BLE001 - try again; the last failure is reported
            if attempt == 2:
                fault_errors.append(f"starting ZooKeeper again at the end: {error}")
    for broker_id in cluster.broker_ids:
        cluster.resume_broker(broker_id)
        if cluster.disk_faults:
            cluster.free_disk(broker_id)
        await cluster.release_broker(broker_id)


async def _wait_isr_full(
    cluster: CampaignCluster, options: CampaignOptions, *, timeout_s: float
) -> float | None:
    """Seconds until every partition has a leader and its whole replica set in the ISR (ZooKeeper
    watches on each partition state); None if not within ``timeout_s``."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    replicas = min(3, options.brokers)
    for partition in range(options.partitions):
        tp = TopicPartition(TOPIC, partition)
        while True:
            remaining = timeout_s - (loop.time() - started)
            if remaining <= 0:
                return None
            try:
                # At most 5 s per watch: a watch set just before ZooKeeper restarted may never fire.
                await wait_for_partition_state(
                    cluster.admin,
                    tp,
                    lambda s: s.leader >= 0 and len(s.isr) >= replicas,
                    timeout_s=min(remaining, 5.0),
                )
                break
            except TimeoutError:
                continue
            except Exception as error:  # noqa: BLE001 - ZooKeeper may still be coming back: look again
                _log.info("waiting for the ISR of %s: %s", tp, error)
                await wait_ms(LoopClock(), 500)
    return loop.time() - started
