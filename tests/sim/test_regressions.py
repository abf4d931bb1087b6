"""Named regressions found by the simulation: each is the shortest schedule a failing seed shrank
to, replayed with that seed's randomness, and must pass now. Each failed before its fix.

A schedule is data (``ops.sim.plan`` actions), so it keeps its meaning when the plan generator
changes; if a fix changes timings so much that a schedule no longer reaches the situation it was
written for, its event log shows it (the ``reaches`` check) and the schedule must be rewritten.
"""

from __future__ import annotations

import pytest

from ops.sim.plan import (
    Action,
    ActorCrash,
    BrokerFault,
    ControlledShutdown,
    CreateTopic,
    DeleteTopic,
    DiskFaultAction,
    FaultKind,
    LinkFault,
    PreferredElection,
    Produce,
    Reassign,
    ZooKeeperOutage,
)
from ops.sim.runner import SimOptions, run_seed
from runtime.storage.fs import DiskFault

pytestmark = pytest.mark.sim

REGRESSIONS: dict[str, tuple[int, list[Action], str]] = {
    # A reassignment moved topic1-1 off broker 1 while broker 1 was down: its StopReplica(delete)
    # was never sent and its log stayed. topic1 was deleted (1 no longer a replica, so not asked)
    # and created again with a replica on 1, whose new partition started from the stale log
    # (DeletedTopicStaysDeleted). The controller now deletes such replicas when their broker
    # starts, and a broker deletes a stale log before a new partition starts on it.
    "a-replica-removed-while-down-leaves-no-stale-log": (
        179,
        [
            CreateTopic(600, 1, 2, 2),
            CreateTopic(700, 2, 3, 2),
            Produce(888, 2, 0, 14),
            DeleteTopic(1011, 2),
            Produce(1284, 2, 0, 2),
            DeleteTopic(1347, 0),
            ZooKeeperOutage(1885, 4537),
            Reassign(2205, 1, 1, (2, 3, 1), None),
            Produce(3761, 1, 0, 16),
            Produce(4367, 1, 1, 10),
            Produce(4450, 2, 1, 18),
            LinkFault(5546, FaultKind.ONE_WAY_PARTITION, 3, 2, 7722, 0.0),
            BrokerFault(5681, FaultKind.KILL, 1, 10503),
            CreateTopic(6502, 1, 2, 3),
            Produce(20762, 0, 1, 17),
            DeleteTopic(20979, 1),
            Produce(21123, 1, 0, 15),
            Produce(45936, 1, 1, 2),
            CreateTopic(46421, 1, 3, 2),
            PreferredElection(46911, 2),
        ],
        "reassign topic1 partition 1",
    ),
    # Topic deletion completed while broker 3 (isolated, still registered) never got its
    # StopReplica(delete); the topic created again served the deleted topic's records from broker 3.
    "deletion-waits-for-every-replica": (
        12,
        [
            CreateTopic(500, 0, 1, 2),
            CreateTopic(600, 1, 3, 3),
            CreateTopic(700, 2, 1, 3),
            Produce(2096, 2, 0, 13),
            BrokerFault(7220, FaultKind.ISOLATE, 3, 11376),
            DeleteTopic(10743, 2),
            CreateTopic(10970, 2, 2, 3),
            Produce(12692, 0, 0, 1),
        ],
        "delete topic2",
    ),
    # Broker 1 lost power and started again 292 ms later, before its old ZooKeeper session (and
    # registration) expired. The controller still counted the old process live and sent the new
    # one LeaderAndIsr for epoch 1 with the old broker epoch; the new process, not yet registered,
    # accepted it and led epoch 1 again with the log its power loss had emptied.
    "restarted-broker-refuses-requests-for-its-previous-process": (
        17,
        [
            CreateTopic(600, 1, 2, 3),
            ControlledShutdown(2041, 2, 4559),
            Produce(4602, 1, 0, 7),
            BrokerFault(8365, FaultKind.POWER_LOSS, 1, 292),
        ],
        "power-loss broker 1",
    ),
    # Leader 1 re-admitted broker 2 to the ISR (ZooKeeper: [1, 2, 3]); then its partition actor
    # crashed, and the supervisor restarted it from the last LeaderAndIsr (ISR [1, 3]): it
    # stopped waiting for broker 2 that ZooKeeper still listed, so a later clean election of 2
    # could lose acknowledged records.
    "restarted-leader-restores-its-isr-from-zookeeper": (
        1,
        [
            CreateTopic(500, 0, 1, 3),
            Produce(1000, 0, 0, 5),
            ControlledShutdown(2000, 2, 1000),
            Produce(3500, 0, 0, 5),
            ActorCrash(6000, 1, "partition"),
            Produce(6100, 0, 1, 5),
            Produce(9000, 0, 0, 1),
        ],
        "crashing partition/topic0-0 on broker 1",
    ),
    # Broker 3 came back while topic0 waited to be deleted; deleting its log hit an injected write
    # error after the log was dropped from the log manager but before its directory was gone. The
    # broker answered KAFKA_STORAGE_ERROR and went on; the controller's retry found no log and
    # succeeded, and topic0 created again loaded the old directory: its records were served again.
    "a-failed-log-deletion-halts-the-broker": (
        1668,
        [
            CreateTopic(500, 0, 2, 3),
            CreateTopic(600, 1, 3, 2),
            CreateTopic(700, 2, 1, 2),
            BrokerFault(1397, FaultKind.ISOLATE, 2, 10681),
            Produce(2039, 2, 1, 17),
            Produce(2598, 1, 1, 5),
            BrokerFault(2688, FaultKind.KILL, 1, 6875),
            BrokerFault(3090, FaultKind.CONTROLLER_CUT, 3, 684),
            Produce(3787, 0, 0, 20),
            Produce(4697, 1, 0, 15),
            Produce(4855, 0, 0, 8),
            ControlledShutdown(6014, 3, 920),
            Produce(33113, 1, 0, 8),
            BrokerFault(33369, FaultKind.KILL, 3, 2754),
            DeleteTopic(33646, 0),
            DeleteTopic(35741, 0),
            DeleteTopic(35889, 1),
            Produce(36275, 2, 0, 9),
            DiskFaultAction(36402, 3, DiskFault.WRITE_ERROR, 7483),
            PreferredElection(40835, 2),
            Produce(41117, 1, 0, 3),
            CreateTopic(44428, 0, 3, 2),
            LinkFault(44890, FaultKind.SLOW_LINK, 3, 2, 10763, 1000.0),
        ],
        "disk-fault write-error on broker 3",
    ),
    # Broker 3's ZooKeeper session expired while the controller, broker 1, was stalled; it
    # registered again with its log intact. Broker 1 then lost power. The next controller, seeing
    # broker 3 registered after topic2-0's last change, took it out of the ISR [1, 3] as if it had
    # restarted, which left only the powerless broker 1, which came back to lead with an empty log.
    "a-re-registered-broker-stays-in-the-isr-when-no-trusted-member-is-left": (
        4625,
        [
            CreateTopic(700, 2, 3, 3),
            ControlledShutdown(1897, 2, 7580),
            Produce(8571, 2, 0, 5),
            BrokerFault(8751, FaultKind.STALL, 1, 11805),
            BrokerFault(8848, FaultKind.SESSION_EXPIRY, 3, 0),
            BrokerFault(9632, FaultKind.POWER_LOSS, 1, 8617),
        ],
        "power-loss broker 1",
    ),
    # The controller, broker 2, stalled; broker 1's session expired and it registered again, its
    # process and log intact (leader of topic2-1); broker 3 lost power while its previous process's
    # session still stood. The next controller, broker 1, took every member registered after the
    # partition state's last write for a restart: broker 1 left the ISR, and broker 3 came back to
    # lead with an empty log. Only a registration saying unclean_start (an unclean start no
    # controller has seen yet) makes a suspect now.
    "an-intact-re-registered-broker-stays-in-the-isr-beside-a-power-lost-one": (
        5859,
        [
            CreateTopic(700, 2, 2, 3),
            Produce(7642, 2, 1, 17),
            BrokerFault(7706, FaultKind.STALL, 2, 9946),
            BrokerFault(11274, FaultKind.SESSION_EXPIRY, 1, 0),
            BrokerFault(11606, FaultKind.POWER_LOSS, 3, 2421),
            BrokerFault(13756, FaultKind.STALL, 2, 3087),
        ],
        "power-loss broker 3",
    ),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regression_schedule_passes(name: str) -> None:
    seed, plan, reaches = REGRESSIONS[name]
    result = run_seed(seed, SimOptions(), plan)
    assert any(reaches in line for line in result.events.lines), f"{name} no longer reaches {reaches!r}"
    assert result.passed, f"{name}: {result.violation}\n{result.events.tail(40)}"


# Seeds kept whole, with the plan their seed generates (not shrunk: the schedule is long and the
# generator is what reaches the situation).
WHOLE_SEEDS: dict[str, int] = {
    # Broker 3 led topic1-0 at epoch 5 from its log end offset and appended nothing; after an
    # unclean election it followed broker 1, which never had epoch 5. Truncating to its own log end
    # offset changed nothing and kept epoch 5, so each OffsetsForLeaderEpoch round asked for epoch 5
    # again: it never fetched and never rejoined the ISR (Liveness; KAFKA-10706).
    "a-no-op-truncation-drops-an-epoch-the-replica-led-without-appending": 1632,
    # The same mistake as the 5859 schedule above, reached by other paths: a broker that only
    # re-registered (session expiry) was taken out of the ISR for a restart (lost records).
    "a-session-expiry-is-not-a-restart-5109": 5109,
    "a-session-expiry-is-not-a-restart-5495": 5495,
    "a-session-expiry-is-not-a-restart-5698": 5698,
    # The controller, broker 2, lost power; its cancelled process still ran its shutdown path and
    # wrote the clean-shutdown marker on the crashed disk, so the next start skipped recovery and
    # registered without unclean_start, and the next controller kept it leading with an empty log.
    # A dead process's writes now fail (DiskFault.PROCESS_DEAD in the simulation's kill).
    "a-power-lost-process-writes-no-clean-shutdown-marker": 1889,
    # The controller, broker 2, lost power and came back unseen (no controller ran), then stopped
    # cleanly and started again: that start looked clean, and the next controller kept it leading
    # without the records its power loss had cost. A clean stop now hands the unseen unclean start on.
    "a-clean-restart-keeps-an-unseen-unclean-start": 4831,
    # The checker's mistake, not the cluster's: topic0 was re-created while its deletion waited for
    # a dead broker. The deletion completed after the create request left and before the controller
    # created the new generation, whose epoch-0 leader the checker saw before the answer came, so it
    # still held the deleted generation's epoch-0 leader (SingleLeaderPerEpoch). The checker now
    # starts a topic's epochs again when its znode is created again.
    "a-re-created-topic-starts-its-epochs-again": 4621,
    # Broker 1 was declared dead while the controller's request to it was unanswered; when it came
    # back its channel was new, but the old request's late answer (STALE_BROKER_EPOCH) popped the
    # new channel's first request, the LeaderAndIsr that made it a follower of topic0-0: it never
    # fetched and the ISR was never whole again (Liveness). Answers now match their channel.
    "an-answer-to-a-dropped-channel-pops-nothing": 5465,
}


@pytest.mark.parametrize("name", sorted(WHOLE_SEEDS))
def test_whole_seed_passes(name: str) -> None:
    result = run_seed(WHOLE_SEEDS[name], SimOptions())
    assert result.passed, f"{name}: {result.violation}\n{result.events.tail(40)}"
