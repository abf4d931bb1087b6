"""The verification checker on small hand-built histories: each error class where it must be found,
and its clean counterpart where it must not be (an ``info`` send that was read is committed; ``fail``
and ``info`` sends never read are fine; replica divergence above the high watermark is fine)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from ops.verify.checker import ERROR_CLASSES, CheckResult, check_history
from ops.verify.history import HistoryWriter, Operation, read_history
from runtime.clock import ManualClock

K = "orders-0"
K1 = "orders-1"


class Run:
    """A history written through ``HistoryWriter`` with a manual clock, then checked."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.clock = ManualClock(start_ms=0)
        self.history = HistoryWriter(path, self.clock)

    def at(self, ms: int) -> Run:
        self.clock.advance_to(ms)
        return self

    def acked(self, process: int, value: str, offset: int, key: str = K) -> None:
        self.history.send_ok(self.history.send(process, key, value), offset)

    def failed(self, process: int, value: str, error: str = "NOT_ENOUGH_REPLICAS", key: str = K) -> None:
        self.history.send(process, key, value).fail(error=error)

    def indeterminate(self, process: int, value: str, offset: int | None = None, key: str = K) -> None:
        operation = self.history.send(process, key, value)
        operation.info([key, [offset, value]], error="REQUEST_TIMED_OUT")

    def polled(self, process: int, reads: dict[str, Sequence[tuple[int, str]]]) -> None:
        self.history.poll(process).ok({key: [list(pair) for pair in pairs] for key, pairs in reads.items()})

    def final(self, records: Sequence[tuple[int, str]], key: str = K, *, complete: bool = True) -> None:
        high_watermark = (records[-1][0] + 1) if records else 0
        self.history.final_read(99, key, records, high_watermark=high_watermark, complete=complete)

    def check(self, max_examples: int = 10) -> CheckResult:
        self.history.close()
        return check_history(read_history(self.path), max_examples=max_examples)


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    built = Run(tmp_path / "history.jsonl")
    yield built
    built.history.close()


def _violations(result: CheckResult) -> dict[str, int]:
    return result.violations


ABC = [(0, "a"), (1, "b"), (2, "c")]


def _clean(run: Run) -> None:
    run.acked(0, "a", 0)
    run.acked(1, "b", 1)
    run.acked(0, "c", 2)
    run.polled(5, {K: ABC[:2]})
    run.polled(5, {K: ABC[2:]})
    run.final(ABC)


def test_a_clean_history_is_valid_with_its_figures(run: Run) -> None:
    _clean(run)
    for broker in (1, 2, 3):
        run.history.replica_log(broker, K, ABC, high_watermark=3, log_end_offset=3)
    result = run.check()
    assert result.valid
    assert result.violations == {}
    assert set(result.counts) == set(ERROR_CLASSES)
    assert (result.sends_ok, result.sends_info, result.sends_fail) == (3, 0, 0)
    assert result.values_read == 3
    assert result.events == 3 * 2 + 2 * 2 + 1 + 3
    assert result.longest_unavailability is None


# -- lost, lost-write, unseen, no final read -------------------------------------------------------


def test_an_acknowledged_send_absent_from_the_final_read_is_lost(run: Run) -> None:
    run.acked(0, "a", 0)
    run.acked(0, "b", 1)
    run.polled(5, {K: [(0, "a"), (1, "b")]})
    run.final([(0, "a")])
    result = run.check()
    assert _violations(result) == {"lost": 1, "dirty-read": 1}  # read, then gone: also a dirty read
    assert result.examples["lost"] == [{"key": K, "value": "b", "offset": 1, "writer": 3}]


def test_lost_write_is_jepsens_bound_rule(run: Run) -> None:
    run.acked(0, "a", 0)
    run.acked(0, "b", 1)
    run.acked(0, "c", 2)
    run.polled(5, {K: [(0, "a")]})
    run.polled(6, {K: [(2, "c")]})  # someone read index 2, so b at index 1 must have been read
    result = run.check()
    assert result.counts["lost-write"] == 1
    example = result.examples["lost-write"][0]
    assert (example["value"], example["index"], example["max_read_index"]) == ("b", 1, 2)
    assert example["max_read"]["value"] == "c"
    assert result.counts["unseen"] == 1
    assert result.counts["no-final-read"] == 1  # no final read: lost could not be judged
    assert result.counts["lost"] == 0


