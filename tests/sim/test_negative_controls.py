"""Negative controls: the simulation must catch deliberate protocol bugs, or it proves nothing.

Each ``ProtocolFault`` (a switch only code can set, never configuration) breaks one rule Kafka
depends on. With the fault mix that exercises that rule, the invariants must report a violation
within ``WITHIN`` seeds; and the seed that caught it must pass with the switch off, so the catch is
the bug's doing, not the schedule's.
"""

from __future__ import annotations

import pytest

from actors.server.config import ProtocolFault
from ops.sim.plan import FaultKind, PlanOptions
from ops.sim.runner import SimOptions, run_seed

pytestmark = pytest.mark.sim


# fault -> (the fault mix that exercises the rule it breaks, the invariants that may catch it,
#           how many seeds it may take)
CONTROLS: dict[ProtocolFault, tuple[PlanOptions, set[str], int]] = {
    # Followers fall out of the ISR while producers write: acknowledgements with a one-member ISR.
    ProtocolFault.SKIP_MIN_INSYNC_CHECK: (
        PlanOptions(
            faults=frozenset({FaultKind.PARTITION, FaultKind.ONE_WAY_PARTITION, FaultKind.ISOLATE}),
            fault_probability=0.3, topic_churn=False, config_changes=False,
        ),
        {"AcknowledgedOnMinInsyncReplicas", "NoLostAcknowledgedRecord", "StrongIsr"},
        5,
    ),
    # Leaders die while followers lag: an out-of-sync replica becomes leader without the records.
    ProtocolFault.ELECT_OUTSIDE_ISR: (
        PlanOptions(
            faults=frozenset(
                {FaultKind.KILL, FaultKind.ISOLATE, FaultKind.PARTITION, FaultKind.ONE_WAY_PARTITION}
            ),
            fault_probability=0.3, topic_churn=False, config_changes=False,
        ),
        {
            "NoLostAcknowledgedRecord", "ConsumedRecordsStay", "StrongIsr", "LeaderInIsr",
            "AcknowledgedOnMinInsyncReplicas",
        },
        8,
    ),
    # ISR changes (a follower restarts and rejoins), then the leader's partition actor crashes.
    ProtocolFault.FORGET_ISR_ON_RESTART: (
        PlanOptions(
            faults=frozenset({FaultKind.ACTOR_CRASH, FaultKind.CLEAN_RESTART, FaultKind.ISOLATE}),
            fault_probability=0.4, actor_kinds=("partition",), topic_churn=False, config_changes=False,
        ),
        {"ZkIsrIsTheLeaders", "StrongIsr", "NoLostAcknowledgedRecord"},
        8,
    ),
    # Leaders change while a third replica follows: it truncates below the leader's HW (KIP-101).
    ProtocolFault.TRUNCATE_TO_HIGH_WATERMARK: (
        PlanOptions(
            faults=frozenset({FaultKind.KILL, FaultKind.CLEAN_RESTART}),
            fault_probability=0.3, replication_factors=(3,), topic_churn=False, config_changes=False,
        ),
        {"StrongIsr", "NoLostAcknowledgedRecord", "ConsumedRecordsStay"},
        12,
    ),
}  # fmt: skip


@pytest.mark.parametrize("fault", list(CONTROLS), ids=lambda fault: fault.value)
def test_each_negative_control_is_caught(fault: ProtocolFault) -> None:
    plan, invariants, within = CONTROLS[fault]
    for seed in range(1, within + 1):
        broken = run_seed(seed, SimOptions(plan=plan, protocol_faults=frozenset({fault})))
        if broken.violation is not None:
            assert broken.violation.invariant in invariants, str(broken.violation)
            fixed = run_seed(seed, SimOptions(plan=plan))
            assert fixed.passed, f"seed {seed} fails without {fault.value} too: {fixed.violation}"
            return
    pytest.fail(f"{fault.value} was not caught within {within} seeds")
