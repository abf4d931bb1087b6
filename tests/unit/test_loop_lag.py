"""The event-loop lag probe (runtime/loop_lag.py): how late a due probe timer runs, on virtual time."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client.core import Metric

from runtime.clock import LoopClock, ManualClock, wait_ms
from runtime.loop_lag import LoopLagProbe


def _values(families: list[Metric]) -> dict[str, float]:
    return {sample.name: sample.value for family in families for sample in family.samples}


async def _until(condition: object) -> None:
    assert callable(condition)
    for _ in range(500):
        if condition():
            return
        await wait_ms(LoopClock(), 2)
    raise AssertionError("condition not reached")


@pytest.mark.asyncio
async def test_a_probe_woken_late_records_the_lag_and_a_stall(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    probe = LoopLagProbe(clock, interval_ms=100, stall_ms=1_000)
    task = asyncio.ensure_future(probe.run())
    try:
        await _until(lambda: clock.next_due_ms() == 100)
        # On time: the timer due at 100 runs at 100.
        clock.advance(100)
        await _until(lambda: clock.next_due_ms() == 200)
        assert probe.max_lag_ms == 0
        # The loop comes back 1.4 s after the next probe was due (time moved on while it was busy).
        with caplog.at_level(logging.WARNING, logger="actorlog.runtime.loop_lag"):
            clock.advance(1_500)
            await _until(lambda: probe.max_lag_ms > 0)
        assert probe.max_lag_ms == 1_400
        assert probe.stalls_total == 1
        assert "stalled for 1400 ms" in caplog.text
        # A shorter lag later leaves the largest as it was and is no stall.
        due = clock.next_due_ms()
        assert due is not None
        clock.advance_to(due + 300)
        await _until(lambda: clock.next_due_ms() == due + 400)
        assert (probe.max_lag_ms, probe.stalls_total) == (1_400, 1)
    finally:
        task.cancel()
    assert _values(probe.metric_families()) == {
        "actorlog_event_loop_lag_max_seconds": 1.4,
        "actorlog_event_loop_stalls_total": 1.0,
    }


def test_intervals_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        LoopLagProbe(ManualClock(), interval_ms=0)