def test_an_acknowledged_send_above_every_read_is_unseen_not_lost_write(run: Run) -> None:
    run.acked(0, "a", 0)
    run.acked(0, "b", 1)
    run.polled(5, {K: [(0, "a")]})
    result = run.check()
    assert _violations(result) == {"unseen": 1, "no-final-read": 1}
    assert result.examples["unseen"][0]["value"] == "b"
    assert result.examples["no-final-read"] == [
        {"key": K, "acknowledged": 2, "unjudged": 2, "reason": "no final read", "read_up_to": None,
         "high_watermark": None}
    ]  # fmt: skip


def test_an_incomplete_final_read_judges_only_what_it_reached(run: Run) -> None:
    run.acked(0, "a", 0)
    run.acked(0, "b", 1)
    run.acked(0, "c", 2)
    run.acked(0, "d", 3)
    run.polled(5, {K: [(0, "a"), (1, "b"), (2, "c"), (3, "d")]})
    run.final([(0, "a"), (2, "c")], complete=False)  # b is missing below where it stopped; d beyond
    result = run.check()
    assert _violations(result) == {"lost": 1, "dirty-read": 1, "no-final-read": 1, "int-poll-skip": 1}
    assert result.examples["lost"][0]["value"] == "b"
    assert result.examples["dirty-read"][0]["value"] == "b"
    assert result.examples["no-final-read"][0]["unjudged"] == 1
    assert result.examples["no-final-read"][0]["reason"] == "the final read stopped early"


# -- what is committed and what is not -------------------------------------------------------------


def test_an_indeterminate_send_whose_value_was_read_is_committed(run: Run) -> None:
    run.acked(0, "a", 0)
    run.indeterminate(0, "b")  # timed out, but it landed
    run.acked(0, "c", 2)
    run.polled(5, {K: ABC})
    run.final(ABC)
    result = run.check()
    assert result.valid
    assert (result.sends_ok, result.sends_info, result.sends_fail) == (2, 1, 0)


def test_failed_and_indeterminate_sends_never_read_are_fine(run: Run) -> None:
    run.acked(0, "a", 0)
    run.failed(0, "x")
    run.indeterminate(0, "y", offset=1)  # an offset it claimed, never seen: not committed
    run.acked(1, "b", 1)
    run.polled(5, {K: [(0, "a"), (1, "b")]})
    run.final([(0, "a"), (1, "b")])
    result = run.check()
    assert result.valid, result.violations
    assert (result.sends_ok, result.sends_info, result.sends_fail) == (2, 1, 1)


def test_an_invoke_never_completed_is_indeterminate(run: Run) -> None:
    run.acked(0, "a", 0)
    run.history.send(0, K, "b")
    run.final([(0, "a")])
    result = run.check()
    assert result.valid
    assert result.sends_info == 1
    assert "1 operations were invoked but never completed" in result.notes


# -- duplicates, inconsistent offsets, G1a, dirty reads ---------------------------------------------


def test_an_idempotent_retry_appended_twice_is_a_duplicate(run: Run) -> None:
    run.acked(0, "a", 0)
    run.acked(0, "b", 1)
    run.polled(5, {K: [(0, "a"), (1, "b"), (2, "b")]})
    run.final([(0, "a"), (1, "b"), (2, "b")])
    result = run.check()
    assert _violations(result) == {"duplicate": 1}
    assert result.examples["duplicate"] == [{"key": K, "value": "b", "count": 2, "offsets": [1, 2]}]


def test_two_values_at_one_offset_are_inconsistent_offsets(run: Run) -> None:
    run.acked(0, "a", 0)
    run.acked(0, "b", 1)
    run.indeterminate(1, "x")
    run.polled(5, {K: [(0, "a"), (1, "b")]})
    run.polled(6, {K: [(0, "a"), (1, "x")]})  # another reader saw another value at offset 1
    run.final([(0, "a"), (1, "b")])
    result = run.check()
    assert result.counts["inconsistent-offsets"] == 1
    assert result.examples["inconsistent-offsets"][0] == {
        "key": K,
        "offset": 1,
        "index": 1,
        "values": ["b", "x"],
    }
    assert result.counts["dirty-read"] == 1  # x went away


def test_reading_a_value_whose_send_failed_is_g1a(run: Run) -> None:
    run.acked(0, "a", 0)
    run.failed(0, "b")
    run.polled(5, {K: [(0, "a"), (1, "b")]})
    run.final([(0, "a"), (1, "b")])
    result = run.check()
    assert _violations(result) == {"G1a": 1}
    assert result.examples["G1a"][0]["error"] == "NOT_ENOUGH_REPLICAS"


