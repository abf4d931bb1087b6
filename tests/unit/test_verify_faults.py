"""The fault campaign's schedule (ops/verify/faults.py): a function of the seed, spread over the
window, never more than ``max_concurrent`` at once, the right targets for each kind."""

from __future__ import annotations

import pytest

from ops.verify.faults import (
    PAIR_FAULTS,
    ZOOKEEPER_FAULTS,
    Fault,
    FaultKind,
    describe_fault,
    plan_faults,
)

BROKERS = (1, 2, 3)


def plan(seed: int, count: int = 200, **overrides: object) -> list[Fault]:
    options: dict[str, object] = {
        "count": count,
        "window_s": 600.0,
        "brokers": BROKERS,
        "partitions": 3,
        "kinds": tuple(FaultKind),
        "session_timeout_s": 6.0,
    }
    options.update(overrides)
    return plan_faults(seed, **options)  # type: ignore[arg-type]


def test_a_seed_fixes_the_schedule_and_another_seed_changes_it() -> None:
    assert plan(7) == plan(7)
    assert plan(7) != plan(8)


def test_every_fault_is_scheduled_in_order_with_its_targets() -> None:
    faults = plan(11)
    assert len(faults) == 200
    assert [fault.at_s for fault in faults] == sorted(fault.at_s for fault in faults)
    assert {fault.kind for fault in faults} == set(FaultKind)  # 200 draws reach every kind
    for fault in faults:
        if fault.kind in ZOOKEEPER_FAULTS:
            assert fault.brokers == ()
        elif fault.kind in PAIR_FAULTS:
            assert len(set(fault.brokers)) == 2
            assert set(fault.brokers) <= set(BROKERS)
        else:
            assert len(fault.brokers) == 1
            assert fault.brokers[0] in BROKERS
        assert 0 <= fault.partition < 3


@pytest.mark.parametrize("max_concurrent", [1, 2, 3])
def test_never_more_faults_at_once_than_allowed(max_concurrent: int) -> None:
    faults = plan(3, max_concurrent=max_concurrent)
    for fault in faults:
        running = [
            other for other in faults if other.at_s <= fault.at_s < round(other.at_s + other.duration_s, 3)
        ]
        assert len(running) <= max_concurrent, (fault, running)


def test_pauses_stay_inside_or_go_beyond_the_session_timeout() -> None:
    faults = plan(5, kinds=(FaultKind.PAUSE_SHORT, FaultKind.PAUSE_LONG))
    for fault in faults:
        if fault.kind is FaultKind.PAUSE_SHORT:
            assert fault.duration_s < 6.0 * 0.6
        else:
            assert fault.duration_s > 6.0 * 1.2


def test_durations_have_a_floor() -> None:
    faults = plan(9, kinds=(FaultKind.KILL_BROKER,), min_duration_s=2.0)
    assert min(fault.duration_s for fault in faults) >= 2.0


def test_bad_options_are_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="no fault kind"):
        plan(1, kinds=())
    with pytest.raises(ValueError, match="positive fault window"):
        plan(1, window_s=0.0)
    with pytest.raises(ValueError, match="two brokers"):
        plan(1, brokers=(1,), kinds=(FaultKind.PARTITION,))


def test_the_log_line_names_the_target() -> None:
    leader = Fault(at_s=1.0, kind=FaultKind.KILL_LEADER, duration_s=2.5, partition=2)
    pair = Fault(at_s=1.0, kind=FaultKind.PARTITION, duration_s=3.0, brokers=(1, 3))
    assert describe_fault(leader) == "kill-leader the leader of partition 2 for 2.5 s"
    assert describe_fault(pair) == "partition broker(s) 1, 3 for 3.0 s"
    assert describe_fault(Fault(0.0, FaultKind.ZOOKEEPER_KILL, 4.0)) == "zookeeper-kill ZooKeeper for 4.0 s"
