"""The runtime's script driver (runtime/scripts.py) stepped with the BehaviorTestKit: every step
leaves as an effect and its outcome comes back as a message the test delivers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

import pytest

from actors.common.types import TopicPartition
from actors.server import zk_data
from actors.server.replica.partition_state import LeaderAndIsr
from actors.server.replica.state_store import conditional_isr_write, isr_write, read_partition_state
from runtime.actor import Actor
from runtime.context import Context
from runtime.coordination.base import Stat
from runtime.coordination.errors import BadVersionError, NoNodeError
from runtime.coordination.memory import MemoryCoordinator
from runtime.coordination.memory_server import MemoryZooKeeper
from runtime.coordination.requests import ZkEnsurePath, ZkGet, ZkSet, execute
from runtime.messages import AskTimedOut
from runtime.ref import ActorRef
from runtime.scripts import Ask, AskAll, Pause, Resume, Script, ScriptRunner, ScriptStep
from runtime.testkit import BehaviorTestKit

A = ActorRef(node_id="n1", name="a")
B = ActorRef(node_id="n2", name="b")


@dataclass(frozen=True)
class Run:
    which: str


Message: TypeAlias = Run | ScriptStep | Resume


class Scripted(Actor[Message]):
    def __init__(self, *, one_at_a_time: bool = False, script: Script | None = None) -> None:
        # A coordinator only when a test plays ZooKeeper steps (the kit never runs pipes).
        coordinator = None if script is None else MemoryCoordinator(MemoryZooKeeper())
        self.scripts = ScriptRunner(coordinator, one_at_a_time=one_at_a_time)
        self.script = script
        self.results: list[tuple[object, Exception | None]] = []
        self.ids: dict[str, int] = {}

    def receive(self, ctx: Context[Message], message: Message) -> None:
        match message:
            case Run(which=which):
                script = {"gather": self._gather(), "pause": self._pause(ctx), "zk": self._zk()}.get(which)
                script = self.script if script is None else script
                assert script is not None
                self.ids[which] = self.scripts.start(ctx, script, lambda v, e: self.results.append((v, e)))
            case ScriptStep():
                self.scripts.on_step(ctx, message)
            case Resume():
                self.scripts.on_resume(ctx, message)

    def _gather(self) -> Script:
        replies = yield AskAll((Ask(A, "to-a", 100), Ask(B, "to-b", 100)))
        return replies

    def _pause(self, ctx: Context[Message]) -> Script:
        started = ctx.now_ms
        resumed = yield Pause(250)
        return resumed - started

    def _zk(self) -> Script:
        value = yield ZkGet("/x")
        return value


def test_ask_all_resumes_once_every_answer_is_in_with_failures_in_place() -> None:
    actor = Scripted()
    kit: BehaviorTestKit[Message] = BehaviorTestKit(actor)
    first, second = kit.asks(kit.tell(Run("gather")))
    assert (first.target, first.message, second.target, second.message) == (A, "to-a", B, "to-b")
    failure = AskTimedOut(target=str(B), timeout_ms=100)
    kit.tell(second.on_failure(failure))
    assert actor.results == []  # one answer is still missing
    kit.tell(first.on_reply("from-a"))
    kit.tell(first.on_reply("again"))  # a duplicate answer changes nothing
    assert actor.results == [(("from-a", failure), None)]
    assert len(actor.scripts) == 0


def test_a_pause_resumes_with_the_time_then() -> None:
    actor = Scripted()
    kit: BehaviorTestKit[Message] = BehaviorTestKit(actor)
    kit.tell(Run("pause"))
    kit.advance(249)
    assert actor.results == []
    kit.advance(1)
    assert actor.results == [(250, None)]


def test_one_at_a_time_refuses_a_second_script_and_a_cancelled_one_ignores_its_late_step() -> None:
    actor = Scripted(one_at_a_time=True)
    kit: BehaviorTestKit[Message] = BehaviorTestKit(actor)
    (ask,) = kit.asks(kit.tell(Run("gather")))[:1]
    assert actor.scripts.busy
    with pytest.raises(RuntimeError, match="one-at-a-time"):
        kit.tell(Run("pause"))
    actor.scripts.cancel(actor.ids["gather"])
    assert len(actor.scripts) == 0
    kit.tell(ask.on_reply("late"))
    assert actor.results == []
    kit.tell(Run("pause"))  # free again
    kit.advance(250)
    assert actor.results == [(250, None)]


def test_a_zookeeper_step_without_a_coordinator_is_refused() -> None:
    kit: BehaviorTestKit[Any] = BehaviorTestKit(Scripted())
    with pytest.raises(RuntimeError, match="without a coordinator"):
        kit.tell(Run("zk"))


TP = TopicPartition("t", 0)
PROPOSAL = LeaderAndIsr(leader=1, leader_epoch=3, isr=(1, 2), controller_epoch=5, zk_version=7)
STATE_PATH = zk_data.partition_state_path("t", 0)


def _stat(version: int) -> Stat:
    return Stat(
        version=version, cversion=0, czxid=1, mzxid=2, ephemeral_owner=0, num_children=0, data_length=0
    )


def _state(*, leader_epoch: int, isr: tuple[int, ...]) -> bytes:
    return zk_data.encode_partition_state(
        zk_data.PartitionState(leader=1, leader_epoch=leader_epoch, isr=isr, controller_epoch=5)
    )


@pytest.mark.parametrize(
    ("found", "outcome"),
    [
        (_state(leader_epoch=3, isr=(2, 1)), 9),  # a retried write of ours landed: its version
        (_state(leader_epoch=4, isr=(1, 2)), None),  # the controller moved on: fenced
    ],
)
def test_the_isr_write_conditional_check_is_stepped_in_the_kit(found: bytes, outcome: int | None) -> None:
    """Kafka's checkLeaderAndIsrZkData as request values: BADVERSION on the conditional write, then
    the re-read decides whether the znode holds what this leader wrote."""
    actor = Scripted(script=isr_write(TP, PROPOSAL))
    kit: BehaviorTestKit[Message] = BehaviorTestKit(actor)
    (write,) = kit.pipes(kit.tell(Run("isr")))
    assert actor.scripts.busy
    (reread,) = kit.pipes(kit.fail_pipe(write, BadVersionError(STATE_PATH, 7)))
    kit.complete_pipe(reread, (found, _stat(9)))
    assert actor.results == [(outcome, None)]


def test_the_isr_write_script_yields_the_conditional_set_then_the_reread() -> None:
    script = isr_write(TP, PROPOSAL)
    assert next(script) == ZkSet(STATE_PATH, _state(leader_epoch=3, isr=(1, 2)), version=7)
    assert script.throw(BadVersionError(STATE_PATH, 7)) == ZkGet(STATE_PATH)
    with pytest.raises(StopIteration) as finished:
        script.send((_state(leader_epoch=3, isr=(1, 2)), _stat(8)))
    assert finished.value.value == 8


@pytest.mark.asyncio
async def test_the_runtime_performs_the_isr_write_and_the_state_read_against_zookeeper() -> None:
    """The partition pipes these: ``perform_script`` sends each result in and throws each error in."""
    coordinator = MemoryCoordinator(MemoryZooKeeper())
    await coordinator.start()
    try:
        assert await conditional_isr_write(coordinator, TP, PROPOSAL)() is None  # NONODE
        with pytest.raises(NoNodeError):
            await read_partition_state(coordinator, TP)()
        await execute(coordinator, ZkEnsurePath(STATE_PATH.rsplit("/", 1)[0]))
        await coordinator.create(STATE_PATH, _state(leader_epoch=2, isr=(1, 2)))
        first = LeaderAndIsr(leader=1, leader_epoch=3, isr=(1, 2), controller_epoch=5, zk_version=0)
        assert await conditional_isr_write(coordinator, TP, first)() == 1
        # The same proposal again on the old version: BADVERSION, and the znode is ours.
        assert await conditional_isr_write(coordinator, TP, first)() == 1
        other = LeaderAndIsr(leader=1, leader_epoch=3, isr=(1,), controller_epoch=5, zk_version=0)
        assert await conditional_isr_write(coordinator, TP, other)() is None  # not ours: fenced
        state, version = await read_partition_state(coordinator, TP)()
        assert (state.leader_epoch, state.isr, version) == (3, (1, 2), 1)
    finally:
        await coordinator.close()