def test_a_value_read_then_gone_from_the_final_read_is_a_dirty_read(run: Run) -> None:
    run.acked(0, "a", 0)
    run.indeterminate(0, "b")
    run.polled(5, {K: [(0, "a"), (1, "b")]})
    run.final([(0, "a")])
    result = run.check()
    assert _violations(result) == {"dirty-read": 1}  # b was never acknowledged: not lost
    assert result.examples["dirty-read"] == [{"key": K, "value": "b", "offset": 1, "reader": 5}]


# -- order ------------------------------------------------------------------------------------------


def test_a_poll_that_skips_values_is_a_poll_skip(run: Run) -> None:
    _clean(run)
    run.polled(6, {K: [(0, "a")]})
    run.polled(6, {K: [(2, "c")]})
    result = run.check()
    assert _violations(result) == {"poll-skip": 1}
    example = result.examples["poll-skip"][0]
    assert (example["process"], example["delta"], example["skipped"]) == (6, 2, [[1, "b"]])


def test_a_poll_that_goes_back_is_a_nonmonotonic_poll(run: Run) -> None:
    _clean(run)
    run.polled(6, {K: [(0, "a"), (1, "b")]})
    run.polled(6, {K: [(1, "b"), (2, "c")]})
    result = run.check()
    assert _violations(result) == {"nonmonotonic-poll": 1}
    assert result.examples["nonmonotonic-poll"][0]["delta"] == 0


def test_an_assign_forgets_the_keys_it_no_longer_names(run: Run) -> None:
    _clean(run)
    run.acked(0, "z", 0, key=K1)
    run.polled(6, {K: [(0, "a"), (1, "b")], K1: [(0, "z")]})
    run.history.assign(6, [K1]).ok()
    run.history.assign(6, [K, K1]).ok()
    run.polled(6, {K: [(0, "a")]})  # from the start again: K was unassigned in between
    run.final([(0, "z")], key=K1)
    result = run.check()
    assert result.valid, result.violations


def test_gaps_in_offsets_are_not_skips(run: Run) -> None:
    run.acked(0, "a", 0)
    run.acked(0, "b", 5)  # control records in between
    run.polled(5, {K: [(0, "a")]})
    run.polled(5, {K: [(5, "b")]})
    run.final([(0, "a"), (5, "b")])
    assert run.check().valid


def test_out_of_order_values_within_one_poll(run: Run) -> None:
    _clean(run)
    run.polled(6, {K: [(0, "a"), (2, "c")]})
    run.polled(7, {K: [(1, "b"), (0, "a")]})
    result = run.check()
    assert _violations(result) == {"int-poll-skip": 1, "int-nonmonotonic-poll": 1}


def test_an_acknowledged_send_landing_below_the_previous_one_is_a_nonmonotonic_send(run: Run) -> None:
    first = run.history.send(0, K, "a")
    second = run.history.send(0, K, "b")
    run.history.send_ok(first, 1)
    run.history.send_ok(second, 0)  # sent after a, landed before it
    run.polled(5, {K: [(0, "b"), (1, "a")]})
    run.final([(0, "b"), (1, "a")])
    result = run.check()
    assert _violations(result) == {"nonmonotonic-send": 1}
    example = result.examples["nonmonotonic-send"][0]
    assert (example["value"], example["offset"], example["previous_value"]) == ("b", 0, "a")


def test_pipelined_sends_completing_out_of_order_keep_their_invoke_order(run: Run) -> None:
    sends = [run.history.send(0, K, value) for value in "abc"]
    for operation, offset in sorted(zip(sends, range(3), strict=True), key=lambda pair: -pair[1]):
        run.history.send_ok(operation, offset)
    run.polled(5, {K: ABC})
    run.final(ABC)
    assert run.check().valid


def test_two_processes_interleaving_is_not_an_order_violation(run: Run) -> None:
    run.acked(0, "a", 0)
    run.acked(1, "b", 1)
    run.acked(0, "c", 2)
    run.polled(5, {K: ABC})
    run.final(ABC)
    assert run.check().valid


# -- replicas ---------------------------------------------------------------------------------------


def test_a_replica_differing_below_the_high_watermark_is_divergent(run: Run) -> None:
    _clean(run)
    run.history.replica_log(1, K, ABC, high_watermark=3, log_end_offset=3)
    run.history.replica_log(2, K, [(0, "a"), (1, "x"), (2, "c")], high_watermark=3, log_end_offset=3)
    run.history.replica_log(3, K, [(0, "a")], high_watermark=3, log_end_offset=1)
    result = run.check()
    assert _violations(result) == {"replica-divergence": 3}
    assert result.examples["replica-divergence"][0] == {
        "key": K,
        "broker": 2,
        "offset": 1,
        "leader_value": "b",
        "replica_value": "x",
        "high_watermark": 3,
        "leader_high_watermark": 3,
        "compared_with": "final read",
    }
    assert [
        (e["broker"], e["offset"], e["replica_value"]) for e in result.examples["replica-divergence"][1:]
    ] == [
        (3, 1, None),
        (3, 2, None),
    ]


