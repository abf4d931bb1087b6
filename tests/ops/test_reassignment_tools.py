"""``actorlog reassign-partitions`` and ``actorlog leader-election`` (``ops/cli/``) in one process:
the tools' code runs as typed, with the real Admin client over an in-process cluster's simulated
network (``tests/support/sim_admin.py``) on virtual time, checking Kafka's output lines, the
throttles set and cleared, and the cluster's state after each step. Option errors and plan files
are checked without a cluster."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import pytest_asyncio

from actors.common.types import TopicPartition
from ops.cli import leader_election, reassign_partitions
from ops.cli.reassign_partitions import (
    Move,
    ReassignCommandError,
    format_reassignment_json,
    parse_reassignment,
    throttled_replicas,
)
from ops.clients.admin import Admin, ElectionType
from runtime.transport.sim import LinkBehaviour
from tests.support.cluster import InProcessCluster, started
from tests.support.sim_admin import sim_admin

T = TypeVar("T")
TOPIC = "moving"
SESSION_MS = 4_000
CONFIG: dict[str, Any] = {
    "replica_lag_time_max_ms": 2_000,
    "replica_fetch_wait_max_ms": 200,
    "replica_fetch_backoff_ms": 200,
    "min_insync_replicas": 1,
    "auto_leader_rebalance_enable": False,
}


# ------------------------------------------------------------------------- without a cluster


def test_plans_are_read_and_written_as_kafka_writes_them() -> None:
    text = '{"version":1,"partitions":[{"topic":"t","partition":1,"replicas":[3,4]},' + (
        '{"topic":"t","partition":0,"replicas":[4,1],"log_dirs":["any","any"]}]}'
    )
    plan = parse_reassignment(text)
    assert plan == {TopicPartition("t", 1): [3, 4], TopicPartition("t", 0): [4, 1]}
    assert format_reassignment_json(plan) == (
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[4,1],"log_dirs":["any","any"]},'
        '{"topic":"t","partition":1,"replicas":[3,4],"log_dirs":["any","any"]}]}'
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"version":1,"partitions":[]}', "Partition reassignment list cannot be empty"),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[]}]}',
            "Partition replica list cannot be empty",
        ),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}',
            "Partition reassignment contains duplicate topic partitions: t-0",
        ),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1,2,1]}]}',
            "Partition replica lists may not contain duplicate entries: t-0 contains multiple entries for 1",
        ),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/d"]}]}', "log_dirs must be"),
        ('{"partitions":[{"topic":"t","replicas":[1]}]}', 'each partition needs "topic"'),
        ("[1, 2", "not valid JSON"),
    ],
)
def test_bad_plans_are_refused_with_kafkas_words(text: str, message: str) -> None:
    with pytest.raises(ReassignCommandError, match=message.replace("(", r"\(")):
        parse_reassignment(text)


def test_throttled_replicas_name_the_sources_for_leaders_and_the_new_replicas_for_followers() -> None:
    moves = {
        TopicPartition("t", 0): Move(frozenset({1, 2}), frozenset({4})),
        TopicPartition("t", 1): Move(frozenset({2, 3}), frozenset({4, 1})),
        TopicPartition("u", 0): Move(frozenset({3}), frozenset()),
    }
    assert throttled_replicas(moves) == {"t": ("0:1,0:2,1:2,1:3", "0:4,1:1,1:4"), "u": ("0:3", "")}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bootstrap-server", "h:1", "--execute"], '"--reassignment-json-file" for --execute'),
        (["--bootstrap-server", "h:1", "--generate", "--broker-list", "1"], '"--topics-to-move-json-file"'),
        (["--bootstrap-server", "h:1", "--list", "--throttle", "5"], 'Option "--throttle" can\'t be used'),
        (
            ["--bootstrap-server", "h:1", "--verify", "--execute", "--reassignment-json-file", "f"],
            "not allowed",
        ),
    ],
)
def test_reassign_option_errors_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        reassign_partitions.main(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--bootstrap-server", "h:1", "--all-topic-partitions"],
            "Missing required option(s): --election-type",
        ),
        (["--bootstrap-server", "h:1", "--election-type", "preferred"], "One and only one of the following"),
        (["--bootstrap-server", "h:1", "--election-type", "preferred", "--topic", "t"], "--partition"),
        (
            [
                "--bootstrap-server",
                "h:1",
                "--election-type",
                "unclean",
                "--all-topic-partitions",
                "--partition",
                "1",
            ],
            "Option --partition is only allowed if --topic is used",
        ),
        (
            ["--bootstrap-server", "h:1", "--election-type", "dirty", "--all-topic-partitions"],
            "not an election type",
        ),
    ],
)
def test_leader_election_option_errors_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        leader_election.main(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_election_files_are_kafkas(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parse = leader_election.parse_election_partitions
    assert parse('{"partitions":[{"topic":"t","partition":1},{"topic":"u","partition":0}]}') == [
        TopicPartition("t", 1),
        TopicPartition("u", 0),
    ]
    with pytest.raises(leader_election.LeaderElectionError, match='missing "partitions" field'):
        parse('{"topic":"t"}')
    with pytest.raises(leader_election.LeaderElectionError, match="duplicate partitions: t-1"):
        parse('{"partitions":[{"topic":"t","partition":1},{"topic":"t","partition":1}]}')
    missing = tmp_path / "absent.json"
    code = leader_election.main(
        ["--bootstrap-server", "h:1", "--election-type", "preferred", "--path-to-json-file", str(missing)]
    )
    assert code == 1
    assert capsys.readouterr().err.startswith(f"Error: cannot read {missing}")


# ------------------------------------------------------------------------------ on a cluster


@pytest_asyncio.fixture
async def cluster() -> AsyncIterator[InProcessCluster]:
    cluster = await started(
        1,
        2,
        3,
        others=(4,),
        session_timeout_ms=SESSION_MS,
        link=LinkBehaviour(min_delay_ms=1, max_delay_ms=1),
        **CONFIG,
    )
    try:
        yield cluster
    finally:
        await cluster.__aexit__(None, None, None)


async def drive(cluster: InProcessCluster, work: Awaitable[T]) -> T:
    return await cluster.complete(work, within_ms=120_000, step_ms=10)


async def reassign(cluster: InProcessCluster, admin: Admin, *argv: str) -> int:
    arguments = reassign_partitions.build_parser().parse_args(["--bootstrap-server", "sim:1", *argv])
    return await drive(cluster, reassign_partitions.run(admin, arguments))


@pytest.mark.asyncio
async def test_generate_execute_with_a_throttle_verify_and_list(
    cluster: InProcessCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await cluster.create_topic(TOPIC, {0: (1, 2), 1: (2, 3), 2: (3, 1)})
    await cluster.start_broker(4)
    admin = sim_admin(cluster, 2)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))

    assert (
        await reassign(
            cluster, admin, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "2,3,4"
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert parse_reassignment(lines[1]) == {
        TopicPartition(TOPIC, p): list(r) for p, r in {0: (1, 2), 1: (2, 3), 2: (3, 1)}.items()
    }
    assert lines[2:4] == ["", "Proposed partition reassignment configuration"]
    proposed = parse_reassignment(lines[4])
    assert sorted(proposed) == [TopicPartition(TOPIC, p) for p in range(3)]
    assert all(len(r) == 2 and set(r) <= {2, 3, 4} for r in proposed.values())

    # Every partition gets a replica on broker 4, which cannot reach the others for now: the
    # reassignments stay in progress.
    cuts = [cluster.cut(4, other) for other in (1, 2, 3)]
    target = {
        TopicPartition(TOPIC, 0): [4, 2],
        TopicPartition(TOPIC, 1): [2, 4],
        TopicPartition(TOPIC, 2): [3, 4],
    }
    plan = tmp_path / "plan.json"
    plan.write_text(format_reassignment_json(target))
    assert (
        await reassign(
            cluster, admin, "--execute", "--reassignment-json-file", str(plan), "--throttle", "50000000"
        )
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    assert out[0:2] == ["Current partition replica assignment", ""]
    assert parse_reassignment(out[2]) == parse_reassignment(lines[1])
    assert out[3:] == [
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
        "Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
        "throttle is removed.",
        "The inter-broker throttle limit was set to 50000000 B/s",
        f"Successfully started partition reassignments for {TOPIC}-0,{TOPIC}-1,{TOPIC}-2",
    ]
    await check_throttles(cluster, admin, "0:1,0:2,1:2,1:3,2:1,2:3", "0:4,1:4,2:4", "50000000")

    assert await reassign(cluster, admin, "--list") == 0
    assert capsys.readouterr().out.splitlines() == [
        "Current partition reassignments:",
        f"{TOPIC}-0: replicas: 4,2,1. adding: 4. removing: 1.",
        f"{TOPIC}-1: replicas: 2,4,3. adding: 4. removing: 3.",
        f"{TOPIC}-2: replicas: 3,4,1. adding: 4. removing: 1.",
    ]
    assert await reassign(cluster, admin, "--verify", "--reassignment-json-file", str(plan)) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Status of partition reassignment:",
        *(f"Reassignment of partition {TOPIC}-{p} is still in progress." for p in range(3)),
    ]
    await check_throttles(cluster, admin, "0:1,0:2,1:2,1:3,2:1,2:3", "0:4,1:4,2:4", "50000000")
    with pytest.raises(ReassignCommandError, match="Cannot execute because there is an existing partition"):
        await reassign(cluster, admin, "--execute", "--reassignment-json-file", str(plan))

    # Partition 2's move is cancelled: it goes back to its replicas.
    one = tmp_path / "one.json"
    one.write_text(format_reassignment_json({TopicPartition(TOPIC, 2): [3, 4]}))
    assert (
        await reassign(
            cluster, admin, "--cancel", "--reassignment-json-file", str(one), "--preserve-throttles"
        )
        == 0
    )
    assert capsys.readouterr().out == f"Successfully cancelled partition reassignment for: {TOPIC}-2\n"
    assert cluster.assignment(TopicPartition(TOPIC, 2)) == (3, 1)

    cluster.heal(*cuts)
    await cluster.wait_for(
        lambda: all(cluster.assignment(tp) == tuple(r) for tp, r in target.items() if tp.partition != 2),
        within_ms=60_000,
    )
    for _ in range(100):
        if not await drive(cluster, admin.list_partition_reassignments()):
            break
        await cluster.advance(100)
    assert await reassign(cluster, admin, "--list") == 0
    assert capsys.readouterr().out == "No partition reassignments found.\n"
    assert await reassign(cluster, admin, "--verify", "--reassignment-json-file", str(plan)) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Status of partition reassignment:",
        f"Reassignment of partition {TOPIC}-0 is completed.",
        f"Reassignment of partition {TOPIC}-1 is completed.",
        f"There is no active reassignment of partition {TOPIC}-2, but replica set is 3,1 rather than 3,4.",
        "Clearing broker-level throttles on brokers 1,2,3,4",
        f"Clearing topic-level throttles on topic {TOPIC}",
    ]
    await check_throttles(cluster, admin, None, None, None)
    assert await reassign(cluster, admin, "--cancel", "--reassignment-json-file", str(plan)) == 0
    assert (
        capsys.readouterr().out.splitlines()[0] == "None of the specified partition reassignments are active."
    )


async def check_throttles(
    cluster: InProcessCluster, admin: Admin, leader: str | None, follower: str | None, rate: str | None
) -> None:
    """The topic's throttled replica lists and every broker's two rates (None: not set)."""
    topic_config = await drive(cluster, admin.describe_topic_config(TOPIC))
    for key, wanted in (
        ("leader.replication.throttled.replicas", leader),
        ("follower.replication.throttled.replicas", follower),
    ):
        entry = topic_config[key]
        assert (entry.value if entry.source == "DYNAMIC_TOPIC_CONFIG" else None) == wanted, key
    for broker_id in (1, 2, 3, 4):
        broker_config = await drive(cluster, admin.describe_broker_config(broker_id))
        for key in ("leader.replication.throttled.rate", "follower.replication.throttled.rate"):
            found = broker_config.get(key)
            dynamic = found.value if found is not None and found.source == "DYNAMIC_BROKER_CONFIG" else None
            assert dynamic == rate, (broker_id, key)


@pytest.mark.asyncio
async def test_execute_refuses_unknown_brokers_and_partitions_before_changing_anything(
    cluster: InProcessCluster, tmp_path: Path
) -> None:
    await cluster.create_topic(TOPIC, {0: (1, 2)})
    admin = sim_admin(cluster)
    plan = tmp_path / "plan.json"
    plan.write_text(format_reassignment_json({TopicPartition(TOPIC, 0): [1, 9]}))
    with pytest.raises(ReassignCommandError, match="Unknown broker id 9"):
        await reassign(cluster, admin, "--execute", "--reassignment-json-file", str(plan))
    plan.write_text(format_reassignment_json({TopicPartition(TOPIC, 5): [1, 2]}))
    with pytest.raises(ReassignCommandError, match=f"Unable to find partition: {TOPIC}-5"):
        await reassign(cluster, admin, "--execute", "--reassignment-json-file", str(plan))
    assert cluster.assignment(TopicPartition(TOPIC, 0)) == (1, 2)


@pytest.mark.asyncio
async def test_leader_election_prints_kafkas_lines(
    cluster: InProcessCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    controller = cluster.controller_id()
    a, b = (x for x in (1, 2, 3) if x != controller)
    await cluster.create_topic(TOPIC, {0: (a, b), 1: (b, a)})
    moved, settled = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
    await cluster.kill(a)
    await cluster.wait_for_state(moved, lambda s: s.leader == b, within_ms=SESSION_MS + 5_000)
    admin = sim_admin(cluster, b)

    with pytest.raises(leader_election.LeaderElectionError, match=r"^1 replica\(s\) could not be elected$"):
        await drive(cluster, leader_election.run(admin, ElectionType.PREFERRED, [moved, settled]))
    assert capsys.readouterr().out.splitlines() == [
        f"Valid replica already elected for partitions {settled}",
        f"Error completing leader election (PREFERRED) for partition: {moved}: "
        f"PREFERRED_LEADER_NOT_AVAILABLE: Failed to elect leader for partition {moved} "
        "under strategy PREFERRED",
    ]

    await cluster.start_broker(a)
    await cluster.wait_for_isr(moved, (a, b), within_ms=30_000)
    assert await drive(cluster, leader_election.run(admin, ElectionType.PREFERRED, None)) == 0
    assert (
        capsys.readouterr().out
        == f"Successfully completed leader election (PREFERRED) for partitions {moved}\n"
    )
    assert cluster.zk_partition_state(moved)[0].leader == a
    assert await drive(cluster, leader_election.run(admin, ElectionType.UNCLEAN, [moved])) == 0
    assert capsys.readouterr().out == f"Valid replica already elected for partitions {moved}\n"


@pytest.mark.asyncio
@pytest.mark.parametrize("mixed", [False, True], ids=["racked", "mixed-racks"])
async def test_generate_places_replicas_across_racks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mixed: bool
) -> None:
    racks: dict[int, str | None] = {1: "zone-a", 2: "zone-a", 3: "zone-b", 4: None if mixed else "zone-b"}
    cluster = InProcessCluster(broker_ids=(1, 2, 3, 4), racks=racks, config_overrides=dict(CONFIG))
    await cluster.__aenter__()
    try:
        await cluster.start_brokers(1, 2, 3, 4)
        await cluster.create_topic(TOPIC, dict.fromkeys(range(6), (1, 2)))  # every replica in zone-a
        admin = sim_admin(cluster)
        topics = tmp_path / "topics.json"
        topics.write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))
        generate = ("--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "1,2,3,4")
        if mixed:
            with pytest.raises(ReassignCommandError, match="Not all brokers have rack information"):
                await reassign(cluster, admin, *generate)
        else:
            assert await reassign(cluster, admin, *generate) == 0
            proposed = parse_reassignment(capsys.readouterr().out.splitlines()[4])
            assert len(proposed) == 6
            assert all({racks[b] for b in replicas} == {"zone-a", "zone-b"} for replicas in proposed.values())
        # Ignoring racks is always possible.
        assert await reassign(cluster, admin, *generate, "--disable-rack-aware") == 0
        proposed = parse_reassignment(capsys.readouterr().out.splitlines()[4])
        assert all(len(set(replicas)) == 2 for replicas in proposed.values())
    finally:
        await cluster.__aexit__(None, None, None)