def test_a_replica_differing_above_the_high_watermark_is_fine(run: Run) -> None:
    _clean(run)
    run.history.replica_log(1, K, [*ABC, (3, "uncommitted")], high_watermark=3, log_end_offset=4)
    run.history.replica_log(2, K, [(0, "a"), (1, "b"), (2, "y")], high_watermark=2, log_end_offset=3)
    run.history.replica_log(3, K, [(0, "a"), (1, "b")], high_watermark=2, log_end_offset=2)
    assert run.check().valid


def test_without_a_final_read_the_leaders_log_is_the_reference(run: Run) -> None:
    run.history.replica_log(1, K, ABC, high_watermark=3, leader=True)
    run.history.replica_log(2, K, [(0, "a"), (1, "x")], high_watermark=2)
    run.history.replica_log(3, K, [(0, "q")], high_watermark=None)
    result = run.check()
    assert _violations(result) == {"replica-divergence": 1}
    assert result.examples["replica-divergence"][0]["compared_with"] == "broker 1's log"
    assert f"{K}: broker 3's log not compared (its high watermark is unknown)" in result.notes


# -- unavailability ---------------------------------------------------------------------------------


def test_unavailability_runs_from_a_failing_send_to_the_next_acknowledgement(run: Run) -> None:
    run.at(0).acked(0, "a", 0)
    run.at(500).history.fault({"kind": "kill-leader", "broker": 1})
    failing = run.at(1000).history.send(0, K, "x")
    run.at(2000)
    failing.fail(error="NOT_LEADER_FOR_PARTITION")
    run.at(2500).indeterminate(0, "y")
    run.at(5000).acked(0, "b", 1)
    run.at(6000).history.heal({"kind": "kill-leader", "broker": 1})
    run.acked(0, "c", 2, key=K1)
    run.at(7000).failed(1, "z", key=K1)  # still failing when the history ends
    run.polled(5, {K: [(0, "a"), (1, "b")], K1: [(2, "c")]})
    run.final([(0, "a"), (1, "b")])
    run.final([(2, "c")], key=K1)
    result = run.check()
    assert result.valid
    window = result.unavailability[K]
    assert (window.start_ns, window.end_ns, window.failed_sends) == (1_000_000_000, 5_000_000_000, 2)
    assert window.duration_s == pytest.approx(4.0)
    assert (window.error, window.open) == ("NOT_LEADER_FOR_PARTITION", False)
    assert [fault["f"] for fault in window.faults] == ["fault"]
    assert result.longest_unavailability == window
    assert result.unavailability[K1].open


def test_a_send_failing_after_a_later_acknowledgement_opens_its_window_there(run: Run) -> None:
    slow = run.at(0).history.send(0, K, "x")
    run.at(100).acked(1, "a", 0)
    run.at(3000)
    slow.info(error="REQUEST_TIMED_OUT")
    run.at(3500).acked(1, "b", 1)
    run.polled(5, {K: [(0, "a"), (1, "b")]})
    run.final([(0, "a"), (1, "b")])
    window = run.check().unavailability[K]
    assert (window.start_ns, window.end_ns) == (100_000_000, 3_500_000_000)


# -- the result ---------------------------------------------------------------------------------------


def test_examples_are_capped_but_counts_are_not(run: Run) -> None:
    for offset in range(5):
        run.acked(0, f"v{offset}", offset)
    run.final([])
    result = run.check(max_examples=2)
    assert result.counts["lost"] == 5
    assert [e["value"] for e in result.examples["lost"]] == ["v0", "v1"]
    assert result.as_json()["counts"]["lost"] == 5


def test_a_truncated_history_is_checked_up_to_the_tear(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, ManualClock()) as history:
        send: Operation = history.send(0, K, "a")
        history.send_ok(send, 0)
        history.final_read(9, K, [(0, "a")], high_watermark=1)
    path.write_bytes(path.read_bytes() + b'{"index": 3, "time_')
    result = check_history(read_history(path))
    assert result.valid
    assert result.truncated_line == 4
    assert result.notes[0].startswith("line 4 is truncated")
    assert result.as_json()["truncated_line"] == 4
